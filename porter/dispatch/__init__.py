"""What the Metal emulator and the test harness share: which kernel runs a sample, with what
output type, and tensors as numpy sees them.

- `kernel_choice`: the host kernel an op's sample dispatches to (among those a *Kernel.mm
  dispatches), the dtype its operands are promoted to, the output dtype the op's meta function
  gives, and the registration of the .metal file that matches them. One choice for
  `--device emulate`, `--device mps-shader` and the reference cache's recorder. With it, the
  table of Metal types and torch's dtype names, and a SampleInput moved between devices.
- `numpy_tensors`: the portable arrays: `PArray`, a tensor's dtype name and values as a numpy
  array (the reference cache's samples, the emulator's warm path, which runs without torch),
  and upstream's `assertEqual` on them.

A leaf of the import graph. May import: the standard library, numpy, torch (lazily, inside
functions) and `porter.errors`; never another porter package (tests/test_layout.py).
"""
