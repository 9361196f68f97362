"""Host emulation of PyTorch's Metal kernels: build .metal files with g++ and run them on the CPU.

- `build`: compiles a kernel file against our Metal shim (include/) and the real c10/metal
  headers into a cached shared library; each (op, dtype) registration becomes a C entry point.
- `worker` / `client`: run kernels in a child process, so a crashing kernel is a result.
- `torch_run` / `numpy_run`: TensorIterator-like semantics (broadcasting, strides, dense or
  strided entry point) around one registration, on torch tensors or on numpy arrays.
- `kernel_check`: `porter emulate check`; `emulator_device`: `porter test --device emulate`
  (which registration runs a sample is porter.dispatch.kernel_choice's).

Imports torch only lazily. May import: `porter.dispatch`, `porter.source`, `porter.runtime`,
`porter.errors`, `porter.exit_codes`, and of planning `porter.port.resolve` (whether a stub
has no MPS kernel), `porter.port.functor` (the functor examples build_check compiles) and
`porter.port.ternary_alpha` (the indexing.h addition porter writes, which the emulator models), and
of checking `porter.checks.torchgen_child` and `porter.checks.torchgen_yaml` (torchgen's verdict
on native_functions.yaml, `porter check`'s PORTER040, which a Mac's build runs first) and
`porter.checks.changed` (a git diff's changed lines: the `.mm` files a work tree changes).
Never the harness, which runs this package as one of its devices, nor anything above it
(tests/test_layout.py).
"""
