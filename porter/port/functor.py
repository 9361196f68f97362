"""The Metal functor source of an op: from `--body`, from the CPU lambda, or a failing skeleton."""

from __future__ import annotations

import re
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


def build(spec: OpSpec, body: str | None, c10_functions, complex_body: str | None = None,
          dtypes: frozenset[str] | None = None) -> Functor:
    """The functor of any op: `c10_functions()` returns the c10::metal routines the checkout's
    headers define. An op with scalar arguments gets its ALPHA functor (`_build_alpha`), with
    overloads for the `dtypes` it registers (default: the spec's); it takes no --complex-body."""
    if spec.scalars:
        return _build_alpha(spec, body, c10_functions, spec.dtypes if dtypes is None else dtypes)
    params = functor_params(spec)
    _check_expression("--body", body, spec, params, EXAMPLES)
    _check_expression("--complex-body", complex_body, spec, params, COMPLEX_EXAMPLES)
    if body is not None:
        statements_float = statements_int = float_in_t = f"return {body.strip().rstrip(';')};"
        origin, detail = FROM_BODY, body.strip()
    elif complex_only(spec):
        return _complex_only(spec, params, complex_body, c10_functions)
    else:
        lam, skeleton = _cpu_lambda(spec, params)
        if skeleton:
            return skeleton
        as_float = translate_body.translate_lambda(lam, (), "float", c10_functions)
        int_lam = lam.integral or lam
        as_t = translate_body.translate_lambda(int_lam, (), "T", c10_functions)
        if as_float.statements is None:
            return _skeleton(spec, params, f"{as_float.reason} (CPU lambda at {lam.path}:{lam.line})")
        if as_t.statements is None:
            return _skeleton(spec, params, f"{as_t.reason} (CPU lambda at {int_lam.path}:{int_lam.line})")
        # the functor names its arguments as every functor of the file does: x, or a and b
        statements_float = translate_body.rename(as_float.statements, lam.params, params)
        statements_int = translate_body.rename(as_t.statements, int_lam.params, params)
        float_in_t = translate_body.translate_lambda(lam, (), "T", c10_functions).statements
        if float_in_t is not None:
            float_in_t = translate_body.rename(float_in_t, lam.params, params)
        origin, detail = FROM_CPU, f"{lam.path}:{lam.line}"
    complex_lambda = complex_source(spec.scalar_lambda)
    if complex_body is None and body is None and complex_lambda is not None and "complex64" in spec.dtypes:
        # what the CPU computes for complex values: its own complex case (conj_physical's
        # `conj_impl(a)`), or the one lambda of a dispatch that takes complex dtypes too
        # (acosh's `std::acosh(a)`), where each routine it calls has a float2 overload in
        # c10/metal or porter writes one there (porter.port.complex_helpers)
        from porter.source.c10_metal import complex_functions
        checkout = getattr(c10_functions, "checkout", None)      # a porter.port.helpers.Library
        if checkout is not None:
            derived = translate_body.translate_complex(complex_lambda, lambda: complex_functions(checkout),
                                                       c10_functions, complex_helper(checkout, c10_functions))
            if derived.statements is not None:
                complex_body = translate_body.rename(derived.statements, complex_lambda.params,
                                                     params)[len("return "):-1]
    out_bool = spec.returns_bool
    complex_out = "bool" if out_bool else "T"
    # A binary bool op reading its arguments as truth values only: one template for every input
    # dtype, complex included (a --complex-body still gets its own overload); its registrations
    # are porter.port.edits.metal.add_bool_registration's
    # A unary bool op of the same kind (logical_not's `!a`, cast into the output's dtype, which
    # the registration makes bool) likewise
    generic = (_truth_body(statements_int, params, c10_functions)
               if out_bool and spec.kind != UNARY else
               _truth_body(translate_body.strip_output_cast(statements_int), params, c10_functions)
               if out_bool and translate_body.bool_valued(spec.scalar_lambda) else None)
    if generic is not None:
        own_complex = f"return {complex_body.strip().rstrip(';')};" if complex_body else None
        template = "unary_functor.metal.j2" if spec.kind == UNARY else "binary_functor.metal.j2"
        text = render(template, op=spec.kernel, params=params, one_body=generic,
                      float_body=None, int_body=None, float_out="bool", int_out="bool",
                      complex_body=own_complex, complex_out="bool")
        return Functor(text, origin, detail, complex=True)
    metal_types = {METAL[d] for d in spec.dtypes if d in METAL}
    has_float = bool(metal_types & set(METAL_FLOATING)) or not metal_types
    has_int = bool(metal_types - set(METAL_FLOATING) - {"float2"})
    float_out = "bool" if out_bool else "T"
    int_out = "bool" if out_bool else ("float" if spec.promotes_int_to_float else "T")
    typed = {p: "T" for p in params}
    if not has_float:
        float_body = None
    elif float_in_t is not None and translate_body.exact_in_input_type(float_in_t):
        # comparisons and selections only: exact in T, no detour through float (heaviside)
        float_body = translate_body.wrap_returns(float_in_t, float_out, typed)
    else:
        float_body = translate_body.wrap_returns(translate_body.as_float(statements_float, params),
                                                 float_out)
    if not has_int:
        int_body = None
    elif spec.promotes_int_to_float and float_body:
        # Integers compute in float: reuse the floating overload rather than repeat the body.
        args = ", ".join(f"static_cast<float>({p})" for p in params)
        int_body = f"return operator()({args});"
    elif spec.promotes_int_to_float:
        int_body = translate_body.wrap_returns(translate_body.as_float(statements_float, params), "float")
    else:
        int_body = translate_body.wrap_returns(statements_int, int_out, typed)
    complex_statements = None
    if complex_body:
        # a value that already is a T (`x`, `T(re, im)`) is returned as it is; a bool op's
        # complex overload returns bool
        complex_statements = translate_body.wrap_returns(
            f"return {complex_body.strip().rstrip(';')};", complex_out, typed).replace(
            "return static_cast<T>(", "return T(")
    one_body = None
    if float_body and float_body == int_body and float_out == int_out and not complex_statements:
        one_body, float_body, int_body = float_body, None, None     # one template for every T
    template = "unary_functor.metal.j2" if spec.kind == UNARY else "binary_functor.metal.j2"
    text = render(template, op=spec.kernel, params=params, float_body=float_body,
                  int_body=int_body, float_out=float_out, int_out=int_out,
                  complex_body=complex_statements, complex_out=complex_out, one_body=one_body)
    return Functor(text, origin, detail, complex=complex_statements is not None)


def complex_source(lam):
    """The CPU lambda that computes complex values, if any: the kernel's complex case, else
    its lambda where the dispatch around it takes complex dtypes."""
    if lam is None:
        return None
    own = getattr(lam, "complex_case", None)
    if own is not None:
        return own
    return lam if getattr(lam, "covers_complex", False) else None


def complex_only(spec: OpSpec) -> bool:
    """A port whose stub only complex inputs reach (sgn_stub: sgn_out runs sign_stub for the
    others): its functor is a complex overload alone, whose body is --complex-body's."""
    return bool(spec.dtypes) and all(d.startswith("complex") for d in spec.dtypes)


def _complex_only(spec: OpSpec, params, complex_body: str | None, c10_functions) -> Functor:
    """The functor of a port whose stub only complex inputs reach (sgn_stub: sgn_out runs
    sign_stub for the others): its complex overload alone, from --complex-body or the CPU's
    complex case."""
    origin, detail = FROM_BODY, (complex_body or "").strip()
    if complex_body is None:
        lam = spec.scalar_lambda
        case = lam and (lam.complex_case or (lam if lam.dispatch == "complex" else None))
        checkout = getattr(c10_functions, "checkout", None)
        # a skeleton registered for float2/half2, whose static_assert fails the build on
        # purpose, as a real-dtype skeleton's registrations do
        if case is None or checkout is None:
            return _skeleton(spec, params, f"no complex case in the CPU kernel of {spec.stub.name}")._replace(complex=True)
        from porter.source.c10_metal import complex_functions
        derived = translate_body.translate_complex(case, lambda: complex_functions(checkout),
                                                   c10_functions, complex_helper(checkout, c10_functions))
        if derived.statements is None:
            return _skeleton(spec, params, f"{derived.reason} (CPU lambda at {case.path}:{case.line})")._replace(complex=True)
        complex_body = translate_body.rename(derived.statements, case.params, params)[len("return "):-1]
        origin, detail = FROM_CPU, f"{case.path}:{case.line}"
    statements = translate_body.wrap_returns(f"return {complex_body.strip().rstrip(';')};", "T",
                                             {p: "T" for p in params}).replace("return static_cast<T>(", "return T(")
    template = "unary_functor.metal.j2" if spec.kind == UNARY else "binary_functor.metal.j2"
    text = render(template, op=spec.kernel, params=params, float_body=None, int_body=None,
                  float_out="T", int_out="T", complex_body=statements, complex_out="T", one_body=None)
    return Functor(text, origin, detail, complex=True)


def complex_helper(checkout, c10_functions):
    """A complex case's CPU helper as a Metal expression (porter.port.complex_cpu_helpers)."""
    from porter.port import complex_cpu_helpers
    return lambda name: complex_cpu_helpers.expression(checkout, name, set(c10_functions()))


def _truth_body(statements: str, params, c10_functions) -> str | None:
    """The body of a bool functor as one template over every dtype (porter.port.body.truthiness),
    where the checkout's c10/metal headers define `cast_to`."""
    generic = translate_body.truthiness(statements, params)
    if generic is None or "cast_to" not in c10_functions():
        return None
    return generic


def functor_params(spec: OpSpec) -> tuple[str, ...]:
    """The functor's argument names, as `--body` writes them: a backward op's schema names
    (`grad_output`, `output`), else `x`, or `a` and `b`."""
    tensors = spec.arg_names or (("x",) if spec.kind == UNARY else ("a", "b"))
    return tuple(tensors) + tuple(a.name for a in spec.scalars)     # scalars by their schema names


def _check_expression(option: str, expression: str | None, spec: OpSpec, params, examples) -> None:
    problem = expression is not None and translate_body.expression_problem(expression, params)
    if problem:
        raise PorterError(f"{option} {expression.strip()!r} for {spec.op} {problem}",
                          hint=f"pass one Metal expression in {' and '.join(params)}, "
                               f"e.g. {option} '{examples[len(params)]}'")


def _skeleton(spec: OpSpec, params: tuple[str, ...], reason: str) -> Functor:
    signature = ", ".join(f"const T {p}" for p in params)
    if spec.scalars:
        from porter.port import scalars as scalar_args
        alpha = (f"const {scalar_args.struct_name(spec.kernel)}<float> params"
                 if scalar_args.uses_params_struct(spec.scalars) else f"const T {spec.scalars[0].name}")
        signature += ", " + alpha
    out = "bool" if spec.returns_bool else "T"
    text = render("skeleton_functor.metal.j2", op=spec.kernel, reason=reason,
                  signature=signature, out=out)
    return Functor(text, SKELETON, reason)


def _cpu_lambda(spec: OpSpec, params: tuple[str, ...]):
    """The CPU kernel's lambda a functor is translated from, or (None, the skeleton saying why
    there is none): no lambda found, or one taking another number of tensor arguments."""
    lam = spec.scalar_lambda
    if lam is None:
        return None, _skeleton(spec, params, f"no CPU kernel lambda found for {spec.stub.name}")
    if len(lam.params) != len(params):
        return None, _skeleton(spec, params, f"the CPU lambda at {lam.path}:{lam.line} takes "
                                             f"{len(lam.params)} arguments")
    return lam, None


def _build_alpha(spec: OpSpec, body: str | None, c10_functions, dtypes: frozenset[str]) -> Functor:
    """The functor of an op with scalar parameters (`spec.scalars`): `--body` names them as the
    schema does; a CPU lambda's captured scalars keep their names, so it translates the same way."""
    # a backward op's tensors keep their schema names (grad_output, self), as upstream's do
    tensors = spec.arg_names or (("x",) if spec.kind == UNARY else ("a", "b"))
    names = tuple(a.name for a in spec.scalars)
    clash = set(names) & set(tensors)
    if clash:
        raise PorterError(f"{spec.op}'s scalar argument {sorted(clash)[0]} has a tensor's name in "
                          "porter's functors", hint="port this op by hand")
    grads = [t for t in tensors if t.startswith("grad")]
    if grads and len(tensors) > 1:     # a backward op: the gradient passes where the input allows
        other = next(t for t in tensors if t not in grads)
        example = {len(tensors + names): f"{other} > {names[0]} ? {grads[0]} : 0"}
    else:
        example = {len(tensors + names): f"{tensors[0]} > {names[0]} ? {tensors[0]} : {names[0]}"}
    _check_expression("--body", body, spec, tensors + names, example)
    if body is not None:
        statements = int_statements = f"return {body.strip().rstrip(';')};"
        origin, detail = FROM_BODY, body.strip()
    else:
        lam, skeleton = _cpu_lambda(spec, tensors)
        if skeleton:
            return skeleton
        if lam.alternatives and getattr(lam, "choice", None) is None:
            return _skeleton(spec, tensors, f"the CPU kernel at {lam.path}:{lam.line} chooses between "
                                            f"{lam.alternatives + 1} lambdas by its scalar arguments")
        translated = translate_body.translate_lambda(lam, names, "float", c10_functions)
        if translated.statements is None:
            return _skeleton(spec, tensors, f"{translated.reason} (CPU lambda at {lam.path}:{lam.line})")
        # the functor names its tensor arguments as every functor of the file does (x, or a
        # and b) unless the lambda's body already uses those names for something else
        statements = translate_body.rename(translated.statements, tuple(lam.params), tensors)
        if statements == translated.statements and tuple(lam.params) != tensors:
            tensors = lam.params
        # the integer case's own lambda, where the CPU has one (threshold's `x <= threshold`,
        # beside its reduced-float `float(x) <= threshold`)
        int_statements = statements
        if lam.integral is not None:
            as_int = translate_body.translate_lambda(lam.integral, names, "T", c10_functions)
            if as_int.statements is not None:
                int_statements = translate_body.rename(as_int.statements, tuple(lam.integral.params),
                                                       tensors)
        origin, detail = FROM_CPU, f"{lam.path}:{lam.line}"
    from porter.port import scalars as scalar_args
    params_struct = scalar_args.uses_params_struct(spec.scalars)
    metal_types = {METAL[d] for d in dtypes if d in METAL}
    has_int = bool(metal_types - set(METAL_FLOATING) - {"float2"})
    # Floating inputs compute in float: tensor values and a lone alpha (typed as the input) are
    # read as float; a params struct already holds floats. Integers stay in their own type
    # (int64 values beyond 2^24 survive), with the scalars converted as the CPU's to<scalar_t>().
    as_float = tensors if params_struct else tuple(tensors) + names
    float_statements = re.sub(r"\bfloat\(float\(([\w.]+)\)\)", r"float(\1)", translate_body.as_float(
        statements, as_float, floats=names if params_struct else ()))
    out_float = "bool" if spec.returns_bool else "T"
    struct = f"{scalar_args.struct_name(spec.kernel)}<float>"
    overloads = [{"trait": "is_scalar_floating_point_v", "out": out_float,
                  "alpha_type": struct if params_struct else "T",
                  "unpack": [f"const float {n} = params.{n};" for n in names] if params_struct else [],
                  "body": translate_body.wrap_returns(float_statements, out_float)}]
    if has_int:
        if spec.promotes_int_to_float:
            args = ", ".join([f"static_cast<float>({p})" for p in tensors] + [
                "params" if params_struct else names[0]])
            overloads.append({"trait": "is_scalar_integral_v", "out": "float",
                              "alpha_type": struct if params_struct else "float", "unpack": [],
                              "body": f"return operator()({args});"})
        else:
            out_int = "bool" if spec.returns_bool else "T"
            # integers take the struct at long (porter.port.scalars.integral_params)
            struct_int = struct.replace("<float>", "<long>") \
                if scalar_args.integral_params(spec.scalars) else struct
            overloads.append({"trait": "is_scalar_integral_v", "out": out_int,
                              "alpha_type": struct_int if params_struct else "T",
                              "unpack": [f"const T {n} = static_cast<T>(params.{n});" for n in names]
                              if params_struct else [],
                              "body": translate_body.wrap_returns(int_statements, out_int)})
    text = render("alpha_functor.metal.j2", op=spec.kernel, params=tensors, overloads=overloads,
                  alpha_name="params" if params_struct else names[0])
    return Functor(text, origin, detail)
