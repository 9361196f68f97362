"""porter.port.edits.host: where a new registration line goes in the `.mm` host file."""

from __future__ import annotations

import pytest

from porter.port.edits import host



def _ti(names) -> str:
    return "namespace at::native {\n" + "".join(
        f"REGISTER_UNARY_TI_DISPATCH({n});\n" for n in names) + "} // namespace at::native\n"


@pytest.mark.parametrize(("names", "new", "after"), [
    pytest.param(("neg", "bitwise_not", "sinc"), "sign", ("neg", "bitwise_not", "sinc", "sign"),
                 id="unsorted list: after the last"),
    pytest.param(("cos", "exp", "sin"), "erf", ("cos", "erf", "exp", "sin"),
                 id="alphabetical list: alphabetical place"),
    pytest.param(("cos", "exp", "sin"), "tan", ("cos", "exp", "sin", "tan"),
                 id="alphabetical list: last"),
])
def test_ti_dispatch_source_order(names, new, after):
    out = host.add_ti_dispatch(_ti(names), new)
    assert out == _ti(after)
    assert host.add_ti_dispatch(out, new) == out


def test_register_dispatch_in_an_alphabetical_list():
    def mm(stubs):
        functions = "".join(f"static void {s}_kernel(TensorIteratorBase& iter) {{\n"
                            f"  lib.exec_binary_kernel(iter, \"{s}\");\n}}\n\n" for s in stubs)
        lines = "".join(f"REGISTER_DISPATCH({s}_stub, &{s}_kernel);\n" for s in stubs)
        return "namespace at::native {\n" + functions + lines + "} // namespace at::native\n"
    out = host.add_kernel_function(mm(["atan2", "fmax", "hypot"]), stub="fmin_stub",
                                   function="fmin_kernel", kernel="fmin", iterator="TensorIteratorBase",
                                   kind="binary")
    lines = [line for line in out.splitlines() if line.startswith("REGISTER_DISPATCH")]
    assert lines == [f"REGISTER_DISPATCH({s}_stub, &{s}_kernel);" for s in ("atan2", "fmax", "fmin", "hypot")]
