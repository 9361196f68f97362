"""Upstream's names for the tests a port changes, as a Mac runs them.

`TestConsistency` is instantiated per device type by `instantiate_device_type_tests`: its tests
are `test_output_match_<op>_<device>_<dtype>` in class `TestConsistency<DEVICE>`, where <op> is
the OpInfo's formatted name (`nn.functional.threshold` -> `nn_functional_threshold`, a variant
appended with `_`). The device is the one the checkout's test/test_mps.py instantiates it for
(`only_for="mps"` today; older trees used the CPU class and moved tensors to MPS themselves).
test_ops.py's `TestCommon` runs on MPS as `TestCommonMPS`, `test_<name>_<op>_mps_<dtype>`.
"""

from __future__ import annotations

import re

from porter.source import checkout as co

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


def commands(opinfo_full_name: str, device: str = "mps", grad: bool = False) -> list[str]:
    """The commands that run the op's upstream tests on a Mac (unittest's -k: substrings, OR'ed)."""
    frag = fragment(opinfo_full_name)
    mps = f"python test/test_mps.py -v -k test_output_match_{frag}_{device}_"
    if grad:
        mps += f" -k test_output_grad_match_{frag}_{device}_"
    return [mps, f"python test/test_ops.py -v -k _{frag}_mps_"]
