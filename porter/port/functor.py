"""The Metal functor source of an op: from `--body`, from the CPU lambda, or a failing skeleton."""

from __future__ import annotations

from typing import NamedTuple

from porter.port import body as translate_body
from porter.source.dtypes import METAL, METAL_FLOATING
from porter.errors import PorterError
from porter.port.resolve import UNARY, OpSpec
from porter.port.templates import render

SKELETON, FROM_BODY, FROM_CPU = "skeleton", "--body", "cpu-lambda"
EXAMPLES = {1: "x < 0 ? -x : x", 2: "a > b ? a : b"}      # --body, by number of arguments
COMPLEX_EXAMPLES = {1: "float2(x.x, -x.y)", 2: "float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x)"}


class Functor(NamedTuple):
    text: str
    origin: str          # skeleton | --body | cpu-lambda
    detail: str          # where the body came from, or why there is none
    complex: bool = False   # has an overload for complex (float2, half2) values


def build(spec: OpSpec, body: str | None, c10_functions, complex_body: str | None = None) -> Functor:
    """`c10_functions()` returns the c10::metal routines the checkout's headers define."""
    params = functor_params(spec)
    _check_expression("--body", body, spec, params, EXAMPLES)
    _check_expression("--complex-body", complex_body, spec, params, COMPLEX_EXAMPLES)
    if body is not None:
        statements_float = statements_int = f"return {body.strip().rstrip(';')};"
        origin, detail = FROM_BODY, body.strip()
    else:
        lam = spec.scalar_lambda
        if lam is None:
            return _skeleton(spec, params, f"no CPU kernel lambda found for {spec.stub.name}")
        if len(lam.params) != len(params):
            return _skeleton(spec, params, f"the CPU lambda at {lam.path}:{lam.line} takes "
                                           f"{len(lam.params)} arguments")
        as_float = translate_body.translate(lam.body, lam.params, "float", c10_functions)
        int_lam = lam.integral or lam
        as_t = translate_body.translate(int_lam.body, int_lam.params, "T", c10_functions)
        if as_float.statements is None:
            return _skeleton(spec, params, f"{as_float.reason} (CPU lambda at {lam.path}:{lam.line})")
        if as_t.statements is None:
            return _skeleton(spec, params, f"{as_t.reason} (CPU lambda at {int_lam.path}:{int_lam.line})")
        # the functor names its arguments as every functor of the file does: x, or a and b
        statements_float = translate_body.rename(as_float.statements, lam.params, params)
        statements_int = translate_body.rename(as_t.statements, int_lam.params, params)
        origin, detail = FROM_CPU, f"{lam.path}:{lam.line}"
    metal_types = {METAL[d] for d in spec.dtypes if d in METAL}
    has_float = bool(metal_types & set(METAL_FLOATING)) or not metal_types
    has_int = bool(metal_types - set(METAL_FLOATING) - {"float2"})
    out_bool = spec.returns_bool
    float_out = "bool" if out_bool else "T"
    int_out = "bool" if out_bool else ("float" if spec.promotes_int_to_float else "T")
    float_body = translate_body.wrap_returns(translate_body.as_float(statements_float, params),
                                             float_out) if has_float else None
    if not has_int:
        int_body = None
    elif spec.promotes_int_to_float and float_body:
        # Integers compute in float: reuse the floating overload rather than repeat the body.
        args = ", ".join(f"static_cast<float>({p})" for p in params)
        int_body = f"return operator()({args});"
    elif spec.promotes_int_to_float:
        int_body = translate_body.wrap_returns(translate_body.as_float(statements_float, params), "float")
    else:
        int_body = translate_body.wrap_returns(statements_int, int_out)
    complex_statements = f"return T({complex_body.strip().rstrip(';')});" if complex_body else None
    template = "unary_functor.metal.j2" if spec.kind == UNARY else "binary_functor.metal.j2"
    text = render(template, op=spec.kernel, params=params, float_body=float_body,
                  int_body=int_body, float_out=float_out, int_out=int_out,
                  complex_body=complex_statements)
    return Functor(text, origin, detail, complex=complex_statements is not None)


def functor_params(spec: OpSpec) -> tuple[str, ...]:
    """The functor's argument names, as `--body` writes them: a backward op's schema names
    (`grad_output`, `output`), else `x`, or `a` and `b`."""
    return spec.arg_names or (("x",) if spec.kind == UNARY else ("a", "b"))


def _check_expression(option: str, expression: str | None, spec: OpSpec, params, examples) -> None:
    problem = expression is not None and translate_body.expression_problem(expression, params)
    if problem:
        raise PorterError(f"{option} {expression.strip()!r} for {spec.op} {problem}",
                          hint=f"pass one Metal expression in {' and '.join(params)}, "
                               f"e.g. {option} '{examples[len(params)]}'")


def _skeleton(spec: OpSpec, params: tuple[str, ...], reason: str) -> Functor:
    signature = ", ".join(f"const T {p}" for p in params)
    out = "bool" if spec.returns_bool else "T"
    text = render("skeleton_functor.metal.j2", op=spec.kernel, reason=reason,
                  signature=signature, out=out)
    return Functor(text, SKELETON, reason)
