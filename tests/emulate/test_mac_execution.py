"""Execution as a Mac executes (issue 33): each behaviour porter models, as a table of kernel,
inputs, what a Mac computes, and what g++ alone computed before the model. Each planted
kernel (one that relies on what a Mac does not do) has a clean twin that computes right on
both. Sources: docs/testing.md ("What execution models")."""

from __future__ import annotations

import math

import pytest

from porter.emulate.build import EmulateBuildError, build_file, build_source
from porter.emulate.toolchain import contract_flags
from porter.emulate.torch_run import run_registration

from .conftest import DATA

torch = pytest.importorskip("torch")

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
NAN = math.nan
SUB32 = 1e-40            # a float32 subnormal (and a bfloat one)
SUB16 = 1e-7             # a half subnormal

# (functor, dtype, inputs, a Mac's answer, g++ alone's answer before the model)
TABLE = [
    # fast::tanh overflows to NaN past ~44.36 (upstream #186278 / #186286)
    ("fast_tanh", F32, [[1.0, 44.0, 45.0, -50.0]], [math.tanh(1.0), 1.0, NAN, -1.0],
     [math.tanh(1.0), 1.0, 1.0, -1.0]),
    ("fast_tanh", F16, [[45.0]], [NAN], [1.0]),
    ("precise_tanh", F32, [[1.0, 44.0, 45.0, -50.0]], [math.tanh(1.0), 1.0, 1.0, -1.0],
     [math.tanh(1.0), 1.0, 1.0, -1.0]),
    # powr(x, y) = exp2(y * log2(x)): NaN for a negative base (SPIRV-Cross #2206); pow is 4
    ("power_r", F32, [[-2.0, 2.0, 0.5], [2.0, 2.0, 3.0]], [NAN, 4.0, 0.125], [4.0, 4.0, 0.125]),
    ("power", F32, [[-2.0, 2.0, 0.5], [2.0, 2.0, 3.0]], [4.0, 4.0, 0.125], [4.0, 4.0, 0.125]),
    # ... and so are 0 * inf in y * log2(x) and a NaN operand (review 34's B02)
    ("power_r", F32, [[0.0, math.inf, 1.0, 1.0], [0.0, 0.0, math.inf, NAN]], [NAN, NAN, NAN, NAN],
     [1.0, 1.0, 1.0, 1.0]),
    # clamp of bfloat is float's (it did not build: a twin of what both compute)
    ("clamp01", BF16, [[-2.0, 0.5, 3.0]], [0.0, 0.5, 1.0], [0.0, 0.5, 1.0]),
    ("clamp01", F32, [[-2.0, 0.5, 3.0]], [0.0, 0.5, 1.0], [0.0, 0.5, 1.0]),
    ("swizzle_cast", BF16, [[1.5, -2.0]], [3.0, -4.0], [3.0, -4.0]),
    ("abs_equal", BF16, [[4.981e6, 1.5, -2.0]], [1.0, 1.0, 0.0], [0.0, 1.0, 0.0]),
    # bfloat nextafter goes through float's: most inputs come back unchanged (upstream #190476)
    ("step", BF16, [[1.0, 0.0, -2.0], [2.0, 1.0, 0.0]], [1.0, 0.0, -2.0], [1.0078125, 9.18e-41, -1.9921875]),
    ("step", F32, [[1.0], [2.0]], [1.0000001192092896], [1.0000001192092896]),
    # a step into float32's subnormals is a zero on an Apple GPU (upstream #125051; B03)
    ("step", F32, [[0.0], [1.0]], [0.0], [1.401298464324817e-45]),
    ("step_bits", BF16, [[1.0, -2.0], [2.0, 0.0]], [1.0078125, -1.9921875], [1.0078125, -1.9921875]),
    # float32 and bfloat subnormals read as zero and results flush; half keeps its subnormals
    ("positive", F32, [[SUB32, 1e-30]], [False, True], [True, True]),
    ("positive", BF16, [[SUB32]], [False], [True]),
    ("positive", F16, [[SUB16]], [True], [True]),
    ("halve", F32, [[2e-38, 1e-30]], [0.0, 5e-31], [1e-38, 5e-31]),
    ("halve", BF16, [[2e-38]], [0.0], [1e-38]),
    ("halve", F16, [[1.2e-7]], [5.96e-8], [5.96e-8]),
    # half fract stays below 1 (review 36's K02)
    ("fraction", F16, [[-0.0001, 0.25]], [0.00048828125, 0.75], [0.0, 0.75]),
    ("fraction2", F16, [[-0.0001]], [0.00048828125], [0.0]),
    # Metal's defines hold; g++ alone defines neither
    ("predefined", F32, [[1.5]], [1.5], [-1.5]),
]


@pytest.fixture(scope="module")
def lib(fixture_root):
    return build_file(DATA / "mac_execution.metal", fixture_root)


@pytest.mark.parametrize("name, dtype, inputs, mac, before", TABLE,
                         ids=[f"{r[0]}-{str(r[1])[6:]}" for r in TABLE])
def test_a_kernel_computes_what_a_mac_computes(lib, client, name, dtype, inputs, mac, before):
    regs = lib.find(name, {F32: "float", F16: "half", BF16: "bfloat"}[dtype])
    assert regs and regs[0].built, lib.quarantined
    tensors = [torch.tensor(x, dtype=dtype) for x in inputs]
    out = run_registration(client, lib, regs[0], tensors)
    expected = torch.tensor(mac, dtype=out.dtype)
    torch.testing.assert_close(out, expected, equal_nan=True, rtol=1e-3, atol=0)
    # the row is a difference g++ alone would have missed, or a twin that agrees on both
    is_twin = torch.equal(torch.tensor(before, dtype=out.dtype).isnan(), expected.isnan()) and \
        torch.allclose(torch.tensor(before, dtype=out.dtype).nan_to_num(), expected.nan_to_num(), rtol=1e-3, atol=0)
    assert is_twin == (name.startswith(("precise_", "step_bits")) or name in ("power", "clamp01", "swizzle_cast")) \
        or dtype == F16 \
        and name in ("positive", "halve") or (name, dtype) == ("step", F32)


def test_the_flush_holds_only_while_a_kernel_runs(lib, client):
    # the worker's own arithmetic (numpy, torch) keeps its subnormals between kernel calls
    out = run_registration(client, lib, lib.find("positive", "float")[0], [torch.tensor([SUB32])])
    assert out.tolist() == [False]
    assert torch.tensor([SUB32]).item() > 0


def test_swizzles_splats_and_vector_builds_run_as_metal(lib, client):
    z = torch.tensor([1 + 2j], dtype=torch.complex64)
    out = run_registration(client, lib, lib.find("swizzle", "float2")[0], [z])
    # v = (2, 1, 1, 2) -> zw doubled: (2, 1, 2, 4); c = (2, 1, 2); h = (2, 2)
    assert out.tolist() == [complex(4 + 2 + 0.5, 2 + 0.5)]
    out = run_registration(client, lib, lib.find("swizzle_library", "float2")[0], [z])
    assert out.tolist() == [complex(2 * 1 + 1 * 2, 2)]      # dot((2, 1), (1, 2)), max(2, 1)

    # z = (1, 2): v = (1, 2, 3, 6), then v.wzyx.x = 7 writes v.w: (v.x + v.w, v.w + v.z)
    out = run_registration(client, lib, lib.find("swizzle_of_swizzle", "float2")[0], [z])
    assert out.tolist() == [complex(1 + 7, 7 + 3)]


@pytest.mark.parametrize("dtype", [F32, F16], ids=["float32", "float16"])
def test_fmax3_and_fmin3_run_as_fmax_and_fmin_of_three(lib, client, dtype):
    """Review 33's B07: `metal::fmax3` was "does not build: unsupported construct"."""
    regs = lib.find("three_way", {F32: "float", F16: "half"}[dtype])
    assert regs and regs[0].built, lib.quarantined
    a = torch.tensor([1.0, NAN, NAN, -4.0], dtype=dtype)
    b = torch.tensor([2.0, 3.0, NAN, 0.25], dtype=dtype)
    out = run_registration(client, lib, regs[0], [a, b])
    assert out.tolist() == [2.0 + 0.5, 3.0 + 0.5, 0.5 + 0.5, 0.5 - 4.0]


def test_msl_integer_functions_run_as_the_msl_table_defines_them(lib, client):
    """Review 33b's false reds B13/B20/B27/B29/B30 (max3, extract_bits, reverse_bits, mulhi,
    addsat): "not proven" before the shim had them. Each call's known answer is checked in the
    kernel; a wrong one sets its bit in the output."""
    regs = lib.find("integer_library", "float")
    assert regs and regs[0].built, lib.quarantined
    out = run_registration(client, lib, regs[0], [torch.tensor([0.0, 1.0])])
    assert out.tolist() == [0.0, 1.0], f"wrong bits: {int(out[0]):#b}"


@pytest.mark.parametrize("dtype", [F32, F16], ids=["float32", "float16"])
def test_max3_min3_and_median3_of_floats_run(lib, client, dtype):
    regs = lib.find("float_three", {F32: "float", F16: "half"}[dtype])
    assert regs and regs[0].built, lib.quarantined
    out = run_registration(client, lib, regs[0], [torch.tensor([1.0, -2.0], dtype=dtype),
                                                   torch.tensor([0.0, 0.125], dtype=dtype)])
    # (1, 0): 1 + 10 * -0.5 + 100 * 0.25; (-2, 0.125): 0.5 + 10 * -2 + 100 * 0.125
    assert out.tolist() == [21.0, -7.0]


# (functor, a, b, IEEE's reading, the NaN reading or None where the answer is defined, family)
UNDEFINED = [
    ("fast_max", [1.0, NAN, 4.0], [2.0, 3.0, 1.0], [2.0, 3.0, 4.0], [2.0, NAN, 4.0], 1),
    ("fast_max", [1.0, 4.0], [2.0, 1.0], [2.0, 4.0], None, 0),
    ("ieee_max", [1.0, NAN, 4.0], [2.0, 3.0, 1.0], [2.0, 3.0, 4.0], None, 0),
    ("median", [1.0, 0.2, NAN], [2.0, 0.1, 3.0], [1.0, 0.2, 3.0], [1.0, 0.2, NAN], 2),
    ("median", [1.0, 0.2], [2.0, 0.1], [1.0, 0.2], None, 0),
]


@pytest.mark.parametrize("name, a, b, ieee, nan_reading, family", UNDEFINED,
                         ids=[f"{r[0]}-{'nan' if r[4] else 'defined'}" for r in UNDEFINED])
def test_an_answer_metal_leaves_undefined_is_run_both_ways(lib, client, name, a, b, ieee,
                                                           nan_reading, family):
    """Review 15's N13 (fast::fmax on a NaN was run as IEEE's fmax alone: green, whatever a Mac
    answers) and B09 (fmedian3 was not run at all: "not proven")."""
    from porter.emulate.torch_run import like
    regs = lib.find(name, "float")
    assert regs and regs[0].built, lib.quarantined
    out = run_registration(client, lib, regs[0], [torch.tensor(a), torch.tensor(b)])
    torch.testing.assert_close(out, torch.tensor(ieee), equal_nan=True)
    if nan_reading is None:
        assert client.undefined is None
        return
    bits, raw, fast = client.undefined
    assert bits == family and fast is None
    torch.testing.assert_close(like(out, raw), torch.tensor(nan_reading), equal_nan=True)


@pytest.mark.parametrize(("a", "b"), [(-0.0, 0.0), (0.0, -0.0)])
def test_fmax_of_zeros_of_both_signs_is_run_both_ways(lib, client, a, b):
    """Review 34's B01: IEEE's maximumNumber answers +0, the specification's text ("y if x < y,
    otherwise x") answers x; a Mac's is not known, so the worker runs the other reading too
    (bit 512), and the verdict holds the kernel to both. Same signs are one answer."""
    from porter.emulate.torch_run import like
    reg = lib.find("ieee_max", "float")[0]
    out = run_registration(client, lib, reg, [torch.tensor([a, 1.0]), torch.tensor([b, -0.0])])
    assert out.tolist() == [0.0, 1.0] and not out[0].signbit()
    bits, raw, _ = client.undefined
    assert bits == 512
    if math.copysign(1.0, a) > 0:
        # the text's answer is x, +0, as IEEE's: the same bytes, no second reading to compare
        assert raw is None
    else:
        other = like(out, raw)
        assert other[0].signbit() and other[1].item() == 1.0
    run_registration(client, lib, reg, [torch.tensor([0.0]), torch.tensor([0.0])])
    assert client.undefined is None


def test_the_library_metal_has_and_the_shim_does_not_run_is_not_proven(fixture_root, tmp_path):
    """distance_squared (the shim has none): listed in frontend_include/NOT_EXECUTABLE; a
    kernel calling it is not proven, never "does not build" (a Mac builds it) and never run."""
    from porter.emulate.build import UNSUPPORTED
    text = (SWIZZLE_WRITES % "zw").replace("v.zw = z;", "v.x = distance_squared(z, z);")
    lib = build_source(text, tmp_path / "m.metal", fixture_root, strict=False)
    assert lib.build_errors() == []
    reg = lib.find("w", "float2")[0]
    assert not reg.built and lib.reason(reg).startswith(UNSUPPORTED + ": "), lib.reason(reg)


SWIZZLE_WRITES = """\
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
struct w_functor {
  inline float2 operator()(const float2 z) {
    float4 v = float4(z, z);
    v.%s = z;
    return v.xy;
  }
};
REGISTER_UNARY_OP(w, float2, float2);
"""


@pytest.mark.parametrize("target", ["zw", "yx"])
def test_a_swizzle_without_repeats_is_assignable(fixture_root, tmp_path, target):
    lib = build_source(SWIZZLE_WRITES % target, tmp_path / "w.metal", fixture_root, strict=False)
    reg = lib.find("w", "float2")
    assert reg and reg[0].built and not lib.build_errors()


def test_a_swizzle_that_repeats_a_component_is_not(fixture_root, tmp_path):
    # the planted twin: Metal rejects `v.xx = ...` (MSL 2.2.1), so the file does not build
    # (the front end's words, clang's, as a Mac's compiler says it)
    with pytest.raises(EmulateBuildError, match=r"w\.metal:7: vector is not assignable "
                                                r"\(contains duplicate components\)"):
        build_source(SWIZZLE_WRITES % "xx", tmp_path / "w.metal", fixture_root, strict=False)


@pytest.mark.skipif(contract_flags() is None, reason="this CPU has no fma to run a contracted build")
def test_the_contracted_build_fuses_a_times_b_plus_c(fixture_root, client):
    plain = build_file(DATA / "mac_execution.metal", fixture_root)
    fused = build_file(DATA / "mac_execution.metal", fixture_root, contract=True)
    x = torch.tensor([1.1, 3.0])
    p = x * x                                   # rounded to float32
    assert run_registration(client, plain, plain.find("product_error", "float")[0], [x, p]).tolist() == [0.0, 0.0]
    err = run_registration(client, fused, fused.find("product_error", "float")[0], [x, p]).tolist()
    assert err[0] != 0.0 and err[1] == 0.0      # 1.1^2 does not round exactly, 3^2 does
    # one expression with the product twice: contracted as clang contracts it, not after g++
    # has made one product of the two (review 27's N16)
    assert run_registration(client, plain, plain.find("product_twice", "float")[0], [x]).tolist() == [0.0, 0.0]
    twice = run_registration(client, fused, fused.find("product_twice", "float")[0], [x]).tolist()
    assert twice == [pytest.approx(e, abs=0) for e in err], (twice, err)


@pytest.mark.skipif(contract_flags() is None, reason="this CPU has no fma to run a contracted build")
def test_a_kernels_contracted_build_says_whether_its_own_code_fused(fixture_root, client):
    # every passing sample asks for the contracted answer too (review 27's N16), so one
    # kernel's piece is built, and where g++ fused no a*b+c of its functor the answers are the
    # unfused ones and are not asked. predefined shares its piece with float_three, whose
    # `fmax3(..) * 0.0f + ..` fuses: the fma is float_three's, not predefined's
    def fused(name):
        return build_file(DATA / "mac_execution.metal", fixture_root, strict=False,
                          contract=True, only=name).fused
    assert (fused("float_three"), fused("predefined"), fused("product_twice"),
            fused("fast_max"), fused("library_dot")) == (True, False, True, False, True)
    alone = build_file(DATA / "mac_execution.metal", fixture_root, strict=False,
                       contract=True, only="product_twice")
    # the library's dot fused: the rounding error of a * a, where the unfused build gives 0
    dot = build_file(DATA / "mac_execution.metal", fixture_root, strict=False, contract=True,
                     only="library_dot")
    plain = build_file(DATA / "mac_execution.metal", fixture_root, strict=False)
    x = [torch.tensor([1.1])]
    assert run_registration(client, plain, plain.find("library_dot", "float")[0], x).tolist() == [0.0]
    assert run_registration(client, dot, dot.find("library_dot", "float")[0], x).item() != 0.0
    # its piece's registrations alone (porter.emulate.groups: which functors share a piece
    # follows the file's functor count)
    from porter.emulate import groups
    from tests.emulate.functor_text import pieces_of
    piece = next(p for p in pieces_of((DATA / "mac_execution.metal").read_text(), fixture_root,
                                      str(DATA / "mac_execution.metal"))
                 if "product_twice" in p.names)
    assert {r.name for r in alone.registrations} == set(piece.names)
    assert len(piece.names) < len({r.name for r in build_file(
        DATA / "mac_execution.metal", fixture_root, strict=False).registrations})


CALLED_HELPERS = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
float ch_fused(float a) { return a * a + 1.0f; }
float ch_helper(float a) { return ch_fused(a) * 2.0f; }
float ch_uncalled(float a, float b) { return a * b - 1.0f; }
struct via_helper_functor {
  inline float operator()(const float a) { return ch_helper(a); }
};
struct plain_functor {
  inline float operator()(const float a) { return a * 2.0f; }
};
struct squared_length_functor {
  inline float operator()(const float a) { return length_squared(float2(a, 1.0f)); }
};
struct named_dot_functor {
  inline float operator()(const float a) { return dot(float2(a, a), float2(a, 1.0f)); }
};
REGISTER_UNARY_OP(via_helper, float, float);
REGISTER_UNARY_OP(plain, float, float);
REGISTER_UNARY_OP(squared_length, float, float);
REGISTER_UNARY_OP(named_dot, float, float);
"""


@pytest.mark.skipif(contract_flags() is None, reason="this CPU has no fma to run a contracted build")
def test_a_fusing_counts_for_the_kernels_that_call_it(tmp_path, fixture_root):
    # read from g++'s call graph, not from where the text sits: a helper's fma counts for the
    # functor that calls it through another helper, an fma of a function no registration calls
    # counts for none (upstream's BinaryKernel.metal: the complex multiply of its hand-written
    # kernels made every kernel of the file "fused"), and the library's dot counts through
    # length_squared whether or not another functor calls dot by name (review 37's N03)
    def fused(name):
        return build_source(CALLED_HELPERS, tmp_path / "h.metal", fixture_root,
                            contract=True, only=name).fused
    assert [fused(n) for n in ("via_helper", "plain", "squared_length", "named_dot")] == \
        [True, False, True, True]


SPLIT_PRODUCT = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
struct split_functor {
  inline float operator()(const float a) {
    float u = a * a;
    float r1 = u - 1.21f;
    float r2 = (a * a) - 1.21f;
    return r1 - r2;
  }
};
struct kept_functor {
  inline float operator()(const float a) { return a * 3.0f; }
};
REGISTER_UNARY_OP(split, float, float);
REGISTER_UNARY_OP(kept, float, float);
"""


@pytest.mark.skipif(contract_flags() is None, reason="this CPU has no fma to run a contracted build")
@pytest.mark.parametrize("product", ["float u = a * a;", "float u = a;\n    u *= a;"])
def test_the_contracted_build_contracts_within_one_expression_only(tmp_path, fixture_root, client,
                                                                   product):
    # review 36's K05: clang contracts `(a * a) - 1.21f` and not `u - 1.21f` where `u = a * a`
    # is a statement before; g++'s -ffp-contract=fast fused both, so the two spellings agreed
    # in both of porter's builds and a functor comparing them was green where a Mac is not
    x = [torch.tensor([1.1, 3.0])]
    text = SPLIT_PRODUCT.replace("float u = a * a;", product)
    plain = build_source(text, tmp_path / "s.metal", fixture_root)
    fused = build_source(text, tmp_path / "s.metal", fixture_root, contract=True, only="split")
    assert run_registration(client, plain, plain.find("split", "float")[0], x).tolist() == [0.0, 0.0]
    err = run_registration(client, fused, fused.find("split", "float")[0], x).tolist()
    assert err[0] != 0.0 and err[1] == 0.0      # 1.1^2 does not round exactly, 3^2 does


BFLOAT_PRODUCT = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
struct bf_product_error_functor {
  inline float operator()(const float a, const float p) {
    const bfloat h = static_cast<bfloat>(a);
    return %s;
  }
};
REGISTER_BINARY_OP(bf_product_error, float, float);
"""


@pytest.mark.skipif(contract_flags() is None, reason="this CPU has no fma to run a contracted build")
@pytest.mark.parametrize("expression", ["h * a - p", "a * h - p"])
def test_the_contracted_build_fuses_a_product_with_a_bfloat_operand(tmp_path, fixture_root,
                                                                   client, expression):
    """Review 78's finding 1: porter's bfloat compiled at its own optimization level in every
    build was never inlined into the contracted build's kernel code, so `h * a` came back
    rounded and `h * a - p` was never one fma: the contracted build answered as the plain one,
    and a functor right only unfused was green where a Mac may be red."""
    a = torch.tensor([1.1, 3.0])
    h = a.to(torch.bfloat16).float()
    p = h * a                                   # rounded to float32
    text = BFLOAT_PRODUCT % expression
    plain = build_source(text, tmp_path / "b.metal", fixture_root)
    fused = build_source(text, tmp_path / "b.metal", fixture_root, contract=True)
    reg = "bf_product_error"
    assert run_registration(client, plain, plain.find(reg, "float")[0], [a, p]).tolist() == [0.0, 0.0]
    err = run_registration(client, fused, fused.find(reg, "float")[0], [a, p]).tolist()
    exact = (h.double() * a.double() - p.double()).tolist()     # the product's rounding error
    assert err == pytest.approx(exact, abs=0) and err[0] != 0.0 and err[1] == 0.0


def test_a_constant_const_reference_builds_as_metal_reads_it(tmp_path, fixture_root, client):
    # review 30's F07: `constant const float&` is Metal; the shim's `constant` is `const`, and
    # g++ refused `const const` ("not proven" where a Mac builds and runs it)
    text = ("#include <c10/metal/indexing.h>\n#include <metal_stdlib>\nusing namespace metal;\n"
            "constant float cc_table[2] = {0.0f, 2.0f};\n"
            "struct cc_functor {\n  inline float operator()(const float a) {\n"
            "    constant const float& r = cc_table[1];\n    const constant float& q = cc_table[0];\n"
            "    return a * r + q;\n  }\n};\nREGISTER_UNARY_OP(cc, float, float);\n")
    lib = build_source(text, tmp_path / "cc.metal", fixture_root, strict=False)
    assert not lib.build_errors() and lib.find("cc", "float") and lib.find("cc", "float")[0].built
    out = run_registration(client, lib, lib.find("cc", "float")[0], [torch.tensor([1.5, -1.0])])
    assert out.tolist() == [3.0, -2.0]


TO_INT = """\
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
struct to_int_functor {
  inline int operator()(const float x) {
    return int(x);
  }
};
REGISTER_UNARY_OP(to_int, float, int);
"""


@pytest.mark.parametrize(("value", "noted"), [(3.5, False), (-2147483648.0, False),
                                              (3e9, True), (float("inf"), True), (float("nan"), True)])
def test_a_float_converted_out_of_an_integer_range_is_noted(fixture_root, tmp_path, client, value,
                                                            noted):
    """Review 31's N01: x86 converts +inf or 3e9 to the least int, an Apple GPU may saturate;
    Metal leaves it undefined. The shim's float-cast-overflow handler notes it (bit 8), and
    porter's verdict says the sample is not proven; a value in range is no such conversion."""
    lib = build_source(TO_INT, tmp_path / "i.metal", fixture_root, strict=False)
    reg = lib.find("to_int", "float")[0]
    out = run_registration(client, lib, reg, [torch.tensor([value], dtype=torch.float32)])
    bits = client.undefined[0] if client.undefined else 0
    assert bool(bits & 8) == noted, (value, client.undefined)
    if not noted:
        assert out.tolist() == [int(value)]


NAN_SIGN = """\
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
struct nan_sign_functor {
  inline float operator()(const float x) {
    const float made = (x - x) / (x - x);
    return EXPR;
  }
};
REGISTER_UNARY_OP(nan_sign, float, float);
"""


@pytest.mark.parametrize(("expr", "value", "noted"), [
    ("signbit(made) ? 1.0f : 0.0f", 2.0, True),          # 0/0: x86's default NaN
    ("copysign(1.0f, made)", 2.0, True),
    ("float(as_type<uint>(made) >> 31)", 2.0, True),
    ("signbit(x) ? 1.0f : 0.0f", -2.0, False),           # no NaN
    ("copysign(1.0f, x)", float("nan"), False),           # torch's NaN: positive on both
    ("isnan(made) ? 0.0f : 1.0f", 2.0, False),            # the NaN tested, not its sign
])
def test_reading_the_sign_of_a_nan_an_operation_made_is_noted(fixture_root, tmp_path, client,
                                                              expr, value, noted):
    """Review 31's N06: x86 makes 0/0 a negative NaN, an Apple GPU (as ARM) a positive one;
    a kernel that reads that sign is not proven (porter/metal.h's detail::NAN_SIGN)."""
    lib = build_source(NAN_SIGN.replace("EXPR", expr), tmp_path / "n.metal", fixture_root,
                       strict=False)
    reg = lib.find("nan_sign", "float")[0]
    run_registration(client, lib, reg, [torch.tensor([value], dtype=torch.float32)])
    bits = client.undefined[0] if client.undefined else 0
    assert bool(bits & 16) == noted, (expr, client.undefined)


UNDEFINED_INT = """\
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
struct pair_of { float v[2]; float w; };
struct u_functor {
  inline int operator()(const int x) {
    pair_of s = {{1.0f, 2.0f}, 3.0f};
    return EXPR;
  }
};
REGISTER_UNARY_OP(u, int, int);
"""


@pytest.mark.parametrize(("expr", "value", "bit"), [
    ("1 << x", 3, 0), ("1 << x", 32, 32), ("1 << x", -1, 32),     # review 32's L03
    ("int(s.v[x])", 1, 0), ("int(s.v[x])", 2, 64),                # L09: the next field here
])
def test_a_shift_past_the_width_or_an_index_past_the_bound_is_noted(fixture_root, tmp_path,
                                                                    client, expr, value, bit):
    """Undefined in Metal as in C++: x86 masks the count and reads the next field; what an
    Apple GPU answers is not known, so porter/metal.h's handlers note it (bits 32, 64)."""
    lib = build_source(UNDEFINED_INT.replace("EXPR", expr), tmp_path / "u.metal", fixture_root,
                       strict=False)
    reg = lib.find("u", "int")[0]
    run_registration(client, lib, reg, [torch.tensor([value], dtype=torch.int32)])
    bits = client.undefined[0] if client.undefined else 0
    assert bits & (32 | 64) == bit, (expr, value, client.undefined)


@pytest.mark.parametrize(("expr", "value", "bit"), [
    # review 36's K06: a vector index past the vector (the shim's operator[] was `(&x)[i]`)
    ("int(float2(1.0f, 2.0f)[x])", 1, 0), ("int(float2(1.0f, 2.0f)[x])", 2, 64),
    ("int(int4(5)[x])", -1, 64),
    # K11: a uchar2 shift computes in 8 bits on a Mac; the shim promoted to int (512 -> 0)
    ("int((uchar2(1) << uchar2(x)).x)", 7, 0), ("int((uchar2(1) << uchar2(x)).x)", 9, 32),
    ("int((short2(1) >> short2(x)).y)", 16, 32), ("int((int2(1) << int2(x)).x)", 9, 0),
    # K18: char2(-128) / char2(-1) overflows an 8-bit element; an unsigned one wraps as defined
    ("int((char2(-128, 1) / char2(x, 1)).x)", -1, 1024), ("int((char2(-128, 1) / char2(x, 1)).x)", 2, 0),
    ("int((char2(100) + char2(x)).x)", 100, 1024), ("int(-char2(x).x)", -128, 0),
    # review 37's N13: the remainder of the least char by -1 overflows too, though it is 0
    ("int((char2(-128, 1) % char2(x, 1)).x)", -1, 1024), ("int((char2(-127, 1) % char2(x, 1)).x)", -1, 0),
    ("int((-char2(x)).x)", -128, 1024), ("int((ushort2(65535) * ushort2(x)).x)", 65535, 0),
])
def test_a_vector_element_metal_leaves_undefined_is_noted(fixture_root, tmp_path, client,
                                                           expr, value, bit):
    """Metal's vectors are clang's extended vectors: their elements are not promoted, so a
    narrow element's overflow (bit 1024) or a shift count past its width (32) is undefined, as
    an index past the vector is (64); the shim computes each element promoted, so it notes
    them itself (porter/metal.h's detail::vector_element). A scalar `-char` promotes to int
    in Metal as in C++: defined."""
    lib = build_source(UNDEFINED_INT.replace("EXPR", expr), tmp_path / "v.metal", fixture_root,
                       strict=False)
    reg = lib.find("u", "int")[0]
    run_registration(client, lib, reg, [torch.tensor([value], dtype=torch.int32)])
    bits = client.undefined[0] if client.undefined else 0
    assert bits & (32 | 64 | 1024) == bit, (expr, value, client.undefined)


@pytest.mark.parametrize(("expr", "value", "noted", "folded"), [
    ("x + 1 < x ? 1 : 0", 2147483647, True, 0),        # review 34's N01: wraps here, folds there
    ("x + 1 < x ? 1 : 0", 5, False, 0),
    ("-x", -2147483647 - 1, True, -2147483647 - 1),     # N04's negation of the least int
    ("x * 2", 1 << 30, True, None),                     # wraps on both: the same answer
    ("x * 2", 7, False, None),
])
def test_a_signed_overflow_is_noted_and_run_again_assuming_none(fixture_root, tmp_path, client,
                                                                expr, value, noted, folded):
    """Signed overflow is undefined in Metal: the build goes on wrapped and notes it (bit 256),
    and the folding build (toolchain.FOLDING_FLAGS) answers as a compiler that assumes none
    may; the verdict holds that answer to the reference too."""
    text = UNDEFINED_INT.replace("EXPR", expr)
    lib = build_source(text, tmp_path / "o.metal", fixture_root, strict=False)
    reg = lib.find("u", "int")[0]
    wrapped = run_registration(client, lib, reg, [torch.tensor([value], dtype=torch.int32)])
    bits = client.undefined[0] if client.undefined else 0
    assert bool(bits & 256) == noted, (expr, value, client.undefined)
    if expr == "x * 2":
        assert wrapped.tolist() == [torch.tensor([value * 2]).to(torch.int32).item()]
    if folded is not None:
        folding = build_source(text, tmp_path / "o.metal", fixture_root, strict=False, folding=True)
        again = run_registration(client, folding, folding.find("u", "int")[0],
                                 [torch.tensor([value], dtype=torch.int32)])
        assert again.tolist() == [folded]


@pytest.mark.slow
@pytest.mark.parametrize(("guard", "code"), [("x + T(1) < x", 1), ("true", 0)])
def test_a_functor_right_only_if_signed_overflow_wraps_is_not_proven(real_root, guard, code):
    """Review 34's N01 through `porter test`: neg's functor right at INT_MAX only when
    `x + 1 < x` wraps to true was green (the emulator wrapped); a Mac's clang may fold it to
    false. Its twin, which never asks, is right on every value and green."""
    from porter.source.checkout import KERNELS
    from tests.porter_run import porter
    path = real_root / KERNELS / "UnaryKernel.metal"
    text = path.read_text()
    old = "  inline T operator()(const T x) {\n    return T(-x);"
    assert text.count(old) == 1
    new = ("  inline T operator()(const T x) {\n    if (is_same_v<T, int>)\n      return "
           f"({guard}) || x != numeric_limits<T>::max() ? T(-x) : T(0);\n    return T(-x);")
    path.write_text(text.replace(old, new))
    result = porter("test", "neg", "--device", "emulate", "--dtype", "int32", root=real_root)
    assert result.code == code, result.out
    if code:
        assert "assuming no signed integer overflow, as Apple's compiler may" in result.out


HALF_FMA = """\
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
struct hfma_functor {
  inline half operator()(const half a, const half b) {
    return fma(a, b, half(5.9604644775390625e-08));
  }
};
REGISTER_BINARY_OP(hfma, half, half);
"""


def test_a_half_fma_rounds_once(fixture_root, tmp_path, client):
    """Review 34's N02: 1.5 * 0.6669921875 + 2^-24 lies just above the half midpoint between 1
    and 1 + 2^-10; a fused half fma (a GPU's, LLVM's folding) answers 1 + 2^-10. Through float
    the shim rounded twice: float's tie 1 + 2^-11, then half's even 1.0."""
    lib = build_source(HALF_FMA, tmp_path / "f.metal", fixture_root, strict=False)
    reg = lib.find("hfma", "half")[0]
    out = run_registration(client, lib, reg, [torch.tensor([1.5, 2.0], dtype=F16),
                                              torch.tensor([0.6669921875, 3.0], dtype=F16)])
    assert out.tolist() == [1.0009765625, 6.0]


LIBRARY_EDGES = """\
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
struct sine_functor {
  inline float operator()(const float x) {
    float c;
    const float s = sincos(x, c);
    return s;
  }
};
struct mix_to_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return mix(a, b, T(1));
  }
};
REGISTER_UNARY_OP(sine, float, float);
REGISTER_BINARY_OP(mix_to, half, half);
REGISTER_BINARY_OP(mix_to, float, float);
"""


@pytest.fixture(scope="module")
def edges(fixture_root, tmp_path_factory):
    return build_source(LIBRARY_EDGES, tmp_path_factory.mktemp("edges") / "e.metal", fixture_root,
                        strict=False)


def test_sincos_flushes_as_every_float_function_does(edges, client):
    """Review 35's B10g: glibc's sinf returns a tiny argument's bits; an Apple GPU reads the
    float32 subnormal as zero, sin(0) = 0 (as the shim's sin already answered)."""
    reg = edges.find("sine", "float")[0]
    out = run_registration(client, edges, reg, [torch.tensor([SUB32, 0.5])])
    assert out[0].item() == 0.0 and out[1].item() == pytest.approx(math.sin(0.5), rel=1e-6)


@pytest.mark.parametrize(("dtype", "mac"), [(F16, 2047.0), (F32, 2048.0)])
def test_half_mix_is_computed_in_half(edges, client, dtype, mac):
    """Review 35's N12: MSL §6.2's `x + (y - x) * a`; in half `2048 - -1` rounds to 2048, so
    mix(-1, 2048, 1) is 2047 (through float, as the shim did, 2048)."""
    reg = edges.find("mix_to", {F16: "half", F32: "float"}[dtype])[0]
    out = run_registration(client, edges, reg, [torch.tensor([-1.0], dtype=dtype),
                                                torch.tensor([2048.0], dtype=dtype)])
    assert out.tolist() == [mac]


QUOTED_INCLUDE = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
#include "local/scale.h"
using namespace metal;
struct scaled_functor {
  inline float operator()(const float a) { return a * local_scale(); }
};
REGISTER_UNARY_OP(scaled, float, float);
"""


def test_a_quoted_include_is_found_beside_the_kernel_file(tmp_path, fixture_root, client):
    # review 38's L22: porter compiles a copy of the file elsewhere, so `#include "x.h"` next
    # to the kernel file was "No such file or directory" where a Mac builds it; and the header
    # is part of what a cached build depends on
    (tmp_path / "local").mkdir()
    header = tmp_path / "local" / "scale.h"
    header.write_text("#pragma once\ninline float local_scale() { return 2.0f; }\n")
    x = [torch.tensor([1.5, -3.0])]
    lib = build_source(QUOTED_INCLUDE, tmp_path / "q.metal", fixture_root)
    assert lib.build_errors() == []
    assert run_registration(client, lib, lib.find("scaled", "float")[0], x).tolist() == [3.0, -6.0]
    header.write_text("#pragma once\ninline float local_scale() { return 3.0f; }\n")
    lib = build_source(QUOTED_INCLUDE, tmp_path / "q.metal", fixture_root)
    assert run_registration(client, lib, lib.find("scaled", "float")[0], x).tolist() == [4.5, -9.0]


INTEGER_EDGES = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
struct edges_functor {
  inline int operator()(const int a, const int b) { return int(absdiff(a, b)); }
};
struct magnitude_functor {
  inline int operator()(const int a) { return abs(a); }
};
REGISTER_BINARY_OP(edges, int, int);
REGISTER_UNARY_OP(magnitude, int, int);
"""


def test_absdiff_is_exact_and_abs_of_the_least_value_is_undefined(tmp_path, fixture_root, client):
    # review 38's B18: MSL's absdiff is |x - y| "without modulo overflow"; the shim computed
    # INT_MAX - INT_MIN in int, an overflow of its own charged to the kernel. B02: abs(INT_MIN)
    # has no int answer: Metal leaves it undefined, and the sample is not proven
    lib = build_source(INTEGER_EDGES, tmp_path / "e.metal", fixture_root)
    big, least = 2 ** 31 - 1, -2 ** 31
    a = torch.tensor([big, 5, least], dtype=torch.int32)
    b = torch.tensor([least, 7, least], dtype=torch.int32)
    assert run_registration(client, lib, lib.find("edges", "int")[0], [a, b]).tolist() == [-1, 2, 0]
    assert not client.undefined or not client.undefined[0] & (128 | 256)
    magnitude = lib.find("magnitude", "int")[0]
    run_registration(client, lib, magnitude, [torch.tensor([-5], dtype=torch.int32)])
    assert not client.undefined or not client.undefined[0] & 128
    run_registration(client, lib, magnitude, [torch.tensor([least], dtype=torch.int32)])
    assert client.undefined and client.undefined[0] & 128      # UNDEFINED_ARGUMENT


def test_the_least_value_divided_by_minus_one_is_undefined_even_where_folded(fixture_root,
                                                                             tmp_path, client):
    # review 38's U03: operands g++ folds give no trap and one answer (the least value) in
    # both of porter's signed-overflow readings, so the sample was green; LLVM folds the same
    # division to poison. The sanitizer's note is bit 2048: not proven, whatever the answer
    expr = ("(9223372036854775807L * 0 - 9223372036854775807L - 1 + long(x != x)) / "
            "long(-1 - long(x != x)) < 0 ? 1 : 0")
    lib = build_source(UNDEFINED_INT.replace("EXPR", expr), tmp_path / "d.metal", fixture_root,
                       strict=False)
    run_registration(client, lib, lib.find("u", "int")[0], [torch.tensor([3], dtype=torch.int32)])
    assert client.undefined and client.undefined[0] & 2048, client.undefined


@pytest.mark.parametrize(("expr", "value", "first", "other"), [
    # review 38's U08: an integer past 2^24 to bfloat: through float (two roundings), or once
    ("int(float(bfloat(x)))", 16842753, 16777216, 16908288),
    ("int(float(bfloat(x)))", 16777216, None, None),           # float holds it: one answer
    # B13: ilogb of zero, FP_ILOGB0 the least int (glibc) or -INT_MAX
    ("ilogb(float(x) * 0.0f)", 3, -2147483648, -2147483647),
    # B10: frexp of a float subnormal, flushed first (exponent 0) or taken apart (-148)
    ("int e = 0;\n    frexp(as_type<float>(uint(x)), e);\n    return e", 1, 0, -148),
    ("int e = 0;\n    frexp(float(x), e);\n    return e", 3, None, None),
    # B09: a function the specification bounds in ulp (rsqrt: MSL §7.4) may answer either float
    # around the exact value, 1/sqrt(3) = 0x3f13cd3a.2c...: this CPU's bits and the other one
    ("int(as_type<uint>(rsqrt(float(x))))", 3, 0x3f13cd3a, 0x3f13cd3b),
    # a half overload brackets at half's precision (0x389e and 0x389f around 0.57735)
    ("int(as_type<ushort>(rsqrt(half(x))))", 3, 0x389e, 0x389f),
    ("int(as_type<uint>(pow(float(x), 0.5f)))", 2, 0x3fb504f3, 0x3fb504f4),
    # two calls with one exact value do not move together (every other call of an element
    # moves: review 40's B17), and sincos's answers are sin's and cos's (V13)
    ("int(pow(float(x), -0.5f) == rsqrt(float(x)))", 3, 1, 0),
    # one function answers one argument alike wherever it is called (B18: the same exp in a
    # helper and in the functor): the second reading moves both, and they stay equal
    ("int(as_type<uint>(exp(float(x) * 0.1f)) == as_type<uint>(exp(float(x) * 0.1f)))", 7, 1, 1),
    ("float c = 0.0f;\n    return int(sincos(float(x) / 6.0f, c) == sin(float(x) / 6.0f))", 3, 1, 0),
    # pow's and powr's exact answers are read below too (Apple's powr is exp2(y * log2(x)): V15)
    ("int(powr(float(x), 5.0f))", 3, 243, 242),
    # an exact answer has one float, and correctly rounded functions are not read twice
    ("int(as_type<uint>(sqrt(float(x))))", 4, None, None),
    ("int(as_type<uint>(exp(float(x) - 3.0f)))", 3, None, None),
    ("int(as_type<uint>(floor(float(x) / 3.0f)))", 7, None, None),
    # fast::tanh runs Apple's formula (upstream #186286): its answer is that formula's, once;
    # tanh(-10) is -1 there, where gelu's `x * (1 + tanh(u))` relies on it
    ("int(as_type<uint>(fast::tanh(float(x) - 13.0f)))", 3, None, None),
    # review 40's V16: length's squares overflow (or flush) where a scaled length's do not; the
    # specification does not say which: both read. Squares in range: one answer
    ("int(isinf(length(float2(float(x) * 1e20f, 4e20f))))", 3, 1, 0),
    ("int(length(float2(float(x) * 1e-20f, 4e-20f)) * 1e20f + 0.5f)", 3, 0, 5),
    ("int(distance(float2(float(x) * 1e20f, 0.0f), float2(0.0f, -4e20f)) < 1e21f)", 3, 0, 1),
    ("int(length(float2(float(x), 4.0f)))", 3, None, None),
    ("int(as_type<uint>(precise::tanh(float(x) - 13.0f)))", 3, 0xbf800000 - 2 ** 32, 0xbf7fffff - 2 ** 32),
])
def test_an_answer_the_specification_leaves_open_is_read_both_ways(fixture_root, tmp_path, client,
                                                                   expr, value, first, other):
    text = UNDEFINED_INT.replace("return EXPR", expr if "return" in expr else f"return {expr}")
    lib = build_source(text, tmp_path / "o.metal", fixture_root, strict=False)
    out = run_registration(client, lib, lib.find("u", "int")[0],
                           [torch.tensor([value], dtype=torch.int32)])
    if first is None:
        assert not client.undefined or not client.undefined[0] & 4096
        return
    assert out.item() == first
    bits, reading = client.undefined[0], client.undefined[1]
    if other == first:
        assert bits & 4096 and reading is None      # the same bytes: not sent again
        return
    assert bits & 4096 and int.from_bytes(reading[:4], "little", signed=True) == other


CONSTANT_TABLE = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
constant int tab[2] = {7, 7};
constant int next_tab[2] = {0, 0};
struct stepped_functor {
  inline int operator()(const int x) {
    constant int* p = tab;
    return p[x] + int(sizeof(tab) / sizeof(tab[0]));
  }
};
REGISTER_UNARY_OP(stepped, int, int);
"""


def test_a_read_past_a_constant_array_is_not_proven(fixture_root, tmp_path, client):
    # review 36's K07, 37's N29: a pointer into a program-scope `constant` table stepped past
    # its end read the next table's bytes on this CPU, and the sample passed on them. The
    # array ends at a guard page now: the read is the kernel's OUT_OF_BOUNDS note
    lib = build_source(CONSTANT_TABLE, tmp_path / "t.metal", fixture_root)
    stepped = lib.find("stepped", "int")[0]
    out = run_registration(client, lib, stepped, [torch.tensor([0, 1], dtype=torch.int32)])
    assert out.tolist() == [9, 9]               # within the table: its values, its size
    assert not client.undefined or not client.undefined[0] & 64
    run_registration(client, lib, stepped, [torch.tensor([1, 2], dtype=torch.int32)])
    assert client.undefined and client.undefined[0] & 64, client.undefined
    # the worker survives the stopped read, with the CPU's switches as they were
    out = run_registration(client, lib, stepped, [torch.tensor([1], dtype=torch.int32)])
    assert out.tolist() == [9] and (not client.undefined or not client.undefined[0] & 64)


OUTSIDE_AN_OBJECT = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
#include "held_table.h"
using namespace metal;
constant int tab[2] = {7, 7};
struct o_functor {
  inline int operator()(const int x) {
    float t[2] = {1.0f, 2.0f};
    EXPR
  }
};
REGISTER_UNARY_OP(o, int, int);
"""


@pytest.mark.parametrize(("expr", "values", "outside"), [
    # review 40's U04: past a thread-space array through a pointer (-fsanitize=bounds sees only
    # an index into an array of known bound)
    ("thread float* p = t;\n    return int(p[x]);", [0, 1], False),
    ("thread float* p = t;\n    return int(p[x]);", [1, 2], True),
    # U06: before a program-scope `constant` table (its guard page follows it)
    ("constant int* p = tab;\n    return p[x - 1];", [1, 2], False),
    ("constant int* p = tab;\n    return p[x - 1];", [0, 1], True),
    # V01: past a table of a header the kernel file includes (the build guards the file's own)
    ("constant int* p = held;\n    return p[x];", [0, 1], False),
    ("constant int* p = held;\n    return p[x];", [1, 2], True),
])
def test_a_read_outside_any_object_is_not_proven(fixture_root, tmp_path, client, expr, values,
                                                 outside):
    # AddressSanitizer's redzones (toolchain.ADDRESS_CHECK): the worker notes a report as a guard
    # page's fault, bit 64, and the run stops there
    from porter.emulate import toolchain
    if toolchain.address_runtime(toolchain.compiler()) is None:
        pytest.skip("this compiler has no libasan: reads outside an object are not seen")
    (tmp_path / "held_table.h").write_text("#pragma once\nconstant int held[2] = {5, 5};\n")
    text = OUTSIDE_AN_OBJECT.replace("EXPR", expr)
    lib = build_source(text, tmp_path / "o.metal", fixture_root)
    run_registration(client, lib, lib.find("o", "int")[0], [torch.tensor(values, dtype=torch.int32)])
    bits = client.undefined[0] if client.undefined else 0
    assert bool(bits & 64) == outside, client.undefined


@pytest.mark.parametrize(("expr", "read"), [
    # review 40's U25: a forgotten accumulator, a vector (the shim's vectors were zeroed)
    ("float2 acc;\n    acc += float2(float(x), 1.0f);\n    return int(acc.x)", True),
    # U01: a local right only for a negative value (g++'s pattern was -16843010)
    ("int k;\n    if (x > 100) k = 1;\n    return k < 0 ? 1 : 0", True),
    # U02, U19: an array's element, a struct's member
    ("int a[2];\n    a[0] = x;\n    return a[1] < 0 ? 1 : 0", True),
    ("pair_of p;\n    p.w = 1.0f;\n    return p.v[0] < 0.0f ? 1 : 0", True),
    # clean twins: written first, or value-initialized (zero, as in Metal)
    ("float2 acc = 0.0f;\n    acc += float2(float(x), 1.0f);\n    return int(acc.x)", False),
    ("float2 acc = float2();\n    acc += float2(float(x), 1.0f);\n    return int(acc.x)", False),
    ("int a[2] = {};\n    a[0] = x;\n    return a[1] < 0 ? 1 : 0", False),
])
def test_a_local_read_before_it_is_written_is_not_proven(fixture_root, tmp_path, client, expr, read):
    # the -O0 build leaves locals uninitialized and the worker runs each sample on two fillings
    # of the stack: an answer that changes read one (bit 32768)
    text = UNDEFINED_INT.replace("return EXPR", expr)
    lib = build_source(text, tmp_path / "r.metal", fixture_root, strict=False)
    run_registration(client, lib, lib.find("u", "int")[0], [torch.tensor([3, 4], dtype=torch.int32)])
    bits = client.undefined[0] if client.undefined else 0
    assert bool(bits & 32768) == read, client.undefined


@pytest.mark.parametrize(("value", "undefined"), [(2, True), (1, False), (0, False)])
def test_a_bool_of_a_byte_other_than_0_or_1_is_undefined(fixture_root, tmp_path, client, value,
                                                         undefined):
    # review 40's L23b: as_type<bool>(uchar(2)) has no value in Metal's bool (this CPU reads
    # it as true); bit 128, not proven. The same for a bool vector's elements, not its padding
    text = UNDEFINED_INT.replace(
        "return EXPR", "bool3 v = as_type<bool3>(uint(x) | 0xff000000u);\n"
        "    return int(as_type<bool>(uchar(x))) + int(v.x)")
    lib = build_source(text, tmp_path / "b.metal", fixture_root, strict=False)
    run_registration(client, lib, lib.find("u", "int")[0],
                     [torch.tensor([value], dtype=torch.int32)])
    bits = client.undefined[0] if client.undefined else 0
    assert bool(bits & 128) == undefined, client.undefined
