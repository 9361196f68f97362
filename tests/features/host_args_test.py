"""porter.emulate.host_args.alpha_value: what a host function hands its kernel, as
(host code, sample dtype, values) -> alpha tables.

The dtype comes as a torch dtype (an op_db sample) or as its name (a sample of the reference
cache, whose run imports no torch): both rows must give the same alpha, or the cached run tests
another kernel argument than the op_db run (and than a Mac).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from porter.emulate.host_args import FLOAT_MAX, HostCodeUnknown, alpha_value

NAN_TO_NUM_BODY = """\
  AT_DISPATCH_FLOATING_TYPES_AND2(kHalf, kBFloat16, iter.common_dtype(), "nan_to_num_mps", [&]() {
    dtype_max = static_cast<float>(std::numeric_limits<scalar_t>::max());
    dtype_lowest = static_cast<float>(std::numeric_limits<scalar_t>::lowest());
  });
  NanToNumParams<float> params;
  params.nan = static_cast<float>(nan.value_or(0.));
  params.posinf = posinf.has_value() ? static_cast<float>(posinf.value()) : dtype_max;
  params.neginf = neginf.has_value() ? static_cast<float>(neginf.value()) : dtype_lowest;
  lib.exec_unary_kernel_with_params(iter, "nan_to_num", params, "NanToNumParams_float");
"""
NAN_TO_NUM_PARAMS = ("TensorIteratorBase& iter, std::optional<double> nan, "
                     "std::optional<double> posinf, std::optional<double> neginf")
FIELDS = ["nan", "posinf", "neginf"]

# the struct at long for integers, at float otherwise (softplus-like, two calls)
TWO_STRUCTS_BODY = """\
  if (c10::isIntegralType(iter.common_dtype(), true)) {
    Params<long> params;
    params.beta = beta.to<int64_t>();
    lib.exec_unary_kernel_with_params(iter, "k", params, "Params_long");
    return;
  }
  Params<float> params;
  params.beta = beta.to<float>();
  lib.exec_unary_kernel_with_params(iter, "k", params, "Params_float");
"""

_limits = [
    pytest.param(dtype, (0.0, FLOAT_MAX[dtype], -FLOAT_MAX[dtype]), id=f"{dtype}'s extremes, by name")
    for dtype in ("float16", "bfloat16", "float32")
] + [
    pytest.param("torch.float16", (0.0, 65504.0, -65504.0), id="a dtype spelled as torch prints it"),
    pytest.param("int32", None, id="no floating dtype: the limits are not computed"),
]


@pytest.mark.parametrize("dtype, expected", _limits)
def test_nan_to_num_none_takes_the_dtypes_extremes(dtype, expected):
    call = lambda: alpha_value(NAN_TO_NUM_BODY, NAN_TO_NUM_PARAMS, FIELDS,  # noqa: E731
                               [None, None, None], dtype=dtype)
    if expected is None:
        with pytest.raises(Exception, match="dtype_max"):
            call()
    else:
        assert call() == expected


def test_the_extremes_are_torchs():
    torch = pytest.importorskip("torch")
    for name, value in FLOAT_MAX.items():
        dtype = getattr(torch, name)
        assert value == torch.finfo(dtype).max == -torch.finfo(dtype).min, name
        # a torch dtype gives what its name gives
        assert alpha_value(NAN_TO_NUM_BODY, NAN_TO_NUM_PARAMS, FIELDS, [1.0, None, -2.0],
                           dtype=dtype) == (1.0, value, -2.0)


@pytest.mark.parametrize("dtype, expected", [
    pytest.param("int64", (2,), id="an integer dtype takes the struct at long"),
    pytest.param("bool", (2,), id="bool is integral too (includeBool = true)"),
    pytest.param("float32", (2.5,), id="a floating dtype takes the struct at float"),
    pytest.param("complex64", (2.5,), id="and so does a complex one"),
])
def test_integers_take_the_long_struct(dtype, expected):
    assert alpha_value(TWO_STRUCTS_BODY, "TensorIteratorBase& iter, const Scalar& beta",
                       ["beta"], [2.5], dtype=dtype) == expected


def test_computing_an_alpha_imports_no_torch():
    # the reference cache's run (`porter test` after the first) runs without torch; add's alpha
    # and nan_to_num's extremes are computed there
    code = ("import sys; from porter.emulate.host_args import alpha_value; "
            f"alpha_value({NAN_TO_NUM_BODY!r}, {NAN_TO_NUM_PARAMS!r}, {FIELDS!r}, [None, 1.0, None], "
            "dtype='bfloat16'); "
            "alpha_value('lib.exec_binary_kernel(iter, \"add_alpha\", alpha);', "
            "'TensorIteratorBase& iter, const Scalar& alpha', None, [3], dtype='int32'); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


# the struct at long, filled through a float: the host rounds 2^24 + 1 to float first
THROUGH_FLOAT_BODY = TWO_STRUCTS_BODY.replace("params.beta = beta.to<int64_t>();",
                                              "params.beta = beta.to<float>();")


@pytest.mark.parametrize("body, beta, expected", [
    pytest.param(TWO_STRUCTS_BODY, 2**24 + 1, (2**24 + 1,), id="to<int64_t>() keeps 2^24 + 1"),
    pytest.param(THROUGH_FLOAT_BODY, 2**24 + 1, (2**24,),
                 id="to<float>() into a long field: 2^24, as on a Mac (was 2^24 + 1)"),
    pytest.param(THROUGH_FLOAT_BODY, 2**24, (2**24,), id="2^24 itself is a float"),
    pytest.param(THROUGH_FLOAT_BODY.replace("beta.to<float>()", "static_cast<float>(beta)"), 2**24 + 3,
                 (2**24 + 4,), id="static_cast<float> rounds to nearest even too"),
    pytest.param(THROUGH_FLOAT_BODY.replace("beta.to<float>()", "beta.to<double>()"), 2**24 + 1,
                 (2**24 + 1,), id="to<double>() holds it"),
])
def test_a_scalar_through_a_float_is_rounded_to_float32(body, beta, expected):
    assert alpha_value(body, "TensorIteratorBase& iter, const Scalar& beta", ["beta"], [beta],
                       dtype="int64") == expected


@pytest.mark.parametrize("argument, value", [
    pytest.param("Scalar(negative_slope.to<double>())", 0.5, id="a Scalar of a conversion (review 25's H20)"),
    pytest.param("c10::Scalar(negative_slope)", 0.5, id="a Scalar spelled with its namespace"),
    pytest.param("Scalar(Scalar(negative_slope).to<float>())", None, id="a form inside it that porter does not read"),
])
def test_a_scalar_made_of_a_form_porter_reads_is_that_form(argument, value):
    from porter.emulate.host_args import HostCodeUnknown, StubCall, stub_values
    call = StubCall([argument], ["negative_slope"])
    if value is None:
        with pytest.raises(HostCodeUnknown):
            stub_values(call, {"negative_slope": 0.5}, ["negative_slope"])
    else:
        assert stub_values(call, {"negative_slope": 0.5}, ["negative_slope"]) == [value]


_NAMED = 'lib.exec_unary_kernel(iter, {name}, lambda);'


@pytest.mark.parametrize("body, expected", [
    pytest.param(_NAMED.format(name='"hardshrink"'), 0.5, id="a literal name"),
    pytest.param('static constexpr const char* kName = "hardshrink";\n  '
                 + _NAMED.format(name="kName"), 0.5,
                 id="a local holding the name (review 41's H09: was 'cannot model', red)"),
    pytest.param(_NAMED.format(name="mps::kName"), 0.5, id="a qualified name"),
    pytest.param(_NAMED.format(name="names[0]"), HostCodeUnknown, id="an indexed name: not modelled"),
    pytest.param('lib.exec_unary_kernel(iter, kName, -lambda.to<float>());', HostCodeUnknown,
                 id="a scalar porter does not evaluate, after a named kernel"),
])
def test_the_scalar_is_read_whatever_names_the_kernel(body, expected):
    """host_args reads the arguments after the kernel's name; which kernel the name is, is
    hostmap's to read (a local holding it is host_model's "kernel name" shape)."""
    params = "TensorIteratorBase& iter, const Scalar& lambda"
    if expected is HostCodeUnknown:
        with pytest.raises(HostCodeUnknown):
            alpha_value(body, params, None, [0.5], dtype="float32")
    else:
        assert alpha_value(body, params, None, [0.5], dtype="float32") == expected
