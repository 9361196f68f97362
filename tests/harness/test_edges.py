"""Reference inputs reach each dtype's edges (issue 21, item 6): the integer limits and their
neighbours for every op, ±0, ±inf, NaN, subnormals and the narrow floats' limits for floats;
an integer `sign` computed through a `short` (right up to ±32767) fails them."""

from __future__ import annotations

import math
import os
import shutil

import pytest

torch = pytest.importorskip("torch")

from porter.harness import edges  # noqa: E402
from torch.testing._internal.opinfo.core import SampleInput  # noqa: E402
from porter.source.checkout import KERNELS  # noqa: E402
from tests.harness.test_verdicts import verdicts  # noqa: E402
from tests.porter_run import porter  # noqa: E402

# dtype -> values its edge tensor must hold
MUST_HOLD = [
    (torch.uint8, [0, 1, 254, 255]),
    (torch.int8, [-128, -127, -1, 0, 1, 126, 127]),
    (torch.int16, [-2**15, -2**15 + 1, -1, 0, 255, 256, 2**15 - 2, 2**15 - 1]),
    (torch.int32, [-2**31, -2**31 + 1, -2**15 - 1, -1, 0, 255, 256, 2**15 - 1, 2**15, 2**15 + 1,
                   2**31 - 2, 2**31 - 1]),
    (torch.int64, [-2**63, -2**31 - 1, -2**31, -1, 0, 2**15 + 1, 2**31 - 1, 2**31, 2**31 + 1,
                   2**63 - 1]),
]


@pytest.mark.parametrize("dtype,want", MUST_HOLD, ids=lambda v: str(v))
def test_integer_edges(dtype, want):
    got = set(edges.values(dtype).tolist())
    assert set(want) <= got
    info = torch.iinfo(dtype)
    assert min(got) == info.min and max(got) == info.max     # nothing wrapped around


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_float_edges(dtype):
    got = edges.values(dtype)
    info = torch.finfo(dtype)
    vals = got.double().tolist()
    assert any(math.isnan(v) for v in vals)
    assert math.inf in vals and -math.inf in vals
    zeros = got[got == 0]
    assert {math.copysign(1.0, z) for z in zeros.double().tolist()} == {1.0, -1.0}
    assert info.max in vals and -info.max in vals and info.tiny in vals
    subnormal = [v for v in vals if 0 < abs(v) < info.tiny]
    assert subnormal, "no subnormal"
    if dtype == torch.float32:     # the narrow types' limits, as float32 holds them
        assert 65504.0 in vals and float(torch.finfo(torch.bfloat16).max) in vals


def test_bool_and_complex_edges():
    assert set(edges.values(torch.bool).tolist()) == {False, True}
    c = edges.values(torch.complex64)
    assert c.dtype == torch.complex64 and (c == 0).any() and bool(torch.isfinite(c).all())


def test_edge_samples_only_for_elementwise_ops_and_only_what_the_cpu_accepts():
    from torch.testing._internal.common_methods_invocations import op_db
    by = {(o.name, o.variant_test_name): o for o in op_db}
    sub = by[("sub", "")]
    got = edges.edge_samples(sub, torch.int32, sub.sample_inputs("cpu", torch.int32))
    # the edges as first, as second operand, the critical pairs, then alpha's boundaries, and
    # (int32, int64) alpha at 2^24, where a float stops holding every integer
    assert len(got) == 6 and got[4].kwargs["alpha"] == 2**24 and got[5].kwargs["alpha"] == 2**24 + 1
    assert got[0].input.min() == -2**31 and got[0].input.max() == 2**31 - 1
    assert got[1].args[0].min() == -2**31
    # an integer divisor is never 0 or -1 (INT_MIN / -1 traps on the host's CPU)
    div = by[("div", "floor_rounding")]
    for s in edges.edge_samples(div, torch.int64, div.sample_inputs("cpu", torch.int64)):
        assert not ((s.args[0] == 0) | (s.args[0] == -1)).any()
    # not elementwise: no edge samples (their shapes mean something)
    softmax = by[("softmax", "")]
    assert edges.edge_samples(softmax, torch.float32, softmax.sample_inputs("cpu", torch.float32)) == []


@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None, reason="no C++ compiler")
@pytest.mark.slow
def test_an_integer_sign_through_short_fails_the_reference_inputs(real_root):
    res = porter("migrate-from-mpsgraph", "sign", root=real_root)
    assert res.code == 0, res.out + res.err
    metal = real_root / KERNELS / "UnaryKernel.metal"
    text = metal.read_text()
    right = "return static_cast<T>((0 < x) - (x < 0));"
    assert text.count(right) == 1
    code, by_dtype, _ = verdicts(real_root, "sign", "--dtype", "int32", "--dtype", "int64",
                                 "--dtype", "int16", "--reference-inputs")
    assert code == 0, by_dtype
    metal.write_text(text.replace(right, "return static_cast<T>((0 < short(x)) - (short(x) < 0));"))
    res = porter("test", "sign", "--device", "emulate", "--dtype", "int32", "--dtype", "int64",
                 "--dtype", "int16", "--reference-inputs", "--json", root=real_root)
    import json
    upstream, extremal, shapes = json.loads(res.out)["ops"]      # the full verdict's three rows
    assert (extremal["reference"], shapes["shapes"] != []) == (True, True)
    # the layouts' values (within ±9) fit a short as well
    assert {d["outcome"] for d in shapes["dtypes"]} == {"pass"}
    # upstream's own reference inputs stop at ±10701: only the edges catch it
    assert {d["dtype"]: d["outcome"] for d in upstream["dtypes"]} == \
        {"int16": "pass", "int32": "pass", "int64": "pass"}
    assert {d["dtype"]: d["outcome"] for d in extremal["dtypes"]} == \
        {"int16": "pass", "int32": "fail", "int64": "fail"}
    assert res.code == 1


def test_a_binary_op_meets_each_critical_pair_once():
    """heaviside(0, nan) is nan: a kernel that loses the NaN of `b` where `a == 0` passed the
    edge samples, whose other operand was upstream's random values (never 0 beside a NaN).
    Each critical value of a meets each of b's, once: a small fixed set (81 float pairs)."""
    from torch.testing._internal.common_methods_invocations import op_db
    info = next(o for o in op_db if o.name == "heaviside")
    got = edges.edge_samples(info, torch.float32, info.sample_inputs("cpu", torch.float32))
    pairs = [(float(a), float(b)) for a, b in zip(got[-1].input.reshape(-1), got[-1].args[0].reshape(-1))]
    assert len(pairs) == 81
    assert any(a == 0 and math.isnan(b) for a, b in pairs)
    assert any(a == math.inf and b == math.inf for a, b in pairs)
    assert any(a == math.inf and b == -math.inf for a, b in pairs)
    # integers: never a 0 or -1 divisor
    sub = next(o for o in op_db if o.name == "sub" and not o.variant_test_name)
    ints = edges.edge_samples(sub, torch.int32, sub.sample_inputs("cpu", torch.int32))[2]
    assert ints.input.numel() == 15 and not ((ints.args[0] == 0) | (ints.args[0] == -1)).any()
    assert bool(((ints.input == 2**31 - 1) & (ints.args[0] == 1)).any())      # INT_MAX + 1


@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None, reason="no C++ compiler")
@pytest.mark.slow
def test_a_heaviside_that_loses_a_nan_of_b_fails_the_reference_inputs(real_root):
    assert porter("new-op", "heaviside", "--no-test", root=real_root).code == 0
    metal = real_root / KERNELS / "BinaryKernel.metal"
    text = metal.read_text()
    right = "return a == 0 ? b : static_cast<T>(a > 0);"
    assert text.count(right) == 1
    # float16: a Mac flushes float32 subnormals, so there heaviside(1e-45, b) is b, not 1, which
    # passes only through edges.either_flushed's rule and its note; half keeps its subnormals
    code, by_dtype, _ = verdicts(real_root, "heaviside", "--dtype", "float16", "--reference-inputs")
    assert code == 0, by_dtype
    # wrong on purpose: b's NaN lost where a == 0
    metal.write_text(text.replace(right, "return a == 0 ? (b != b ? T(0) : b) : static_cast<T>(a > 0);"))
    code, by_dtype, data = verdicts(real_root, "heaviside", "--dtype", "float16", "--reference-inputs")
    assert code == 1, by_dtype
    extremal = next(o for o in data["ops"] if o["reference"])
    assert [d["outcome"] for d in extremal["dtypes"]] == ["fail"]


# --- the op's scalars meet NaN and their own boundaries ---------------------------------------

def _op(name: str, variant: str = ""):
    from torch.testing._internal.common_methods_invocations import op_db
    return next(o for o in op_db if o.name == name and o.variant_test_name == variant)


def _scalar_samples(info, dtype):
    """The edge samples that scalar_samples added (the last ones; the CPU accepts these)."""
    samples = list(info.sample_inputs("cpu", dtype))
    got = edges.edge_samples(info, dtype, samples)
    added = edges.scalar_samples(samples, dtype, lambda t, n: t.reshape(-1).repeat(n)[:n])
    return got[len(got) - len(added):]


def _holds(t, v) -> bool:
    return bool((t.double() == v).any()) if not math.isnan(v) else bool(t.isnan().any())


def test_logit_with_eps_meets_nan_eps_and_one_minus_eps():
    """logit's first sample has no eps: the edge samples never ran the eps branch with NaN, so
    `clamp(x, eps, 1 - eps)` (NaN in, eps out) passed every dtype."""
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        [sample] = _scalar_samples(_op("logit"), dtype)
        [eps] = sample.args
        assert eps > 0 and float(torch.tensor(eps, dtype=dtype)) == eps     # held exactly
        x = sample.input
        one_minus = float(torch.ones((), dtype=dtype) - torch.tensor(eps, dtype=dtype))
        for v in (math.nan, eps, one_minus, 0.0, 1.0):
            assert _holds(x, v), (dtype, v, x)


def test_threshold_meets_an_input_equal_to_it_on_float32_and_integers():
    """threshold's scalars are random floats: a float32 input never equalled one, so `<` for
    `<=` passed float32 (half and bfloat16 met it by their coarse rounding)."""
    info = _op("nn.functional.threshold")
    for dtype in (torch.float32, torch.int32, torch.uint8):
        sample = _scalar_samples(info, dtype)[0]
        threshold, value = sample.args
        assert _holds(sample.input, threshold), (dtype, threshold, sample.input)
        assert _holds(sample.input, value) or value < 0 and dtype == torch.uint8
    assert _holds(_scalar_samples(info, torch.float32)[0].input, math.nan)


def test_hardshrink_meets_an_input_at_a_positive_lambd():
    """hardshrink's first sample passes lambd = -0.5, where `x >= -lambd && x <= lambd` holds for
    no x: its boundary sample met no boundary, and `<` for `<=` passed float32 (review 23's
    N06). The sample taken is one whose scalars are positive, where upstream has one."""
    for dtype in (torch.float32, torch.float16):
        sample = _scalar_samples(_op("nn.functional.hardshrink"), dtype)[0]
        lambd = sample.kwargs["lambd"]
        assert lambd > 0, sample.kwargs
        assert _holds(sample.input, lambd) and _holds(sample.input, -lambd), (dtype, sample.input)


def test_integer_scalars_also_meet_two_to_the_24():
    """threshold's integer lambda compares in the integer type: a kernel comparing through a
    float (`float(x) <= threshold`) reads 2^24 + 1 as 2^24. A second sample puts every scalar at
    2^24 and the input at its neighbours, a third at 2^24 + 1 (a host converting a scalar through
    a float), for int32 and int64 (narrower types cannot hold it)."""
    info = _op("nn.functional.threshold")
    for dtype in (torch.int32, torch.int64):
        first, wide, odd = _scalar_samples(info, dtype)
        assert wide.args == (2**24, 2**24)
        assert _holds(wide.input, 2**24 + 1) and _holds(wide.input, 2**24 - 1), wide.input
        # and at 2^24 + 1, which a float cannot hold (a host's `to<float>()` makes it 2^24)
        assert odd.args == (2**24 + 1, 2**24 + 1)
        assert _holds(odd.input, 2**24 + 2) and _holds(odd.input, 2**24), odd.input
    assert len(_scalar_samples(info, torch.int16)) == 1


def test_scalar_samples_are_few_and_only_where_there_are_scalars():
    for name, variant in (("nn.functional.threshold", ""), ("logit", ""), ("sub", ""),
                          ("nn.functional.softplus", ""), ("round", "decimals_3")):
        for dtype in (torch.float32, torch.int64):
            # int32/int64: a sample's scalars at 2^24 and at 2^24 + 1 follow it, the last one too
            extra = 1 if dtype == torch.int64 else 0
            assert len(_scalar_samples(_op(name, variant), dtype)) <= edges.MAX_SCALAR_SAMPLES + extra
    assert _scalar_samples(_op("sign"), torch.float32) == []
    assert _scalar_samples(_op("heaviside"), torch.float32) == []


@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None, reason="no C++ compiler")
@pytest.mark.slow
def test_a_logit_clamp_that_loses_nan_fails_the_reference_inputs_on_float16(real_root):
    """Metal's clamp/min/max return the non-NaN operand: logit(NaN, eps) came out as
    logit(eps). Only `porter check` (PORTER051) said so; now the reference inputs do."""
    assert porter("migrate-from-mpsgraph", "logit", root=real_root).code == 0
    metal = real_root / KERNELS / "UnaryKernel.metal"
    text = metal.read_text()
    right = "x_ = x_ < float(eps) ? float(eps) : (x_ > hi ? hi : x_);"
    assert text.count(right) == 1
    # float16: a Mac flushes float32 subnormals (an operand that is one reads as zero), so on
    # float32 this functor passes only through edges.either_flushed's rule; half keeps them
    args = ("logit", "--dtype", "float16", "--reference-inputs")
    code, by_dtype, _ = verdicts(real_root, *args)
    assert code == 0, by_dtype
    for wrong in ("x_ = ::metal::clamp(x_, float(eps), hi);", "x_ = min(max(x_, float(eps)), hi);"):
        metal.write_text(text.replace(right, wrong))
        code, _, data = verdicts(real_root, *args)
        assert code == 1, wrong
        extremal = next(o for o in data["ops"] if o["reference"])
        assert [d["outcome"] for d in extremal["dtypes"]] == ["fail"], wrong


@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None, reason="no C++ compiler")
@pytest.mark.slow
def test_a_threshold_with_lt_for_le_fails_the_reference_inputs_on_float32_and_int32(real_root):
    assert porter("migrate-from-mpsgraph", "threshold", root=real_root).code == 0
    metal = real_root / KERNELS / "ActivationKernel.metal"
    text = metal.read_text()
    floats = "float(x) <= threshold ? value : float(x)"
    ints = "x <= threshold ? value : x"
    assert text.count(floats) == 1 and text.count(ints) == 1
    args = ("nn.functional.threshold", "--dtype", "float32", "--dtype", "int32",
            "--reference-inputs")
    code, by_dtype, _ = verdicts(real_root, *args)
    assert code == 0, by_dtype
    for right, dtype in ((floats, "float32"), (ints, "int32")):
        metal.write_text(text.replace(right, right.replace("<=", "<")))
        code, _, data = verdicts(real_root, *args)
        extremal = next(o for o in data["ops"] if o["reference"])
        outcomes = {d["dtype"]: d["outcome"] for d in extremal["dtypes"]}
        assert code == 1 and outcomes[dtype] == "fail", (right, outcomes)


def test_optional_number_keywords_upstream_never_passes_are_passed():
    """upstream's nan_to_num samples pass none of nan, posinf, neginf (schema defaults None): a
    kernel that ignores posinf passed every sample. One more sample passes each, with values apart
    from one another and from the dtype's extremes, over an input holding NaN and both infinities."""
    info = _op("nan_to_num")
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        got = edges.edge_samples(info, dtype, info.sample_inputs("cpu", dtype))
        passed = [s for s in got if set(s.kwargs) == {"nan", "posinf", "neginf"}]
        assert len(passed) == 1, [s.kwargs for s in got]
        kwargs, x = passed[0].kwargs, passed[0].input
        assert len(set(kwargs.values())) == 3
        assert _holds(x, math.nan) and _holds(x, math.inf) and _holds(x, -math.inf)
    # an op whose samples pass their numbers already gets no such sample (threshold's own are)
    info = _op("nn.functional.threshold")
    assert not any(set(s.kwargs) >= {"threshold"} for s in
                   edges.edge_samples(info, torch.float32, info.sample_inputs("cpu", torch.float32)))


def test_pointwise_ops_of_plain_opinfos_get_edges_for_each_string_choice():
    """nn.functional.gelu is a plain OpInfo, not a ufunc one: its aten op is tagged pointwise,
    so the edges reach it, once per value of its `approximate` (two Metal kernels). glu works
    along a dimension: no edges. An edge value is either sent or left out as one this CPU
    answers two ways, never dropped silently."""
    gelu = _op("nn.functional.gelu")
    assert edges.is_elementwise(gelu) and not edges.is_elementwise(_op("nn.functional.glu"))
    assert edges.is_elementwise(_op("nn.functional.leaky_relu"))
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        unsettled = []
        got = edges.edge_samples(gelu, dtype, gelu.sample_inputs("cpu", dtype), unsettled)
        assert sorted(s.kwargs["approximate"] for s in got) == ["none", "tanh"]
        every = edges.values(dtype).tolist()
        for s in got:
            assert _holds(s.input, math.nan), s.input
            sent = s.input.tolist()
            left = [x for x in every if not any(x == y or (x != x and y != y) for y in sent)]
            assert all(any(x == u[0] for u in unsettled) for x in left), (dtype, left, unsettled)


class _TwoLoops:
    """An op whose whole-tensor loop answers `vectorized` at `at` and its one-element loop the
    input itself (torch's own loops never do for gelu; x86's oneDNN did, and is not asked)."""

    def __init__(self, at: float, vectorized: float):
        self.at, self.vectorized = at, vectorized

    def __call__(self, x, *args, **kwargs):
        out = x.clone()
        if x.numel() > 1:
            out[x == self.at] = self.vectorized
        return out


@pytest.mark.parametrize("at, vectorized, two_ways", [
    (math.inf, math.nan, [(math.inf, math.nan, math.inf)]),      # NaN against inf: two ways
    (3.0, 3.0000002, []),                                        # within float32's tolerance
    (2.0, 2.5, [(2.0, 2.5, 2.0)]),                               # beyond it: two ways
], ids=["nan-vs-inf", "within-tolerance", "beyond-tolerance"])
def test_an_element_the_cpu_answers_two_ways_passes_either_way_and_is_said(at, vectorized, two_ways):
    """Before: such an element was left out of the sample (never compared). Now the sample
    keeps every element and carries the scalar loop's answer; `either` holds the device to
    the vectorized answer, or the scalar one where it matches that, and to nothing else."""
    x = torch.tensor([1.0, at, math.nan, -2.0], dtype=torch.float32)
    other = torch.tensor([5.0, 6.0, 7.0, 8.0])
    sample = SampleInput(x, args=(other, 0.5), kwargs={"k": "v"})
    unsettled = []
    op = _TwoLoops(at, vectorized)
    got = edges._two_ways(op, sample, unsettled)
    assert [((a[0] if isinstance(a, tuple) else a), b if b == b else "nan", c) for a, b, c in unsettled] == \
        [(a, b if b == b else "nan", c) for a, b, c in two_ways]
    # nothing is left out: the same elements, operands, scalars and keywords
    assert torch.allclose(got.input, x, rtol=0, atol=0, equal_nan=True), got.input
    assert got.args[0].tolist() == [5.0, 6.0, 7.0, 8.0] and got.args[1] == 0.5 and got.kwargs == {"k": "v"}
    if not two_ways:
        assert got is sample
        return
    note = edges.unsettled_note(unsettled)
    assert note.startswith(f"1 {edges.UNSETTLED}") and "either" in note and f"{at:g}" in note
    whole = op(x.clone())
    scalar = x.clone()                  # the one-element loop answers the input itself
    for device, passes in ((whole, True), (scalar, True), (torch.full_like(x, 9.0), False)):
        held = edges.either(got, whole, device, None, None)
        assert bool(torch.allclose(held, device, equal_nan=True)) == passes, (device, held)
    # a wrong value at the two-way element fails against both answers
    wrong = scalar.clone()
    wrong[1] = 1234.0
    assert not torch.allclose(edges.either(got, whole, wrong, None, None), wrong, equal_nan=True)


def test_a_large_tensors_two_way_values_pass_either_way_per_element():
    """hardshrink_backward's CPU answers 0 at a NaN `self` in its vectorized loop (a large
    tensor) and `grad` in its scalar one: a kernel translated from the scalar lambda matches
    the second; either_per_element accepts it element by element and names the values, and
    still refuses a value matching neither."""
    grad = torch.linspace(0.1, 0.9, 4096)
    self_ = torch.linspace(-2.0, 2.0, 4096)
    self_[::7] = math.nan
    vectorized = torch.ops.aten.hardshrink_backward(grad, self_, 0.5)
    scalar_loop = torch.cat([torch.ops.aten.hardshrink_backward(grad[i:i + 1], self_[i:i + 1], 0.5)
                             for i in range(4096)])
    differ = ~torch.isclose(vectorized, scalar_loop, equal_nan=True)
    if not bool(differ.any()):
        pytest.skip("this CPU's loops agree on hardshrink_backward at NaN")

    class Backward:                      # the op as an OpInfo calls it
        name = "hardshrink_backward"
        info = _op("nn.functional.hardshrink")

        def __call__(self, g, s, lambd):
            return torch.ops.aten.hardshrink_backward(g, s, lambd)
    sample = SampleInput(grad, args=(self_, 0.5))
    unsettled = []
    held = edges.either_per_element(Backward(), sample, vectorized, scalar_loop, None, None, unsettled)
    assert torch.allclose(held, scalar_loop, equal_nan=True)
    assert len(unsettled) == int(differ.sum()) and all(math.isnan(u[0][1]) for u in unsettled)
    wrong = scalar_loop.clone()
    wrong[differ] = 7.0
    unsettled = []
    held = edges.either_per_element(Backward(), sample, vectorized, wrong, None, None, unsettled)
    assert unsettled == [] and not torch.allclose(held, wrong, equal_nan=True)


def test_the_ufunc_opinfos_edges_are_not_filtered():
    """sigmoid's edges are every edge value: nothing is left out, and its loops agree."""
    info = _op("sigmoid")
    unsettled = []
    got = edges.edge_samples(info, torch.float32, info.sample_inputs("cpu", torch.float32), unsettled)
    assert unsettled == [] and _holds(got[0].input, math.inf)
    assert got[0].input.numel() == edges.values(torch.float32).numel()


def test_a_reference_run_that_adds_no_edge_values_says_so(real_root):
    """hardswish is a plain OpInfo whose aten op is not tagged pointwise: its reference inputs
    are its own samples, and the row says so rather than passing for extremal values."""
    result = porter("test", "nn.functional.hardswish", "--device", "cpu", "--dtype", "float32",
                    "--reference-inputs", root=real_root)
    assert result.code == 0, result.err
    assert f"note float32: {edges.NO_EDGES}" in result.out
    # an op that gets edge values has no such note
    result = porter("test", "nn.functional.leaky_relu", "--device", "cpu", "--dtype", "float32",
                    "--reference-inputs", root=real_root)
    assert result.code == 0 and edges.NO_EDGES not in result.out, result.out


def test_an_int_way_of_passing_scalars_leaves_room_for_the_next():
    """Two ways upstream's samples pass a scalar (by position, by keyword): each gets its
    sample on int32 as on float32, the int's 2^24 samples coming on top (before: they filled
    MAX_SCALAR_SAMPLES and the keyword way was never tried on int32 and int64)."""
    for dtype in (torch.float32, torch.int32):
        x = torch.tensor([1, 2, 3], dtype=dtype)
        templates = [SampleInput(x, args=(2,)), SampleInput(x, kwargs={"alpha": 3})]
        got = edges.scalar_samples(templates, dtype, lambda a, n: a.reshape(-1).repeat(n)[:n])
        ways = [tuple(k for k, _ in edges._scalars(s)) for s in got]
        assert set(ways) == {(0,), ("alpha",)}, (dtype, ways)
        assert len(got) == (2 if dtype == torch.float32 else 6), (dtype, ways)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gelus_infinity_and_max_are_sent_with_a_reference_without_onednn(dtype):
    """x86's oneDNN computes a whole float32/bfloat16 gelu and answers NaN at inf and inf at
    FLT_MAX; a Mac's torch has no oneDNN and answers inf and FLT_MAX. Those values are sent
    (nothing left out) and their samples carry the mark that computes their reference
    without oneDNN, which answers what a Mac does."""
    from porter.harness import opinfo_run
    gelu = _op("nn.functional.gelu")
    unsettled = []
    got = edges.edge_samples(gelu, dtype, gelu.sample_inputs("cpu", dtype), unsettled)
    assert unsettled == [] and all(getattr(s, edges.MAC_LOOPS, False) for s in got)
    top = float(torch.finfo(dtype).max)
    none = next(s for s in got if s.kwargs["approximate"] == "none")
    assert _holds(none.input, math.inf) and _holds(none.input, top)
    with edges.without_onednn():
        ref = opinfo_run._reference(gelu, none, None)
    at = (none.input == math.inf) | (none.input == top)
    assert torch.equal(ref[at], none.input[at]), ref[at]


def test_a_way_that_gives_no_sample_leaves_room_for_the_next():
    """A way whose other tensor cannot be cycled (empty: upstream's samples hold some) gives no
    sample; it must not take a place under MAX_SCALAR_SAMPLES from the ways after it (before:
    the cap counted ways seen, so the keyword way of a third template was never tried)."""
    x = torch.tensor([1.0, 2.0, 3.0])
    empty = torch.tensor([])
    templates = [SampleInput(x, args=(empty, 2)), SampleInput(x, args=(x, 2, 4)),
                 SampleInput(x, args=(x,), kwargs={"alpha": 3})]
    got = edges.scalar_samples(templates, torch.float32,
                               lambda a, n: a.reshape(-1).repeat(n)[:n] if a.numel() else None)
    ways = [tuple(k for k, _ in edges._scalars(s)) for s in got]
    assert ways == [(1, 2), ("alpha",)], ways


def test_the_values_left_out_are_known_before_the_first_sample_runs(monkeypatch):
    """The run's note is attached as samples are recorded: were every edge sample left out,
    a note filled only after the OpInfo's own samples had run would reach no row."""
    from porter.harness import opinfo_run
    left_out = (math.inf, math.nan, math.inf)

    def all_left_out(info, dtype, templates, unsettled=None):
        unsettled.append(left_out)
        return []
    monkeypatch.setattr(edges, "edge_samples", all_left_out)
    unsettled = []
    samples = opinfo_run.generate_samples(_op("nn.functional.gelu"), torch.float32,
                                          reference=True, unsettled=unsettled)
    next(iter(samples))
    assert unsettled == [left_out]


@pytest.mark.parametrize("name", ["special.legendre_polynomial_p", "special.laguerre_polynomial_l",
                                  "special.hermite_polynomial_h", "special.chebyshev_polynomial_t"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32])
def test_a_polynomials_degree_stays_within_max_degree(name, dtype):
    """INT_MAX as a degree loops 2^31 times per element on the CPU and in the emulator (issue
    36: 220 s of test_verify); edge values still reach x, and the degree keeps its small,
    negative and 2^15-2^16 edges."""
    info = _op(name)
    assert edges.degree_positions(info) == (1,)
    samples = edges.edge_samples(info, dtype, list(info.reference_inputs("cpu", dtype)))
    assert samples
    degrees = torch.cat([torch.as_tensor(s.args[0]).reshape(-1).to(torch.float64)
                         for s in samples])
    xs = torch.cat([s.input.reshape(-1).to(torch.float64) for s in samples])
    assert bool(torch.isfinite(degrees).all()) and float(degrees.abs().max()) <= edges.MAX_DEGREE
    kept = {-2.0, 2.0} if dtype.is_floating_point else {-2.0, 2.0**15, 2.0**16}
    assert kept <= set(degrees.tolist())
    assert float(xs[torch.isfinite(xs)].abs().max()) > edges.MAX_DEGREE   # x meets its limits


def test_an_op_without_a_degree_keeps_its_large_second_operand():
    info = _op("add")
    assert edges.degree_positions(info) == ()
    samples = edges.edge_samples(info, torch.int32, list(info.reference_inputs("cpu", torch.int32)))
    assert any(int(a.max()) == 2**31 - 1 for s in samples for a in s.args
               if isinstance(a, torch.Tensor))


def test_a_degree_outside_the_bound_in_a_shared_operand_drops_the_sample():
    x = torch.tensor([0.5, 2.0])
    bounded = edges._degree_bounded(SampleInput(x, args=(torch.tensor([3, 2**31 - 1]),)), (1,))
    assert bounded.input.tolist() == [0.5] and bounded.args[0].tolist() == [3]
    assert edges._degree_bounded(SampleInput(x, args=(torch.tensor(2**20),)), (1,)) is None
    assert edges._degree_bounded(SampleInput(x, args=(float("nan"),)), (1,)) is None
    same = SampleInput(x, args=(4,))
    assert edges._degree_bounded(same, (1,)) is same


def test_an_input_an_apple_gpu_reads_as_zero_passes_with_the_answer_on_that_zero(monkeypatch):
    """heaviside(x, v) at a float32 subnormal x: the CPU answers 1 (x > 0); an Apple GPU reads x
    as +0 and a right functor answers v there. Either passes on a flushing device, each element
    noted; a wrong answer (neither 1 nor v) is kept red, and a normal input is never flushed."""
    import torch

    from porter.harness import edges

    class Info:
        name = "heaviside"

        def __call__(self, x, v):
            return torch.heaviside(x, v)

    class Sample:
        def __init__(self, x, v):
            self.input, self.args, self.kwargs = x, (v,), {}

    info = Info()
    real = edges.is_elementwise
    monkeypatch.setattr(edges, "is_elementwise", lambda i: True if i is info else real(i))
    tiny = torch.finfo(torch.float32).tiny
    x = torch.tensor([tiny / 4, -tiny / 4, 2.0, tiny / 4], dtype=torch.float32)
    v = torch.tensor([0.5, 0.25, 0.5, 0.75], dtype=torch.float32)
    sample = Sample(x, v)
    cpu = torch.heaviside(x, v)                         # 1, 0, 1, 1
    mac = torch.tensor([0.5, 0.25, 1.0, 0.75])          # what a right functor gives on the zeros
    noted: list = []
    merged = edges.either_flushed(info, sample, cpu, mac, 1e-5, 1.3e-6, noted)
    assert torch.equal(merged, mac) and len(noted) == 3
    assert noted[0] == (1.0, 0.5) and noted[1] == (0.0, 0.25)
    wrong = torch.tensor([0.9, 0.25, 1.0, 0.75])        # neither 1 nor v at the first element
    noted = []
    kept = edges.either_flushed(info, sample, cpu, wrong, 1e-5, 1.3e-6, noted)
    assert kept[0] == 1.0 and len(noted) == 2
    # no subnormal input: nothing to take, whatever the device says
    normal = Sample(torch.tensor([2.0, -3.0]), torch.tensor([0.5, 0.5]))
    noted = []
    assert torch.equal(edges.either_flushed(info, normal, torch.tensor([1.0, 0.0]),
                                            torch.tensor([0.5, 0.5]), 1e-5, 1.3e-6, noted),
                       torch.tensor([1.0, 0.0])) and not noted
    assert "subnormal input(s) an Apple GPU reads as zero" in edges.flushed_note([(1.0, 0.5)])


def test_a_flushed_input_passes_whatever_the_outputs_dtype_and_a_complex64_part_is_flushed(monkeypatch):
    """logical_not of a float32 subnormal: the CPU says False, an Apple GPU reads +0 and a right
    functor says True; sgn of 1e-45+1e-45j: the GPU reads each float2 part as 0 and a right
    functor answers 0. Before, the rule took floating outputs only and flushed no complex part,
    so both right kernels were red. A wrong answer stays red: a bool kernel saying False at a
    normal 0 input, a sgn answering 1 on the zero it reads."""
    import torch

    from porter.harness import edges

    class Info:
        def __init__(self, name, fn):
            self.name, self.fn = name, fn

        def __call__(self, *args, **kwargs):
            return self.fn(*args, **kwargs)

    class Sample:
        def __init__(self, x):
            self.input, self.args, self.kwargs = x, (), {}

    ops = {"logical_not": Info("logical_not", torch.logical_not), "sgn": Info("sgn", torch.sgn)}
    real = edges.is_elementwise
    monkeypatch.setattr(edges, "is_elementwise", lambda i: True if i in ops.values() else real(i))
    tiny = torch.finfo(torch.float32).tiny
    x = torch.tensor([tiny / 4, -tiny / 4, 2.0, 0.0])
    cpu = torch.logical_not(x)                                 # F, F, F, T
    noted: list = []
    mac = torch.tensor([True, True, False, True])
    assert torch.equal(edges.either_flushed(ops["logical_not"], Sample(x), cpu, mac, None, None, noted), mac)
    assert noted == [(0.0, 1.0), (0.0, 1.0)]
    wrong = torch.tensor([True, True, False, False])           # logical_not(0) is True anywhere
    kept = edges.either_flushed(ops["logical_not"], Sample(x), cpu, wrong, None, None, [])
    assert torch.equal(kept, torch.tensor([True, True, False, True]))
    # complex64: a subnormal part reads as zero (0+0j: sgn 0), a normal part is kept
    z = torch.tensor([complex(1e-45, 1e-45), complex(3.0, -4.0)], dtype=torch.complex64)
    assert torch.equal(edges._flushed(z), torch.tensor([0j, complex(3.0, -4.0)], dtype=torch.complex64))
    cpu = torch.sgn(z)                                        # inf+infj (1 / |z| overflows), 0.6-0.8j
    mac = torch.tensor([0j, complex(0.6, -0.8)], dtype=torch.complex64)
    noted = []
    assert torch.equal(edges.either_flushed(ops["sgn"], Sample(z), cpu, mac, None, None, noted), mac)
    assert len(noted) == 1
    wrong = torch.tensor([1 + 0j, complex(0.6, -0.8)], dtype=torch.complex64)
    kept = edges.either_flushed(ops["sgn"], Sample(z), cpu, wrong, None, None, [])
    assert torch.isinf(kept[0].real)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "int32"])
def test_a_held_rows_operand_reaches_torch_as_a_copy_without_a_warning(dtype):
    """A row --watch holds is read-only (refcache.held_rows): torch.from_numpy warned about it
    on every round, output a plain run does not print (review 80's F6), and an op that writes
    its operand would have written the held row. torch gets a copy of such an array."""
    import warnings

    import numpy as np

    from porter.dispatch.numpy_tensors import NUMPY, PArray
    from porter.harness.two_ways import _to_torch
    data = np.arange(6).astype(NUMPY[dtype])
    data.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensor = _to_torch(PArray(dtype, data))
    tensor.zero_()
    assert data.tolist() == np.arange(6).astype(NUMPY[dtype]).tolist(), "the held row changed"
    # a 0-d operand reaches torch in one shape, held or not (review 81)
    zero_d = np.asarray(3).astype(NUMPY[dtype])
    writable = _to_torch(PArray(dtype, zero_d.copy())).shape
    zero_d.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _to_torch(PArray(dtype, zero_d)).shape == writable
