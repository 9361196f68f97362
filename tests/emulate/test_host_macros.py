"""Macros of the checkout named in what porter reads of a host (porter.emulate.host_macros),
read as the preprocessor reads them (review 23's H05, review 24's M1-M6)."""

from __future__ import annotations

from pathlib import Path

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


def test_a_macro_of_a_checkout_header_the_host_includes_elsewhere(tmp_path):
    """Outside the host folders, a header the `.mm` reads, directly or through another
    (review 25's H21b, H21c: `aten/src/ATen/PorterSwap.h` renaming the exec call)."""
    src = tmp_path / "aten/src"
    (src / "ATen/native/sparse").mkdir(parents=True)
    (src / "ATen/native/sparse/Swap.h").write_text("#pragma once\n#" + RENAME)
    (src / "ATen/Via.h").write_text("#include <ATen/native/sparse/Swap.h>\n")
    direct = "#include <ATen/native/sparse/Swap.h>\n" + REGISTRATION
    through = '#include "ATen/Via.h"\n' + REGISTRATION
    (src / "ATen/Unread.h").write_text("#" + RENAME)                  # included by nothing
    mm = src / "ATen/x.mm"
    for text in (direct, through):
        span = (text.index("REGISTER_DISPATCH"), len(text))
        assert redefined(tmp_path, mm, text, [span]) == \
            "`heaviside_mps_kernel` (aten/src/ATen/native/sparse/Swap.h:2)"
    assert redefined(tmp_path, mm, REGISTRATION, [(0, len(REGISTRATION))]) is None


def test_a_macro_the_installed_torch_defines_alike_is_torchs_own(tmp_path):
    """ATen/native/DispatchStub.h's REGISTER_DISPATCH, read from the checkout: porter models the
    installed torch's, so only a definition that differs from it counts."""
    from porter.emulate.host_compile import wheel_include
    wheel = wheel_include()
    if wheel is None:
        pytest.skip("needs the torch wheel's headers")
    stub = "ATen/native/DispatchStub.h"
    theirs = (Path(wheel) / stub).read_text()
    mine = tmp_path / "aten/src" / stub
    mine.parent.mkdir(parents=True)
    text = f"#include <{stub}>\n" + REGISTRATION
    span = (text.index("REGISTER_DISPATCH"), len(text))
    mine.write_text(theirs + "\n// a comment of the checkout's\n")
    assert redefined(tmp_path, tmp_path / "x.mm", text, [span]) is None
    mine.write_text(theirs + "\n#undef REGISTER_DISPATCH\n#define REGISTER_DISPATCH(name, fn) /* none */\n")
    assert redefined(tmp_path, tmp_path / "x.mm", text, [span]).startswith(f"`REGISTER_DISPATCH` (aten/src/{stub}:")


@pytest.mark.parametrize(("files", "include"), [
    pytest.param({"aten/src/ATen/Swap.h": "#" + RENAME}, "#include_next <ATen/Swap.h>\n", id="include_next"),
    pytest.param({"aten/src/ATen/Swap.txt": "#" + RENAME}, "#include <ATen/Swap.txt>\n", id="a-txt-file"),
    pytest.param({"aten/src/ATen/native/mps/Swap.mm": "#" + RENAME}, "#include <ATen/native/mps/Swap.mm>\n",
                 id="an-mm-file-of-the-host-folders"),
    # the `#undef` is inside the comment the backslash continues (review 26's M7)
    pytest.param({"aten/src/ATen/Swap.h": "#" + RENAME + "// dropped below \\\n#undef heaviside_mps_kernel\n"},
                 "#include <ATen/Swap.h>\n", id="an-undef-in-a-continued-comment"),
])
def test_a_macro_of_a_file_included_otherwise(tmp_path, files, include):
    """Review 26's M2, M5, M6, M7: the preprocessor includes any file, `#include_next` too."""
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    text = include + REGISTRATION
    span = (text.index("REGISTER_DISPATCH"), len(text))
    found = redefined(tmp_path, tmp_path / "aten/src/ATen/x.mm", text, [span])
    assert found is not None and found.startswith("`heaviside_mps_kernel` (aten/src/ATen/"), found


def test_an_include_a_macro_names_is_said(tmp_path):
    """Review 26's M1: `#include PORTER_SWAP_H`, the file a macro names."""
    from porter.emulate.host_macros import computed_include
    (tmp_path / "aten/src/ATen").mkdir(parents=True)
    (tmp_path / "aten/src/ATen/Via.h").write_text("#define SWAP_H <ATen/Swap.h>\n#include SWAP_H\n")
    mm = tmp_path / "aten/src/ATen/x.mm"
    assert computed_include(tmp_path, mm, "#include <ATen/Via.h>\n" + REGISTRATION) == \
        "`#include SWAP_H` (aten/src/ATen/Via.h:2)"
    assert computed_include(tmp_path, mm, "// #include SWAP_H\n#include <ATen/Other.h>\n" + REGISTRATION) is None


def test_include_next_of_a_named_file_is_no_computed_include(tmp_path):
    from porter.emulate.host_macros import computed_include
    (tmp_path / "aten/src/ATen").mkdir(parents=True)
    mm = tmp_path / "aten/src/ATen/x.mm"
    assert computed_include(tmp_path, mm, "#include_next <ATen/Other.h>\n" + REGISTRATION) is None
    assert computed_include(tmp_path, mm, "#include_next OTHER_H\n" + REGISTRATION) == "`#include_next OTHER_H` (aten/src/ATen/x.mm:1)"
