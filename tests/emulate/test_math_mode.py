"""A kernel file that sets its floating-point mode by pragma is not proven: porter's emulator
builds every file in Metal's default mode (review 27's N17: `#pragma METAL fp math_mode(fast)`
made `metal::tanh` the fast one on a Mac, and was ignored here)."""

from __future__ import annotations

import pytest

from porter.emulate.emulator_device import _math_mode

# (the file's text, the line said or None)
CASES = [
    ("#pragma METAL fp math_mode(fast)\nkernel void k() {}\n", 1),
    ("// x\n  #  pragma METAL fp contract(fast)\n", 2),
    ("#pragma clang fp contract(fast)\n", 1),
    ("#pragma unroll\nkernel void k() {}\n", None),
    ('x\n_Pragma("METAL fp math_mode(fast)")\n', 2),              # review 28's M02, M02b
    ('#define FAST _Pragma ( "clang fp contract(fast)" )\n', 1),
    ("// #pragma METAL fp math_mode(fast) is not used here\n", None),
    ("kernel void k() {}\n", None),
]


@pytest.mark.parametrize(("text", "line"), CASES)
def test_a_pragma_setting_the_math_mode_is_said_at_its_line(tmp_path, text, line):
    metal = tmp_path / "K.metal"
    metal.write_text(text)
    said = _math_mode(metal)
    if line is None:
        assert said is None
    else:
        assert said is not None and said.startswith(f"{metal}:{line}: `") \
            and "which porter's emulator does not model" in said


def test_a_header_the_file_includes_sets_its_mode_too(tmp_path):
    from porter.emulate.emulator_device import EmulateBackend
    kernels = tmp_path / "aten/src/ATen/native/mps/kernels"
    kernels.mkdir(parents=True)
    (tmp_path / "c10/metal").mkdir(parents=True)
    (tmp_path / "c10/metal/utils.h").write_text("#pragma once\n#pragma METAL fp math_mode(fast)\n")
    (tmp_path / "c10/metal/other.h").write_text("#pragma once\n")
    (tmp_path / "c10/metal/indexing.h").write_text("#pragma once\n")     # the checkout's own c10/metal
    metal = kernels / "K.metal"
    metal.write_text("#include <c10/metal/utils.h>\nkernel void k() {}\n")
    said = EmulateBackend(tmp_path)._math_mode(metal)
    assert said is not None and said.startswith(f"{tmp_path / 'c10/metal/utils.h'}:2: ")
    metal.write_text("#include <c10/metal/other.h>\nkernel void k() {}\n")
    assert EmulateBackend(tmp_path)._math_mode(metal) is None
