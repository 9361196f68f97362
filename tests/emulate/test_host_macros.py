"""Macros of the checkout named in what porter reads of a host (porter.emulate.host_macros),
read as the preprocessor reads them (review 23's H05, review 24's M1-M6)."""

from __future__ import annotations

import pytest

from porter.emulate.host_macros import redefined

REGISTRATION = "REGISTER_DISPATCH(heaviside_stub, &heaviside_mps_kernel)\n"
RENAME = "define heaviside_mps_kernel copysign_mps_kernel\n"


@pytest.mark.parametrize(("before", "named"), [
    ("#" + RENAME, "`heaviside_mps_kernel` (x.mm:1)"),
    ("  #  " + RENAME, "`heaviside_mps_kernel` (x.mm:1)"),
    ("%:" + RENAME, "`heaviside_mps_kernel` (x.mm:1)"),                  # the digraph of #
    ("#\\\n" + RENAME, "`heaviside_mps_kernel` (x.mm:1)"),               # a line continued
    ("#" + RENAME + "#undef heaviside_mps_kernel\n", None),             # undefined again
    ("#if 0\n#" + RENAME + "#endif\n", None),                           # dropped
    ("// #" + RENAME, None),                                            # a comment
    ('const char* s = "#' + RENAME.strip() + '";\n', None),             # a string
    ("#define heaviside_mps_kernel_2 x\n", None),                       # another name
])
def test_a_macro_of_the_mm_before_the_statement(tmp_path, before, named):
    text = before + REGISTRATION
    span = (text.index("REGISTER_DISPATCH"), len(text))
    assert redefined(tmp_path, tmp_path / "x.mm", text, [span]) == named


def test_a_macro_defined_after_the_statement_is_not_its(tmp_path):
    text = REGISTRATION + "#" + RENAME
    assert redefined(tmp_path, tmp_path / "x.mm", text, [(0, len(REGISTRATION))]) is None


@pytest.mark.parametrize("where", ["aten/src/ATen/native/mps/Swap.h",
                                   "aten/src/ATen/native/mps/operations/Swap.h",
                                   "aten/src/ATen/native/mps/Swap.inc",
                                   "aten/src/ATen/mps/Swap.h"])
def test_a_macro_of_a_file_of_the_host_folders(tmp_path, where):
    path = tmp_path / where
    path.parent.mkdir(parents=True)
    path.write_text("#pragma once\n#" + RENAME)
    assert redefined(tmp_path, tmp_path / "x.mm", REGISTRATION, [(0, len(REGISTRATION))]) == \
        f"`heaviside_mps_kernel` ({where}:2)"


def test_the_kernels_metal_files_are_not_the_hosts(tmp_path):
    path = tmp_path / "aten/src/ATen/native/mps/kernels/Swap.metal"
    path.parent.mkdir(parents=True)
    path.write_text("#" + RENAME)
    assert redefined(tmp_path, tmp_path / "x.mm", REGISTRATION, [(0, len(REGISTRATION))]) is None
