"""Host emulation of PyTorch's Metal kernels: build .metal files with g++ and run them on the CPU.

- `build`: compiles a kernel file against our Metal shim (include/) and the real c10/metal
  headers into a cached shared library; each (op, dtype) registration becomes a C entry point.
- `worker` / `client`: run kernels in a child process, so a crashing kernel is a result.
- `runner`: TensorIterator-like semantics (promotion, broadcasting, strides) around a kernel.
- `check`: `porter emulate check`; `backend`: `porter test --device emulate`.

Only this package and porter/harness import torch, and only lazily. May import
`porter.source`, `porter.runtime` and the harness's records; never the commands.
"""
