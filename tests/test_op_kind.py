"""One classification of ops (porter.source.op_kind), one reason per op on every surface.

`candidates`, `status`, `new-op` and `migrate-from-mpsgraph` each say why porter cannot port an
op; for every `.out` and `.grad_input` overload of torch's real yaml they must say the same.
"""

from __future__ import annotations

import pytest

from porter.checks.tree import Tree, op_of_entry
from porter.errors import PorterError
from porter.port import migration
from porter.port.resolve import NATIVE, resolve
from porter.source.cpu_kernel import shared_function_stubs
from porter.source import native_yaml, op_kind
from porter.source.checkout import Checkout
from porter.survey import port_candidates as candidates
from porter.survey.op_status import findings_report, gather

# Every reason a kind gives, as the words all reasons of that family share.
KIND_PHRASES = (op_kind.NOT_ELEMENTWISE, op_kind.NOT_STRUCTURED, op_kind.COMPOSITE, op_kind.NO_OUT,
                op_kind.UFUNC, "porter ports unary and binary tensor ops",
                "porter ports ops with one output")


def _refusal(call) -> str:
    try:
        call()
    except PorterError as err:
        return err.message
    return ""


@pytest.mark.slow
def test_every_out_and_grad_input_overload_gets_the_same_reason_everywhere(real_tree_template):
    checkout = Checkout.at(real_tree_template)
    tree = Tree(checkout)
    ops = sorted({op_of_entry(e) for e in tree.entries if e.overload in ("out", "grad_input")})
    assert len(ops) > 400          # torch's yaml, not a fixture
    listed = {c.op: c for c in candidates.find(checkout).candidates}
    report = findings_report(tree)
    refused = 0
    for op in ops:
        kind, _ = op_kind.classify_family(
            tree.families[op], runs_stub=lambda e: bool(shared_function_stubs(checkout, e)))
        new_op = _refusal(lambda: resolve(checkout, op))
        migrate = _refusal(lambda: migration._resolve(checkout, op))      # migrate's first step
        status = gather(tree, op, report)
        said = [new_op, migrate, status.why, listed[op].how if op in listed else ""]
        if kind.portable:
            for text in said:
                assert not any(p in text for p in KIND_PHRASES), (op, text)
            continue
        sentence = kind.refusal(op)
        assert new_op == sentence, op
        if op in listed and listed[op].automatic:
            # a str that picks the kernel (gelu): new-op refuses it and so does the shared-row
            # resolution; migrate-from-mpsgraph ports it in place of its MPS impl
            # (porter.port.enum_port), and candidates says how
            assert "picked in the host" in listed[op].how, (op, listed[op].how)
            assert migrate.endswith(sentence), (op, migrate)
            continue
        refused += 1
        assert migrate.endswith(sentence), (op, migrate)
        if op in listed:
            assert listed[op].how == kind.reason and not listed[op].automatic, op
        if status.state == NATIVE:      # already ported by hand: nothing left to refuse
            assert status.next != "no porter command", op
        else:
            assert status.next == "no porter command" and status.why.startswith(sentence), (op, status.why)
    assert refused > 300


@pytest.mark.parametrize("op,listed_as,reason", [
    # (pointwise non-structured functions whose shared function runs a stub, conj_physical and
    # logical_not, are ported since issue 22; without it, tests/test_logical_ops.py)
    # ops wearing scalars that are not one functor
    ("mse_loss", "other", op_kind.REDUCTION.format(arg="int reduction=Mean")),
    ("glu", "other", op_kind.SPLITS.format(arg="int dim=-1")),
    ("pow", "binary", op_kind.OVERLOADS.format(
        n=3, kernels="pow_Tensor_Tensor_out, pow_Scalar_out, pow_Tensor_Scalar_out")),
])
def test_candidates_lists_what_the_commands_refuse_with_their_reason(real_tree_template, op, listed_as, reason):
    checkout = Checkout.at(real_tree_template)
    row = next(c for c in candidates.find(checkout).candidates if c.op == op)
    assert (row.kind, row.automatic, row.how) == (listed_as, False, reason)
    assert _refusal(lambda: resolve(checkout, op)) == f"'{op}' {reason}"


_entry = """\
- func: {schema}
{fields}  dispatch:
    CPU, CUDA: x_out
"""
STRUCTURED = "  structured: True\n  structured_inherits: TensorIteratorBase\n"


def _kind(schema: str, fields: str = STRUCTURED, **kw) -> op_kind.OpKind:
    entry, = native_yaml.scan(_entry.format(schema=schema, fields=fields))
    return op_kind.classify(entry, **kw)


@pytest.mark.parametrize("schema,fields,shape,reason", [
    pytest.param("x.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", STRUCTURED, "unary", "", id="unary"),
    pytest.param("x.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)", STRUCTURED,
                 "binary", "", id="binary"),
    pytest.param("x.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
                 STRUCTURED, "alpha", "", id="alpha"),
    pytest.param("x.out(Tensor self, float? eps=None, *, Tensor(a!) out) -> Tensor(a!)", STRUCTURED,
                 "scalar", "", id="optional-scalar"),
    pytest.param("x.out(Tensor self, Scalar beta=1, Scalar threshold=20, *, Tensor(a!) out) -> Tensor(a!)",
                 STRUCTURED, "scalar", "", id="two-scalars"),
    pytest.param("x.out(Tensor self, *, str approximate='none', Tensor(a!) out) -> Tensor(a!)", STRUCTURED,
                 "other", "takes a str argument (approximate) that picks its kernel: porter passes Scalar "
                 "and float arguments to a kernel, not strings", id="str"),
    pytest.param("x.out(Tensor self, int dim, *, Tensor(a!) out) -> Tensor(a!)", STRUCTURED, "other",
                 op_kind.SPLITS.format(arg="int dim"), id="an-int-dim-is-not-a-kernel-scalar"),
    pytest.param("x.out(Tensor self, Tensor target, int reduction=Mean, *, Tensor(a!) out) -> Tensor(a!)",
                 STRUCTURED, "other", op_kind.REDUCTION.format(arg="int reduction=Mean"), id="reduction"),
    pytest.param("x.out(Tensor self, bool flag, *, Tensor(a!) out) -> Tensor(a!)", STRUCTURED, "other",
                 "takes (Tensor self, bool flag): porter ports unary and binary tensor ops whose other "
                 "arguments are Scalar or float, not bool flag", id="a-bool-is-not-a-kernel-scalar"),
    pytest.param("x.out(Tensor self, Tensor t1, Tensor t2, *, Scalar value=1, Tensor(a!) out) -> Tensor(a!)",
                 STRUCTURED, "ternary", "", id="three-tensors-and-a-scalar"),
    pytest.param("x.out(Tensor self, Tensor t1, Tensor t2, *, Tensor(a!) out) -> Tensor(a!)",
                 STRUCTURED, "other", "takes (Tensor self, Tensor t1, Tensor t2): porter ports unary "
                 "and binary tensor ops whose other arguments are Scalar or float",
                 id="three-tensors-without-a-scalar"),
    pytest.param("x.out(Tensor self, Tensor t1, Tensor t2, *, float value=1, Tensor(a!) out) -> Tensor(a!)",
                 STRUCTURED, "other", "takes (Tensor self, Tensor t1, Tensor t2, float value=1): porter "
                 "ports unary and binary tensor ops whose other arguments are Scalar or float",
                 id="three-tensors-and-a-float"),
    pytest.param("x.out(Tensor self, *, Tensor(a!) values, Tensor(b!) indices) -> (Tensor(a!), Tensor(b!))",
                 STRUCTURED, "other", "writes 2 outputs (values, indices): porter ports ops with one "
                 "output", id="two-outputs"),
    pytest.param("x.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
                 "  device_check: NoCheck   # TensorIterator\n  tags: pointwise\n", "unary",
                 op_kind.NOT_STRUCTURED, id="pointwise-not-structured"),
    pytest.param("x.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
                 "  device_check: NoCheck   # TensorIterator\n", "other", op_kind.NOT_ELEMENTWISE,
                 id="a-comment-is-not-a-fact"),
    pytest.param("x_backward.grad_input(Tensor grad_output, Tensor output, *, Tensor(a!) grad_input) "
                 "-> Tensor(a!)", STRUCTURED + "  tags: pointwise\n", "binary", "",
                 id="backward"),
    # a backward op's Scalars reach its kernel as a forward op's do (softplus_backward)
    pytest.param("x_backward.grad_input(Tensor grad_output, Tensor self, Scalar beta, Scalar threshold, *, "
                 "Tensor(a!) grad_input) -> Tensor(a!)", STRUCTURED, "scalar", "",
                 id="backward-with-scalars"),
    # leaky_relu_backward's self_is_result: the meta's to check, the kernel never sees it (resolve
    # checks the stub takes no bool); the same bool on a forward op stays refused (above)
    pytest.param("x_backward.grad_input(Tensor grad_output, Tensor self, Scalar negval, bool is_result, *, "
                 "Tensor(a!) grad_input) -> Tensor(a!)", STRUCTURED, "scalar", "",
                 id="backward-with-a-bool-beside-its-scalars"),
])
def test_classify(schema, fields, shape, reason):
    kind = _kind(schema, fields)
    assert (kind.shape, kind.reason) == (shape, reason)


def test_a_shared_function_that_runs_a_stub_is_portable_when_the_caller_found_it():
    # logit.out: not structured, but CPU and CUDA share logit_out, which runs logit_stub
    # (the yaml cannot say so: resolve and candidates read the function and pass runs_stub)
    fields = "  tags: pointwise\n"
    schema = "x.out(Tensor self, float? eps=None, *, Tensor(a!) out) -> Tensor(a!)"
    assert _kind(schema, fields).reason == op_kind.NOT_STRUCTURED
    assert (_kind(schema, fields, runs_stub=True).shape, _kind(schema, fields, runs_stub=True).reason) == ("scalar", "")


def test_the_wider_net_changes_membership_never_the_reason():
    pointwise = "  tags: pointwise\n"
    narrow = _kind("x.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", pointwise)
    wide = _kind("x.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", pointwise, include_pointwise=True)
    assert (narrow.elementwise, wide.elementwise) == (False, True)
    assert narrow.reason == wide.reason == op_kind.NOT_STRUCTURED


def test_scalar_and_str_arguments_are_listed_on_the_kind():
    kind = _kind("x.out(Tensor self, Scalar beta=1, Scalar? threshold=20, *, str mode='a', "
                 "Tensor(a!) out) -> Tensor(a!)")
    assert kind.tensors == ("Tensor self",)
    assert kind.scalars == ("Scalar beta=1", "Scalar? threshold=20")
    assert kind.strings == ("str mode='a'",)
    assert kind.outputs == ("Tensor(a!) out",)


def test_a_backward_op_without_an_out_overload_is_classified_by_its_function():
    # mish_backward(Tensor grad_output, Tensor self) -> Tensor, CPU and CUDA sharing one function
    # that builds the iterator and runs the stub: portable only when the caller found that stub
    from porter.source import native_yaml
    text = ("- func: x_backward(Tensor grad_output, Tensor self) -> Tensor\n  python_module: nn\n"
            "  dispatch:\n    CPU, CUDA: x_backward\n    MPS: x_backward_mps\n")
    entries = list(native_yaml.scan(text))
    kind, entry = op_kind.classify_family(entries, runs_stub=lambda e: True)
    assert (kind.shape, kind.reason, entry.name) == ("binary", "", "x_backward")
    refused, _ = op_kind.classify_family(entries, runs_stub=lambda e: False)
    assert refused.reason == op_kind.NOT_ELEMENTWISE
