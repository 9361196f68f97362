"""Tolerances of upstream's `TestConsistency.test_output_match`.

`(None, None)` means torch.testing's per-dtype defaults. When the checkout has a
`test/test_mps.py`, its own rules decide: the statements of its test_output_match that set
atol/rtol (its `_compute_tolerances`, pow's, interpolate's and upsample's rules, whatever that
version has) are cut out and run (porter.harness.tolerance_rules). Only where it has none, or
they cannot be isolated, does porter fall back to its built-in table below, which is
APPROXIMATE: a copy of upstream's 2025-2026 `_compute_tolerances` and sample overrides, fed the
checkout's low-precision lists when it has them; the source porter reports says which.
OpInfo `toleranceOverride` / `precisionOverride` DecorateInfos act as floors on top, exactly as
`TestCase.precision` / `rel_tol` do upstream.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property

from porter.harness import tolerance_rules
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
    # where the tolerances come from, as `porter test`'s header and --json say it: the
    # checkout's test (TOLERANCES_FROM_TEST), its lists with porter's rules, or porter's table
    source: str
    # the checkout's own rules, cut out of its test_output_match (tolerance_rules)
    rules: tolerance_rules.CheckoutRules | None = None
    # the test_mps.py text whose test_output_grad_match `grad_rules` are cut out of; None where
    # its test_output_match's could not be (the built-in gradient table applies)
    grad_text: str | None = field(default=None, repr=False, compare=False)

    @cached_property
    def _grad(self) -> tuple[tuple | None, str]:
        """(grad_rules, grad_source): cut out on first use, which only --grad makes (three
        isolations of test_mps.py per run where one decides every other test's tolerances)."""
        if self.grad_text is None:
            return None, "porter's built-in gradient table (approximate)"
        output, gradients = (tolerance_rules.isolate(self.grad_text, GRAD_TEST, check)
                             for check in (0, 1))
        if isinstance(output, tolerance_rules.Isolated) and isinstance(gradients, tolerance_rules.Isolated):
            return ((tolerance_rules.CheckoutRules(output), tolerance_rules.CheckoutRules(gradients)),
                    GRAD_TOLERANCES_FROM_TEST)
        reason = (output if isinstance(output, tolerance_rules.Refused) else gradients).reason
        return None, f"porter's built-in gradient table (approximate: {reason})"

    @property
    def grad_rules(self) -> tuple[tolerance_rules.CheckoutRules, tolerance_rules.CheckoutRules] | None:
        """--grad: its test_output_grad_match's rules for the output, then for the gradients."""
        return self._grad[0]

    @property
    def grad_source(self) -> str:
        return self._grad[1]

    @property
    def approximate(self) -> bool:
        return self.rules is None

    def tolerances(self, info, dtype, macos: tuple[int, int] | None = None
                   ) -> tuple[float | None, float | None]:
        """(atol, rtol) of an OpInfo on a torch dtype before any sample is looked at: the
        checkout's rules when it has them, else porter's table (compute_tolerances)."""
        return self.for_sample(info, dtype, None, macos)

    def for_sample(self, info, dtype, sample, macos: tuple[int, int] | None = None
                   ) -> tuple[float | None, float | None]:
        """(atol, rtol) for one sample (its kwargs pick interpolate's and upsample's rules)."""
        # a backward op or a --grad test takes its forward OpInfo's tolerances
        name = getattr(info, "tolerance_name", info.name)
        variant = getattr(info, "tolerance_variant", info.variant_test_name)
        if getattr(info, "test_name", None) == GRAD_TEST and self.grad_rules is not None:
            return _checkout(self.grad_rules[0], name, variant, _dtype_name(dtype), sample, macos)
        return self.named(name, variant, _dtype_name(dtype), sample, macos)

    def gradient_tolerances(self, info, dtype, sample, macos: tuple[int, int] | None = None
                            ) -> tuple[float | None, float | None] | None:
        """(atol, rtol) test_output_grad_match compares the gradients with; None where the
        checkout's test has no such rules (the caller's built-in table applies)."""
        if self.grad_rules is None:
            return None
        return _checkout(self.grad_rules[1], getattr(info, "tolerance_name", info.name),
                         getattr(info, "tolerance_variant", info.variant_test_name),
                         _dtype_name(dtype), sample, macos)

    def named(self, name: str, variant: str, dtype: str, sample=None,
              macos: tuple[int, int] | None = None) -> tuple[float | None, float | None]:
        """`for_sample` on names (`dtype` as "float16"); the cached run has no OpInfo."""
        if self.rules is not None:
            return _checkout(self.rules, name, variant, dtype, sample, macos)
        tols = compute_tolerances(self, name, variant, dtype)
        if sample is None:
            return tols
        return per_sample_tolerances(name, dtype, sample.kwargs, tols)


def _checkout(rules, name: str, variant: str, dtype: str, sample, macos):
    if sample is not None:
        return rules(name, variant, dtype, sample, macos)
    try:
        return rules(name, variant, dtype, None, macos)
    except Exception:   # a rule that reads the sample's tensors decides per sample only
        return (None, None)


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


GRAD_TEST = "test_output_grad_match"
TOLERANCES_FROM_TEST = f"{TEST_MPS} (TestConsistency.test_output_match)"
GRAD_TOLERANCES_FROM_TEST = f"{TEST_MPS} (TestConsistency.{GRAD_TEST})"


def load_lists(checkout: Checkout | None) -> LowPrecisionLists:
    """The checkout's tolerance rules when its test_mps.py's can be isolated; else its lists
    (when it has them) with porter's rules, or porter's own table; the source says which."""
    text = checkout.read(TEST_MPS) if checkout is not None and checkout.exists(TEST_MPS) else None
    found = _parse_lists(text) if text is not None else {}
    # a list missing from an older test_mps.py (bf16 arrived later) simply does not apply
    pick = (lambda n: found.get(n, frozenset())) if found else BUILTIN_LISTS.__getitem__
    lists = (pick("FP32_LOW_PRECISION_LIST"), pick("FP16_LOW_PRECISION_LIST"),
             pick("BF16_LOW_PRECISION_LIST"))
    if text is None:
        return LowPrecisionLists(*lists, f"porter's built-in table (approximate: the checkout "
                                 f"has no {TEST_MPS})")
    isolated = tolerance_rules.isolate(text)
    if isinstance(isolated, tolerance_rules.Isolated):
        return LowPrecisionLists(*lists, TOLERANCES_FROM_TEST, tolerance_rules.CheckoutRules(isolated),
                                 grad_text=text)
    what = f"{TEST_MPS}'s lists with" if found else ""
    return LowPrecisionLists(*lists, f"{what} porter's built-in rules (approximate: "
                             f"{isolated.reason})".strip())


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
    """Built-in, approximate: upstream's 2025 `_compute_tolerances`, on names (`dtype` as
    `"float16"` etc.). Used only when the checkout's own rules cannot be run."""
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
    """Built-in, approximate: upstream's 2025 sample-dependent cases (float vs double scale
    computation). Used only when the checkout's own rules cannot be run."""
    if (name == "nn.functional.interpolate" and dtype == "uint8"
            and kwargs.get("mode") == "bilinear" and kwargs.get("recompute_scale_factor") is True
            and kwargs.get("scale_factor") == 1.7):
        return (1, 0)
    if name in ("_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa") \
            and kwargs.get("scale_factors") == [1.7, 0.9]:
        return (2e-5, 2e-6)
    return tols
