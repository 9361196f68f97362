"""Reading a checkout: every fact porter needs from a PyTorch tree, read-only.

Scanners of C++/ObjC++/Metal text (`cpp_scan`, `metal_scan`, `host_scan`, `mpsgraph_scan`),
the yaml model (`native_yaml`) and what kind of op an entry is (`op_kind`, the one
classification every command reads), DispatchStub declarations (`stubs`), CPU kernels
(`cpu_kernel`), structured ops' meta and impl functions (`native_definitions`: the iterator's
operands, the stubs an impl calls; `stub_route`: which stub a dtype reaches), OpInfo sources
(`opinfo_source`), expectation lists (`xfail_lists`), the `c10/metal` headers (`c10_metal`),
dtype names (`dtypes`) and every checkout path (`checkout`).

May import: the standard library, PyYAML, `porter.errors`, `porter.runtime`. Never planning
(`porter.port`), applying, surveys or commands: reading knows nothing of what is done with it.
"""
