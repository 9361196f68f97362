"""How upstream's `test_output_match` asks the OpInfo for samples, read from the checkout.

`op.sample_inputs(device, dtype, requires_grad=..., include_conjugated_inputs=..., set_seed=True)`:
the keywords change what an OpInfo generates (34 OpInfos of torch 2.13 give other samples with
`requires_grad=True`), so porter passes what the checkout's `test/test_mps.py` passes. Read
statically (`ast`): the file imports MPS-only code. Without the file, or where its test does
not call `sample_inputs` (a trimmed checkout), porter uses upstream's current call:
`requires_grad=(dtype.is_floating_point or dtype.is_complex)`, no conjugated inputs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache

from porter.source.checkout import TEST_MPS, Checkout

TEST_NAME = "test_output_match"


@dataclass(frozen=True)
class SampleRules:
    requires_grad: bool          # requires_grad=(dtype.is_floating_point or dtype.is_complex)
    conjugated: bool             # include_conjugated_inputs for complex dtypes
    source: str                  # TEST_MPS or "built-in"

    def kwargs(self, info, dtype) -> dict:
        grad = self.requires_grad and (dtype.is_floating_point or dtype.is_complex)
        out = {"requires_grad": grad, "set_seed": True}
        if self.conjugated and dtype.is_complex and getattr(info, "test_conjugated_samples", True):
            out["include_conjugated_inputs"] = True
        return out


BUILT_IN = SampleRules(requires_grad=True, conjugated=False, source="built-in")


def load(checkout: Checkout | None) -> SampleRules:
    if checkout is None or not checkout.exists(TEST_MPS):
        return BUILT_IN
    return parse(checkout.read(TEST_MPS)) or BUILT_IN


@lru_cache(maxsize=2)
def parse(text: str) -> SampleRules | None:
    """The keywords of the `sample_inputs` call in `test_output_match`, or None; once per text:
    a cached run asks twice (whether the cache applies, then the run's header), and upstream's
    test_mps.py is ~13k lines, ~0.2 s a parse."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == TEST_NAME:
            for call in ast.walk(node):
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr == "sample_inputs"):
                    return _rules(call)
    return None


def _rules(call: ast.Call) -> SampleRules:
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    grad = keywords.get("requires_grad")
    # requires_grad=False (or absent) asks for plain samples; any expression of the dtype
    # (upstream's `dtype.is_floating_point or dtype.is_complex`) for grad-carrying ones
    requires_grad = grad is not None and not (isinstance(grad, ast.Constant) and not grad.value)
    conj = keywords.get("include_conjugated_inputs")
    conjugated = conj is not None and not (isinstance(conj, ast.Constant) and not conj.value)
    return SampleRules(requires_grad, conjugated, TEST_MPS)
