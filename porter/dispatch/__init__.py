"""What the Metal emulator and the test harness share: which kernel runs a sample, with what
output type, and tensors as numpy sees them.

- `kernel_choice`: the host kernel an op's sample dispatches to (among those a *Kernel.mm
  dispatches), the dtype its operands are promoted to, the output dtype the op's meta function
  gives, and the registration of the .metal file that matches them. One choice for
  `--device emulate`, `--device mps-shader` and the reference cache's recorder.
- `metal_types`: Metal scalar types and torch's dtype names, both ways.
- `arrays`: `PArray`, a tensor's dtype name and values as a numpy array (the reference cache's
  samples, the emulator's warm path, which runs without torch).
- `sample_devices`: a SampleInput moved to a device (the meta function's output dtype, the
  harness's device copies).

A leaf of the import graph. May import: the standard library, numpy, torch (lazily, inside
functions) and `porter.errors`; never another porter package (tests/test_layout.py).
"""
