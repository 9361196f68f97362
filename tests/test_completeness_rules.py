"""porter.port.completeness: the CPU's float16/bfloat16 fallback and each wrong output type
(issue 36: ignoring the fallback, or flagging only one of two wrong registrations that share a
reason, survived the suite)."""

from __future__ import annotations

from types import SimpleNamespace

from porter.port import completeness


class _OpInfo:
    def __init__(self, dtypes):
        self._dtypes = dtypes

    def dtypes(self, which):
        return self._dtypes

    def flag(self, name):
        return False


def _spec(sent, cpu, returns_bool=False):
    return SimpleNamespace(op="foo", kernel="foo", dtypes=tuple(sent), opinfos=[_OpInfo(cpu)],
                           returns_bool=returns_bool, promotes_int_to_float=False)


def test_half_and_bfloat_run_on_cpu_through_its_float_fallback():
    plan = completeness.dtype_plan(_spec(["float32", "float16", "bfloat16", "int8"], {"float32"}),
                                   tested_with_complex=False)
    assert plan.register == frozenset({"float32", "float16", "bfloat16"})
    assert plan.refused == frozenset({"int8"})


def test_every_wrong_output_type_is_flagged_not_only_the_first():
    # an op that always returns bool: two registrations with another output, one reason
    planned = ("REGISTER_UNARY_OP(foo, float, bool);\n"
               "REGISTER_UNARY_OP(foo, half, half);\n"
               "REGISTER_UNARY_OP(foo, bfloat, float);\n")
    plan = completeness.DtypePlan(frozenset({"float32", "float16", "bfloat16"}), frozenset())
    spec = _spec(["float32", "float16", "bfloat16"], None, returns_bool=True)
    gaps, wrong = completeness.check(spec, planned, plan)
    assert gaps == [] and len(wrong) == 1
    assert "half -> half" in wrong[0].message and "bfloat -> float" in wrong[0].message, wrong
    assert "float -> bool" not in wrong[0].message
