"""The port of an op of three tensors and one Scalar (`addcmul`, `addcdiv`: `self + value * t1 op
t2`), as upstream wrote it when it moved them off MPSGraph (pytorch#189625):

- the functor computes at opmath (float for half/bfloat16; an integer stays in its opmath type)
  in the order of the CPU lambda, the value folded into tensor1 first, products and quotients
  through `c10::metal::mul`/`div` (which are complex-aware for float2), never an `fma` the CPU
  does not do;
- one `REGISTER_OPMATH_TERNARY_ALPHA_OP(op, T, A, T)` per dtype the MPS test sends (float2 and
  half2 for complex64), A the scalar's type as the host hands it: `at::toOpMathType` of the common
  dtype (float for half/bfloat16, float2 for half2);
- in `mps/kernels/<Stem>.metal` beside the host file `<Stem>.mm` named after the stub's header
  (PointwiseOps.h: PointwiseOps.mm, which held the MPSGraph code), created when missing;
- the host: a function on the stub calling `lib.exec_ternary_kernel(iter, "op", value,
  at::toOpMathType(iter.common_dtype()))`, and the bundled library declared;
- the ternary alpha macro added to `c10/metal/indexing.h` when the checkout's lacks it
  (porter.port.ternary_alpha).

The host library's scalar overload of `exec_ternary_kernel`, where the checkout's lacks it (torch
2.13): declared in `MetalShaderLibrary.h` and defined beside the scalar-free definition
(`OperationUtils.mm` there), both written from the checkout's own (porter.port.edits.library_overload);
where porter cannot (no such definition, a shape it does not know), the port is incomplete and
says what to write by hand.
"""

from __future__ import annotations

import re

from porter.port import completeness, family_host, ternary_alpha
from porter.port.edits import host as host_edit
from porter.port.edits import library_overload as library_edit
from porter.port.edits import in_place as in_place_edit
from porter.source import checkout as co
from porter.source import host_library
from porter.source.dtypes import METAL

INDEXING = f"{co.C10_METAL}/indexing.h"
LIBRARY_HEADER = host_library.LIBRARY_HEADER
PREAMBLE = ("#include <c10/metal/indexing.h>\n#include <c10/metal/utils.h>\n#include <metal_stdlib>\n"
            "using namespace metal;\n")
# registration order (upstream's): floating, integers, complex
ORDER = ("float", "half", "bfloat", "long", "int", "short", "char", "uchar", "float2", "half2")
# the scalar's type as the host hands it: at::toOpMathType of the common dtype
ALPHA_TYPE = {"half": "float", "bfloat": "float", "half2": "float2"}
# the host's type for the scalar, in the same words
OPMATH_CALL = "at::toOpMathType(iter.common_dtype())"
TOKEN_RE = re.compile(r"\s*(?:(\w+)|([-+*/()]))")
CAST_RE = re.compile(r"\b(?:float|double|opmath_t|scalar_t|static_cast<\s*\w+\s*>)\s*\(\s*(\w+)\s*\)")


class Untranslatable(ValueError):
    """A CPU lambda body that is not sums, products and quotients of its operands and scalar."""


def stem(spec) -> str:
    """PointwiseOps for a stub declared in PointwiseOps.h: the host file that held the MPSGraph
    code keeps the op, with a kernel file of its own name."""
    return spec.stub.header.rsplit("/", 1)[-1].removesuffix(".h")


def translate(body: str, operands: tuple[str, str, str], scalars: tuple[str, ...]) -> str:
    """The CPU lambda's return expression (`self_val + scalar_val * t1_val * t2_val`) as a Metal
    expression at opmath, in the same order of operations (left to right, * and / before + and
    -). Casts to float or scalar_t go: the functor computes at opmath already."""
    m = re.fullmatch(r"\s*return\s+(.*?);\s*", body, re.S)
    if not m:
        raise Untranslatable("its body is not one return statement")
    expr = m.group(1)
    while True:
        stripped = CAST_RE.sub(r"\1", expr)
        if stripped == expr:
            break
        expr = stripped
    names = {operands[0]: "op_t(a)", operands[1]: "op_t(b)", operands[2]: "op_t(c)"}
    names.update({s: "static_cast<op_t>(alpha)" for s in scalars})
    tokens = []
    pos = 0
    while pos < len(expr.rstrip()):
        t = TOKEN_RE.match(expr, pos)
        if not t:
            raise Untranslatable(f"`{expr.strip()}` is not a sum, product or quotient of its "
                                 "operands and scalar")
        tokens.append(t.group(1) or t.group(2))
        pos = t.end()
    out, rest = _sum(tokens, names)
    if rest:
        raise Untranslatable(f"`{' '.join(rest)}` is left over")
    return out


def _sum(tokens, names):
    left, tokens = _product(tokens, names)
    while tokens and tokens[0] in "+-":
        op, (right, tokens) = tokens[0], _product(tokens[1:], names)
        left = f"{left} {op} {right}"
    return left, tokens


def _product(tokens, names):
    left, tokens = _atom(tokens, names)
    while tokens and tokens[0] in "*/":
        fn = "mul" if tokens[0] == "*" else "div"
        right, tokens = _atom(tokens[1:], names)
        left = f"c10::metal::{fn}({left}, {right})"
    return left, tokens


def _atom(tokens, names):
    if not tokens:
        raise Untranslatable("it ends mid-expression")
    if tokens[0] == "(":
        inner, rest = _sum(tokens[1:], names)
        if not rest or rest[0] != ")":
            raise Untranslatable("its parentheses do not balance")
        return f"({inner})", rest[1:]
    if tokens[0] in names:
        return names[tokens[0]], tokens[1:]
    raise Untranslatable(f"`{tokens[0]}` is neither an operand nor the op's scalar")


def functor(op: str, expression: str, origin: str) -> str:
    return (f"// {origin}: at opmath, in the CPU's order (no fma: the CPU rounds each step)\n"
            f"struct {op}_functor {{\n"
            "  template <typename T, typename A>\n"
            "  inline T operator()(const T a, const T b, const T c, const A alpha) {\n"
            "    using op_t = c10::metal::opmath_t<T>;\n"
            f"    return static_cast<T>({expression});\n"
            "  }\n"
            "};\n")


def registrations(op: str, dtypes) -> list[str]:
    """One line per Metal type the MPS test's dtypes need (complex64: float2 and half2)."""
    wanted = {METAL[d] for d in dtypes if d in METAL}
    if "complex64" in dtypes:
        wanted |= {"float2", "half2"}
    return [f"{ternary_alpha.MACRO}({op}, {t}, {ALPHA_TYPE.get(t, t)}, {t});"
            for t in ORDER if t in wanted]


def add_functor(text: str, source: str) -> str:
    """After the file's last functor (before its registrations), else after its preamble."""
    ends = [m.end() for m in re.finditer(r"^struct \w+_functor\b.*?^};\n", text, re.M | re.S)]
    if ends:
        return text[:ends[-1]] + "\n" + source + text[ends[-1]:]
    return text.rstrip("\n") + "\n\n" + source


def add_registrations(text: str, lines: list[str]) -> str:
    return text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"


def library_gap(checkout) -> completeness.Gap | None:
    """The host library's scalar overload of exec_ternary_kernel, where the checkout's header
    declares the function without one (torch 2.13's MetalShaderLibrary.h)."""
    if host_library.ternary_takes_scalar(checkout.read, checkout.exists) is not False:
        return None
    return completeness.Gap(
        f"a scalar overload of exec_ternary_kernel ({LIBRARY_HEADER} declares "
        "exec_ternary_kernel(iter, name) only, and the host function calls it with the op's "
        "Scalar)",
        f"its declaration in {LIBRARY_HEADER}, `void exec_ternary_kernel(TensorIteratorBase& iter, "
        "const std::string& name, const c10::Scalar& alpha, c10::ScalarType alpha_type)`, and its "
        "definition in "
        "MetalShaderLibrary.mm, written by hand: exec_ternary_kernel's, with the scalar converted "
        "to alpha_type and bound at buffer 4 after the three operands, where c10/metal/indexing.h's "
        "ternary_alpha kernels read it (the strided ones take sizes and strides from buffer 5)")


def plan_kernel(checkout, spec, body, read, write, plan) -> None:
    """The functor, its registrations and, where the checkout lacks it, the macro."""
    if checkout.exists(spec.metal_path) or spec.metal_path in plan.changes.changes:
        text = read(spec.metal_path)
    else:
        text = PREAMBLE
        plan.notes.append(f"created {spec.metal_path} (the kernels of {stem(spec)}.mm, as upstream "
                          "keeps them): add it to the build's list of Metal sources if your checkout "
                          "lists them by hand")
    if not checkout.exists(INDEXING):
        raise_gap(plan, f"{ternary_alpha.MACRO} (the checkout has no {INDEXING} to define it in)",
                  "a c10/metal/indexing.h that registers ternary kernels with a scalar")
    else:
        header = read(INDEXING)
        if not ternary_alpha.defines_macro(header):
            try:
                write(INDEXING, ternary_alpha.add_macros(header))
            except ValueError as err:
                raise_gap(plan, f"{ternary_alpha.MACRO} ({INDEXING}: {err})",
                          "the macro, written by hand")
            else:
                plan.notes.append(f"{INDEXING}: added {ternary_alpha.MACRO} and its ternary_alpha "
                                  "kernels (torch 2.13's header registers ternary kernels without a "
                                  "scalar only)")
    existed = bool(re.search(rf"^struct {re.escape(spec.kernel)}_functor\b", text, re.M))
    if not existed:
        source = _functor_source(spec, body, plan)
        if source is None:
            return
        text = add_functor(text, source)
    have = {r.in_type for r in _registrations(text) if r.kernel == spec.kernel}
    rows = [line for line in registrations(spec.kernel, spec.dtypes)
            if line.split(",")[1].strip() not in have]
    if rows:
        text = add_registrations(text, rows)
        plan.new_kernels[spec.metal_path] = spec.kernel
        if existed:
            types = ", ".join(line.split(",")[1].strip() for line in rows)
            plan.notes.append(f"{spec.kernel}_functor in {spec.metal_path} lacked registrations for "
                              f"{types}, which {spec.op}'s MPS test needs: registered those too (the "
                              "build before writing checks that the functor takes them)")
    write(spec.metal_path, text)
    gaps, plan.wrong = completeness.check(spec, text, completeness.dtype_plan(spec, True))
    plan.gaps += gaps


def _registrations(text: str):
    from porter.source.metal_scan import MetalFile
    return MetalFile(text).registrations


def _functor_source(spec, body, plan) -> str | None:
    scalar = spec.scalars[0].name
    if body is not None:
        try:
            # sums, products and quotients read as the CPU's: * and / complex-aware for float2
            expression = translate(f"return {body};", ("a", "b", "c"), (scalar,))
        except Untranslatable:
            # anything else is Metal as written, in a, b, c and the scalar at opmath
            expression = body
            for name, to in (("a", "op_t(a)"), ("b", "op_t(b)"), ("c", "op_t(c)"),
                             (scalar, "static_cast<op_t>(alpha)")):
                expression = re.sub(rf"\b{name}\b", lambda _, to=to: to, expression)
        return functor(spec.kernel, expression, "from --body")
    lam = spec.scalar_lambda
    if lam is None or len(lam.params) != 3:
        raise_gap(plan, f"the body of {spec.kernel}_functor (no CPU lambda of three operands "
                        f"found for {spec.stub.name})", f"--body EXPR (in a, b, c, {scalar})")
        return None
    scalars = tuple(lam.locals) or ()
    try:
        expression = translate(lam.body, lam.params, scalars)
    except Untranslatable as err:
        raise_gap(plan, f"the body of {spec.kernel}_functor (the CPU lambda at {lam.path}:{lam.line}: "
                        f"{err})", f"--body EXPR (in a, b, c, {scalar})")
        return None
    return functor(spec.kernel, expression, f"from the CPU lambda at {lam.path}:{lam.line}")


def raise_gap(plan, what: str, flag: str) -> None:
    plan.gaps.append(completeness.Gap(what, flag))


def plan_host(checkout, spec, read, write, plan) -> None:
    """The host function on the stub, in the file that held the MPSGraph code (or a new one)."""
    if spec.registered_in:
        return
    text = family_host.host_text(checkout, spec.host_path, stem(spec), spec.stub.header, plan)
    scalar = spec.scalars[0].name
    function = f"{spec.kernel}_mps_kernel"
    source = (f"static void {function}({spec.stub.iterator_type or 'TensorIteratorBase'}& iter, "
              f"const Scalar& {scalar}) {{\n"
              f"  // the scalar at opmath, as the CPU kernel converts it (float for half/bfloat16)\n"
              f"  lib.exec_ternary_kernel(iter, \"{spec.kernel}\", {scalar}, {OPMATH_CALL});\n"
              "}\n")
    if not in_place_edit.has_library(text):
        text = in_place_edit.add_library(text, stem(spec))
    text = host_edit.add_kernel_function(text, stub=spec.stub.name, function=function,
                                         kernel=spec.kernel, iterator="TensorIteratorBase",
                                         kind="ternary", source=source)
    for header in ("ATen/OpMathType.h", spec.stub.header.split("aten/src/", 1)[-1],
                   "ATen/native/TensorIterator.h"):
        text = host_edit.ensure_include(text, header)
    write(spec.host_path, text)
    plan_library(checkout, read, write, plan)


def plan_library(checkout, read, write, plan) -> None:
    """The host library's scalar overload of exec_ternary_kernel, where the checkout's lacks it:
    declared in MetalShaderLibrary.h and defined beside the scalar-free definition, both written
    from the checkout's own (porter.port.edits.library_overload); a gap where porter cannot."""
    edits, problem = library_edits(checkout, read)
    if problem is not None:
        gap = library_gap(checkout)
        plan.gaps.append(completeness.Gap(f"{gap.what}; porter cannot write it: {problem}", gap.flag))
        return
    for rel, new in edits.items():
        write(rel, new)
    if edits:
        plan.notes.append(f"{', '.join(edits)}: added exec_ternary_kernel's scalar overload (the "
                          "scalar bound at buffer 4, the kernel names ending in its type), written "
                          "from the checkout's scalar-free one")


def library_edits(checkout, read=None) -> tuple[dict[str, str], str | None]:
    """({file: new text}, None): the overload's declaration and definition, none where the library
    has it; ({}, why) where porter cannot write it."""
    read = read or checkout.read
    if host_library.ternary_takes_scalar(checkout.read, checkout.exists) is not False:
        return {}, None
    source = host_library.ternary_definition_file(checkout.read, checkout.glob)
    if source is None:
        return {}, (f"no .mm of {co.NATIVE}/mps defines MetalShaderLibrary::exec_ternary_kernel(iter, "
                    "name), beside which porter writes the overload")
    try:
        return {LIBRARY_HEADER: library_edit.add_declaration(read(LIBRARY_HEADER)),
                source: library_edit.add_definition(read(source))}, None
    except ValueError as err:
        return {}, str(err)


