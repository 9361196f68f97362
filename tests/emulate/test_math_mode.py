"""A kernel file that compiles a pragma porter does not know is not proven: it may set the
file's floating-point mode, and porter's emulator builds every file in Metal's default mode
(review 27's N17: `#pragma METAL fp math_mode(fast)` made `metal::tanh` the fast one on a Mac,
and was ignored here). The pragmas are read as the preprocessor leaves them, so a macro that
builds one, a `_Pragma`, and one continued on the next line are seen (review 29's F01-F03)."""

from __future__ import annotations

import pytest

from porter.emulate.emulator_device import EmulateBackend

# (the file's text, the line said or None)
CASES = [
    ("#pragma METAL fp math_mode(fast)\nkernel void k() {}\n", 1),
    ("// x\n  #  pragma METAL fp contract(fast)\n", 2),
    ("#pragma clang fp contract(fast)\n", 1),
    ('x;\n_Pragma("METAL fp math_mode(fast)")\n', 2),              # review 28's M02, M02b
    ('#define FAST _Pragma ( "clang fp contract(fast)" )\nFAST\n', 2),
    ("#define P(x) _Pragma(#x)\n\nP(clang fp contract(fast))\n", 3),  # review 29's F01
    ("#pragma float_control(precise, off)\n", 1),                    # F02
    ("#pragma clang \\\n  fp contract(fast)\n", 1),                   # F03
    # what the pragmas porter knows do changes nothing a kernel computes
    ("#pragma unroll\nkernel void k() {}\n", None),
    ("#pragma clang diagnostic push\n#pragma clang diagnostic pop\n", None),
    # a macro never used, a comment, a file without pragmas
    ('#define FAST _Pragma("clang fp contract(fast)")\n', None),
    ("// #pragma METAL fp math_mode(fast) is not used here\n", None),
    ("kernel void k() {}\n", None),
]


@pytest.mark.parametrize(("text", "line"), CASES)
def test_a_pragma_porter_does_not_know_is_said_at_its_line(tmp_path, text, line):
    metal = tmp_path / "K.metal"
    metal.write_text(text)
    said = EmulateBackend(tmp_path)._math_mode(metal)
    if line is None:
        assert said is None, said
    else:
        assert said is not None and said.startswith(f"K.metal:{line}: `#pragma ") \
            and "a pragma porter does not model" in said, said


def test_a_header_the_file_includes_sets_its_mode_too(tmp_path):
    kernels = tmp_path / "aten/src/ATen/native/mps/kernels"
    kernels.mkdir(parents=True)
    (tmp_path / "c10/metal").mkdir(parents=True)
    (tmp_path / "c10/metal/utils.h").write_text("#pragma once\n#pragma METAL fp math_mode(fast)\n")
    (tmp_path / "c10/metal/other.h").write_text("#pragma once\n")
    (tmp_path / "c10/metal/indexing.h").write_text("#pragma once\n")     # the checkout's own c10/metal
    metal = kernels / "K.metal"
    metal.write_text("#include <c10/metal/utils.h>\nkernel void k() {}\n")
    said = EmulateBackend(tmp_path)._math_mode(metal)
    assert said is not None and said.startswith("c10/metal/utils.h:2: "), said
    metal.write_text("#include <c10/metal/other.h>\nkernel void k() {}\n")
    assert EmulateBackend(tmp_path)._math_mode(metal) is None
