"""porter.dispatch.kernel_choice: which registration runs a sample, as (sample, choice) tables.

Each row is a choice a Mac makes: a wrong one runs another kernel than MPS would (a result
compared against the wrong reference), or a kernel MPS does not have (a green for a red).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from porter.dispatch.kernel_choice import OpNames, choose, operands_can_swap, select_host


def reg(in_type: str, out_type: str, built: bool = True):
    return SimpleNamespace(in_type=in_type, out_type=out_type, built=built)


class Types:
    """A sample's types as a recorder wrote them: the promoted dtype and the meta output."""

    def __init__(self, common: str, out: str | None):
        self.common, self.out = common, out

    def operands_ok(self, operands) -> bool:
        return True

    def promoted(self, operands, arity: int) -> str:
        return self.common

    def out_dtype(self) -> str | None:
        return self.out


SAMPLE = SimpleNamespace(input=object(), args=[object()], kwargs={})
FLOAT_FLOAT, FLOAT_BOOL, HALF_HALF = reg("float", "float"), reg("float", "bool"), reg("half", "half")

_choices = (
    pytest.param([FLOAT_FLOAT, FLOAT_BOOL], "float32", "bool", FLOAT_BOOL,
                 id="the meta output picks among one input type (isnan-like: float -> bool)"),
    pytest.param([FLOAT_BOOL, FLOAT_FLOAT], "float32", "float32", FLOAT_FLOAT,
                 id="and the other way round"),
    pytest.param([FLOAT_FLOAT, FLOAT_BOOL], "float32", None, FLOAT_FLOAT,
                 id="an output the meta function cannot tell: the first of the input type"),
    pytest.param([HALF_HALF, FLOAT_FLOAT], "float32", "float32", FLOAT_FLOAT,
                 id="the promoted input type, not the first registration"),
    pytest.param([FLOAT_BOOL], "float32", "float32", None,
                 id="no registration with the output: MPS has no kernel"),
    pytest.param([reg("float", "float", built=False)], "float32", "float32", None,
                 id="a registration that did not build runs nothing"),
    pytest.param([reg("float", "float", built=False), FLOAT_FLOAT], "float32", "float32", FLOAT_FLOAT,
                 id="the built one beside it runs"),
)


@pytest.mark.parametrize("regs, common, out, expected", _choices)
def test_the_registration_that_runs(regs, common, out, expected):
    choice = choose("k", regs, "binary", SAMPLE, Types(common, out), "emulate", "k")
    assert choice.reg is expected
    assert (choice.arity, choice.common, choice.want_out) == (2, common, out)
    assert choice.matching == [r for r in regs if r.in_type == {"float32": "float"}[common]]


def host(kernel: str):
    return SimpleNamespace(kernel=kernel, stub=kernel)


DIV_HOSTS = [host("div_true"), host("div_floor"), host("div_trunc")]


@pytest.mark.parametrize("kwargs, kernel", [
    ({}, "div_true"),
    ({"rounding_mode": None}, "div_true"),
    ({"rounding_mode": "floor"}, "div_floor"),
    ({"rounding_mode": "trunc"}, "div_trunc"),
])
def test_divs_rounding_mode_picks_its_kernel(kwargs, kernel):
    assert select_host(DIV_HOSTS, OpNames("div"), kwargs).kernel == kernel
    # the order the host file lists them in does not matter
    assert select_host(DIV_HOSTS[::-1], OpNames("div"), kwargs).kernel == kernel


@pytest.mark.parametrize("operands, arity, promoted", [
    (("int32", "float32"), 2, "float32"),
    (("float32", "int32"), 2, "float32"),
    (("int8", "uint8"), 2, "int16"),
    (("int32", 2.5), 2, "float32"),
    (("float16", "int64", "float32"), 3, "float32"),
    (("int32", "float32"), 1, "int32"),
])
def test_operands_are_promoted_as_tensoriterator_does(operands, arity, promoted):
    torch = pytest.importorskip("torch")
    from porter.dispatch.kernel_choice import TorchSample
    tensors = [torch.ones(2, dtype=getattr(torch, x)) if isinstance(x, str) else x for x in operands]
    assert TorchSample(None, None).promoted(tensors, arity) == promoted



A, B, C = "a", "b", "c"
ORDERED = SimpleNamespace(input=A, args=[B, C], kwargs={})


@pytest.mark.parametrize("kind, order, operands", [
    pytest.param("binary", (1, 0), [B, A], id="threshold_backward(grad, self) reads self first"),
    pytest.param("binary", (0, 1), [A, B], id="the schema's order"),
    pytest.param("binary", None, [A, B], id="an order porter cannot read: the schema's"),
    pytest.param("binary", (0, 0), [A, A], id="threshold reads self twice"),
    pytest.param("ternary", (2, 0, 1), [C, A, B], id="three operands"),
    pytest.param("binary", (0, 1, 2), [A, B], id="an order of another arity is not this kernel's"),
    pytest.param("unary", (0, 0), [A], id="one operand: threshold's (self, self) is one tensor"),
])
def test_the_kernel_takes_its_operands_in_the_iterators_order(kind, order, operands):
    choice = choose("k", [FLOAT_FLOAT], kind, ORDERED, Types("float32", None), "emulate", "k", order)
    assert choice.operands == operands


@pytest.mark.parametrize("kind, swaps", [
    ("unary", False), ("unary_alpha", False), ("binary", True), ("binary_alpha", True),
    ("ternary", True), ("ternary_alpha", True),
])
def test_the_iterators_order_is_read_only_where_operands_can_swap(kind, swaps):
    # a one-operand kernel has one order: its device does not read the meta function for it
    assert operands_can_swap(kind) is swaps
