"""Upstream's names for the tests a port changes, as a Mac runs them.

`TestConsistency` is instantiated per device type by `instantiate_device_type_tests`: its tests
are `test_output_match_<op>_<device>_<dtype>` in class `TestConsistency<DEVICE>`, where <op> is
the OpInfo's formatted name (`nn.functional.threshold` -> `nn_functional_threshold`, a variant
appended with `_`). The device is the one the checkout's test/test_mps.py instantiates it for
(`only_for="mps"` today; older trees used the CPU class and moved tensors to MPS themselves).
test_ops.py's `TestCommon` runs on MPS as `TestCommonMPS`, `test_<name>_<op>_mps_<dtype>`.

A backward op (`softplus_backward`) has no OpInfo and no test of its own name: a Mac runs its
kernel in `test_output_grad_match_<forward op>_mps_<dtype>`, the forward OpInfo's gradient
checked against the CPU's, for upstream's MPS_GRAD_DTYPES only. There is no
`test_output_match_softplus_backward_mps_*`: a `-k` of that name selects nothing.
"""

from __future__ import annotations

import re

from porter.source import checkout as co

# upstream test_mps.py's MPS_GRAD_DTYPES: what test_output_grad_match sends
GRAD_DTYPES = ("float16", "float32")
ONLY_FOR_RE = re.compile(r"instantiate_device_type_tests\(\s*TestConsistency\b[^)]*?only_for\s*=\s*[\"'](\w+)[\"']")


def consistency_device(checkout: co.Checkout | None) -> str:
    if checkout is not None and checkout.exists(co.TEST_MPS):
        m = ONLY_FOR_RE.search(checkout.read(co.TEST_MPS))
        if m:
            return m.group(1)
    return "mps"


def fragment(opinfo_full_name: str) -> str:
    """`nn.functional.threshold` -> `nn_functional_threshold`; `round.decimals_0` -> `round_decimals_0`."""
    return opinfo_full_name.replace(".", "_")


def output_match(opinfo_full_name: str, dtype: str, device: str = "mps") -> str:
    return f"TestConsistency{device.upper()}.test_output_match_{fragment(opinfo_full_name)}_{device}_{dtype}"


def output_grad_match(forward_full_name: str, dtype: str, device: str = "mps") -> str | None:
    """The Mac test that runs a backward op's kernel on `dtype`, through its forward OpInfo
    (None: test_output_grad_match does not send that dtype, so no Mac test runs it)."""
    if dtype not in GRAD_DTYPES:
        return None
    return (f"TestConsistency{device.upper()}.test_output_grad_match_{fragment(forward_full_name)}"
            f"_{device}_{dtype}")


def forward_opinfo(via: str) -> str:
    """The forward OpInfo's full name in a backward op's `via`
    ("nn.functional.softplus (tools/autograd/derivatives.yaml:12: softplus_backward(...))")."""
    return via.split(" ", 1)[0]


def commands(opinfo_full_name: str, device: str = "mps", grad: bool = False) -> list[str]:
    """The commands that run the op's upstream tests on a Mac (unittest's -k: substrings, OR'ed)."""
    frag = fragment(opinfo_full_name)
    mps = f"python test/test_mps.py -v -k test_output_match_{frag}_{device}_"
    if grad:
        mps += f" -k test_output_grad_match_{frag}_{device}_"
    return [mps, f"python test/test_ops.py -v -k _{frag}_mps_"]


def backward_commands(forward_full_name: str, device: str = "mps") -> list[str]:
    """The command that runs a backward op's kernel on a Mac: its forward op's gradient test
    (test_ops.py's TestCommonMPS checks no MPS gradient)."""
    return [f"python test/test_mps.py -v -k test_output_grad_match_{fragment(forward_full_name)}_{device}_"]
