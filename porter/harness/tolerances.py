"""Tolerances of upstream's `TestConsistency.test_output_match`.

Mirrors `_compute_tolerances(op, dtype)` of `test/test_mps.py`: `(None, None)` means
torch.testing's per-dtype defaults; the low-precision op lists loosen float32 / float16 /
bfloat16. The lists are class attributes of `TestConsistency`; they are read statically from
the checkout's `test/test_mps.py` when it has them, else from the built-in copy below (names
only, as of upstream in 2025-2026). OpInfo `toleranceOverride` / `precisionOverride`
DecorateInfos act as floors on top, exactly as `TestCase.precision` / `rel_tol` do upstream.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable

from porter.source.checkout import TEST_MPS, Checkout


BUILTIN_LISTS: dict[str, frozenset[str]] = {
    "FP16_LOW_PRECISION_LIST": frozenset({
        "add", "sub", "div", "addcdiv", "__rdiv__", "__rmul__", "nn.functional.huber_loss",
        "true_divide", "kron", "gradient", "var", "std", "std_mean", "ldexp",
        "linalg.vector_norm", "lerp", "addr", "var_mean", "var_mean_unbiased", "acosh", "asinh",
        "asin", "masked.std", "nn.functional.avg_pool2d", "nn.functional.normalize",
        "nn.functional.triplet_margin_loss", "nn.functional.triplet_margin_with_distance_loss",
        "nn.functional.batch_norm", "nn.functional.group_norm", "nn.functional.instance_norm",
        "round", "xlogy", "addcmul", "nn.functional.cross_entropy",
        "nn.functional.binary_cross_entropy", "nn.functional.nll_loss",
        "nn.functional.max_pool2d", "nn.functional.gelu", "nn.functional.glu",
        "_native_batch_norm_legit", "_batch_norm_with_update", "native_batch_norm", "softmax",
        "_softmax_backward_data", "log_softmax", "masked.softmax", "masked.log_softmax",
        "masked.softmin", "nn.functional.kl_div", "nn.functional.softmin", "cross",
        "linalg.cross", "prod", "masked.prod", "nextafter", "native_layer_norm",
        "nn.functional.layer_norm", "nn.functional.interpolate", "nn.functional.upsample_nearest",
        "norm", "masked.normalize", "arange", "linspace", "special.xlog1py", "masked.sum",
        "masked.var", "outer", "sum_to_size", "sum", "mul", "nansum", "nanmean",
    }),
    "FP32_LOW_PRECISION_LIST": frozenset({
        "nn.functional.conv2d", "nn.functional.conv_transpose2d", "matmul", "__rmatmul__",
        "linalg.multi_dot", "addbmm",
    }),
    "BF16_LOW_PRECISION_LIST": frozenset({
        "nn.functional.linear", "nn.functional.gaussian_nll_loss",
    }),
}

_GEMM_LIKE = frozenset({
    "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d",
    "nn.functional.conv_transpose3d", "__rmatmul__", "addbmm", "addmm", "addmv", "baddbmm",
    "corrcoef", "cov", "linalg.multi_dot", "matmul", "mv", "nn.functional.linear",
})
_FFT = frozenset({"fft.rfftn", "fft.hfftn", "fft.hfft2", "fft.fft", "fft.fftn", "fft.rfft"})
_INTS = frozenset({"int8", "uint8", "int16", "int32", "int64"})


@dataclass(frozen=True)
class LowPrecisionLists:
    fp32: frozenset[str]
    fp16: frozenset[str]
    bf16: frozenset[str]
    source: str            # "test/test_mps.py", "test/test_mps.py (_compute_tolerances)" or "built-in"
    # the checkout's own `_compute_tolerances(op, dtype)`, when its test_mps.py has one
    rules: Callable | None = None

    def tolerances(self, info, dtype) -> tuple[float | None, float | None]:
        """(atol, rtol) of an OpInfo on a torch dtype: the checkout's rules when it has them,
        else porter's table (compute_tolerances)."""
        # a backward op or a --grad test takes its forward OpInfo's tolerances
        name = getattr(info, "tolerance_name", info.name)
        variant = getattr(info, "tolerance_variant", info.variant_test_name)
        if self.rules is not None:
            from types import SimpleNamespace
            return self.rules(SimpleNamespace(name=name, variant_test_name=variant), dtype)
        return compute_tolerances(self, name, variant, str(dtype).removeprefix("torch."))


def load_lists(checkout: Checkout | None) -> LowPrecisionLists:
    found: dict[str, frozenset[str]] = {}
    source = "built-in"
    if checkout is not None and checkout.exists(TEST_MPS):
        found = _parse_lists(checkout.read(TEST_MPS))
        if found:
            source = TEST_MPS
    rules = None
    if checkout is not None and checkout.exists(TEST_MPS):
        text = checkout.read(TEST_MPS)
        if "def _compute_tolerances" in text:
            rules = _Lazy(text)         # compiled on first use: it imports torch
            source = f"{TEST_MPS} (_compute_tolerances)"
    # a list missing from an older test_mps.py (bf16 arrived later) simply does not apply
    pick = (lambda n: found.get(n, frozenset())) if found else BUILTIN_LISTS.__getitem__
    return LowPrecisionLists(pick("FP32_LOW_PRECISION_LIST"), pick("FP16_LOW_PRECISION_LIST"),
                             pick("BF16_LOW_PRECISION_LIST"), source, rules)


class _Lazy:
    """The checkout's rules, compiled when first asked; porter's table if they do not compile."""

    def __init__(self, text: str):
        self.text, self.fn, self.tried = text, None, False

    def __call__(self, op, dtype):
        if not self.tried:
            self.tried, self.fn = True, checkout_rules(self.text)
        if self.fn is None:
            return compute_tolerances(load_lists(None), op.name, op.variant_test_name,
                                      str(dtype).removeprefix("torch."))
        return self.fn(op, dtype)


def checkout_rules(text: str) -> Callable | None:
    """The checkout's `TestConsistency._compute_tolerances` as a function (op, dtype), or None.

    Only that method and the class's constant assignments (the *_LIST sets) are compiled,
    in a namespace holding torch: test_mps.py itself imports MPS-only code and cannot be
    imported off a Mac. The checkout is the user's own tree, whose torch the harness runs."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        method = next((f for f in node.body if isinstance(f, ast.FunctionDef)
                       and f.name == "_compute_tolerances"), None)
        if method is None:
            continue
        constants = [stmt for stmt in node.body
                     if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and _is_constant(stmt.value)]
        cls = ast.parse("class _Rules:\n    pass\n").body[0]
        cls.body = constants + [method]
        module = ast.fix_missing_locations(ast.Module(body=[cls], type_ignores=[]))
        import torch
        namespace: dict = {"torch": torch}
        try:
            exec(compile(module, TEST_MPS, "exec"), namespace)   # noqa: S102 - see docstring
        except Exception:
            return None
        rules = namespace["_Rules"]()
        return rules._compute_tolerances
    return None


def _is_constant(value) -> bool:
    try:
        ast.literal_eval(value)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _parse_lists(text: str) -> dict[str, frozenset[str]]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name.startswith("TestConsistency"):
            out = {}
            for stmt in node.body:
                if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                        and isinstance(stmt.targets[0], ast.Name)
                        and stmt.targets[0].id.endswith("_LOW_PRECISION_LIST")
                        and isinstance(stmt.value, (ast.Set, ast.List, ast.Tuple))):
                    out[stmt.targets[0].id] = frozenset(
                        e.value for e in stmt.value.elts
                        if isinstance(e, ast.Constant) and isinstance(e.value, str))
            if out:
                return out
    return {}


def compute_tolerances(lists: LowPrecisionLists, name: str, variant: str,
                       dtype: str) -> tuple[float | None, float | None]:
    """upstream `_compute_tolerances`, on names (`dtype` as `"float16"` etc.)."""
    if name in lists.fp32 and dtype in ("float32", "complex64"):
        return (1e-4, 3e-5)
    if name in lists.fp16 and dtype in ("float16", "bfloat16"):
        return (2e-2, 1e-2) if dtype == "float16" else (5e-2, 5e-2)
    if name in lists.bf16 and dtype == "bfloat16":
        return (5e-2, 5e-2)
    if name in _GEMM_LIKE and dtype in ("float16", "bfloat16"):
        return (5e-2, 5e-2) if dtype == "float16" else (5e-2, 1e-1)
    if name == "masked.mean":
        return (7e-4, 2e-3)
    if name == "native_layer_norm":
        return (1e-4, 1.3e-5)
    if name in _FFT:
        return (3e-5, 3e-5)
    if name == "linspace" and dtype in _INTS:
        return (1.0, 0.0)
    if name == "index_reduce" and variant in ("mean", "prod") and dtype in ("float16", "bfloat16"):
        return (0.01, 0.01)
    return (None, None)


def per_sample_tolerances(name: str, dtype: str, kwargs: dict,
                          tols: tuple[float | None, float | None]) -> tuple[float | None, float | None]:
    """upstream's sample-dependent cases (float vs double scale computation)."""
    if (name == "nn.functional.interpolate" and dtype == "uint8"
            and kwargs.get("mode") == "bilinear" and kwargs.get("recompute_scale_factor") is True
            and kwargs.get("scale_factor") == 1.7):
        return (1, 0)
    if name in ("_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa") \
            and kwargs.get("scale_factors") == [1.7, 0.9]:
        return (2e-5, 2e-6)
    return tols
