"""Which function each MPS stub is registered with, read from clang's AST of a host file, and
whatever else in the checkout's code could set a stub's MPS function.

porter.emulate.hostmap reads `REGISTER_DISPATCH(stub, &fn)` lines with a pattern; what a Mac
runs is what the compiled code registers. A `RegisterMPSDispatch` specialization whose
constructor registers another function, a hand-written `RegisterMPSDispatch` variable, or a
`set_mps_dispatch_ptr` call left the line's function tested while another ran (review 26's M3).
So registrations are modelled positively, on the parse host_compile runs anyway: a
registration is a namespace-scope variable of DispatchStub.h's `RegisterMPSDispatch<...>` type
(what `REGISTER_DISPATCH` expands to in a `.mm` file) constructed from a stub and a function
named plainly (`fn` or `&fn`); the template itself, and the stub's `set_mps_dispatch_ptr`, must
be DispatchStub.h's as upstream writes them. Anything else that names them is "unmodelled",
and the op's verdict "not proven".

An op's MPS path is also whatever the dispatcher registers for it: its yaml row's generated
kernel, or a hand-written `TORCH_LIBRARY_IMPL(aten, MPS, m) { m.impl("heaviside", ...); }`, which
replaces it (review 27's H07: a new `.mm` registering zeros for heaviside left its port green).
So every `torch::Library::impl` call of the code porter parses is read too, with its dispatch
key (from the function `TORCH_LIBRARY_IMPL` defines) and the operator it names.
"""

from __future__ import annotations

import re
from typing import Callable, NamedTuple

REGISTRAR = "RegisterMPSDispatch"
SETTERS = ("set_mps_dispatch_ptr", "mps_dispatch_ptr")
DISPATCH_STUB_H = "aten/src/ATen/native/DispatchStub.h"

# DispatchStub.h's definitions as upstream writes them (token by token): what a registration
# does is modelled only through these
_MODELLED = {
    "template < typename DispatchStub > struct RegisterMPSDispatch "
    "{ RegisterMPSDispatch ( DispatchStub & stub , typename DispatchStub :: FnPtr value ) "
    "{ stub . set_mps_dispatch_ptr ( value ) ; } }",
    "void set_mps_dispatch_ptr ( FnPtr fn_ptr ) "
    "{ impl . mps_dispatch_ptr = reinterpret_cast < void * > ( fn_ptr ) ; }",
}

_HOW = "docs/testing.md \"What the host may do\""


class Read(NamedTuple):
    registrations: list[list]   # [rel, line, stub, function] of each, in source order
    unmodelled: list[list]      # [rel, line, why, "unmodelled"] of what could register otherwise
    # [rel, line, dispatch key or None, operator name or None] of each `torch::Library::impl`
    # call (None: not read, a call outside a TORCH_LIBRARY_IMPL block or a computed name)
    impls: list[list]


def read(unit, where: Callable[[str], str | None], main: str) -> Read:
    """What the checkout's files of the parse register. `where`: a file's path in the checkout
    (None outside it); `main`: the parsed file's path (a stub registration in a header is
    unmodelled: each file including it registers again)."""
    import clang.cindex as ci
    kinds = ci.CursorKind
    registrations: list[list] = []
    unmodelled: list[list] = []
    impls: list[list] = []
    places: dict[str, str | None] = {}      # a file's checkout path, found once per file

    def odd(cursor, rel: str, why: str) -> None:
        unmodelled.append([rel, cursor.location.line, f"{why}; porter models a stub's MPS "
                           f"function only through REGISTER_DISPATCH ({_HOW})", "unmodelled"])

    def registration(cursor, rel: str) -> None:
        parent = cursor.semantic_parent
        if parent is None or parent.kind not in (kinds.NAMESPACE, kinds.TRANSLATION_UNIT):
            odd(cursor, rel, f"'{cursor.spelling}' is a {REGISTRAR} that is not at namespace "
                "scope, so it registers only when its scope runs")
            return
        if cursor.location.file is None or cursor.location.file.name != main:
            odd(cursor, rel, f"'{cursor.spelling}' registers a stub in a header, once for each "
                "file that includes it")
            return
        construct = next((c for c in cursor.get_children() if c.kind == kinds.CALL_EXPR), None)
        arguments = list(construct.get_arguments()) if construct is not None else []
        stub = _named(arguments[0], (kinds.VAR_DECL,)) if len(arguments) == 2 else None
        function = _named(arguments[1], (kinds.FUNCTION_DECL,)) if len(arguments) == 2 else None
        if stub is None or function is None:
            odd(cursor, rel, f"'{cursor.spelling}' registers something other than a stub and a "
                "function named plainly (`REGISTER_DISPATCH(stub, &fn)`)")
            return
        registrations.append([rel, cursor.location.line, stub, function])

    def visit(cursor, in_template: bool = False, function: str = "") -> None:
        for child in cursor.get_children():
            name = child.location.file.name if child.location.file is not None else None
            if name is not None and name not in places:
                places[name] = where(name)
            rel = places.get(name) if name is not None else None
            if rel is None:
                continue        # the wheel's headers and clang's: not the checkout's code
            spelled = child.spelling
            if child.kind in (kinds.CLASS_TEMPLATE, kinds.FUNCTION_DECL, kinds.CXX_METHOD) \
                    and spelled in (REGISTRAR, SETTERS[0]) and rel == DISPATCH_STUB_H:
                if " ".join(t.spelling for t in child.get_tokens()) not in _MODELLED:
                    odd(child, rel, f"DispatchStub.h's {spelled} is not upstream's")
                continue
            if child.kind in (kinds.STRUCT_DECL, kinds.CLASS_DECL, kinds.CLASS_TEMPLATE,
                              kinds.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION) and spelled == REGISTRAR:
                odd(child, rel, f"a {REGISTRAR} of the checkout's own (a specialization runs its "
                    "own constructor, not DispatchStub.h's)")
                continue
            if child.kind == kinds.CALL_EXPR and spelled == "def" and _on_library(child):
                # an operator defined (`m.def("heaviside(Tensor self, ...) -> Tensor")`): a
                # second definition of an aten operator fails libtorch's static init on a Mac
                # (review 30's R04); its name, keyed DEFINES
                arguments = list(child.get_arguments())
                schema = _literal(arguments[0]) if arguments else None
                impls.append([rel, child.location.line, DEFINES,
                              schema.split("(")[0].strip() if schema else None])
                continue
            if child.kind == kinds.CALL_EXPR and spelled == "impl" and _on_library(child):
                arguments = list(child.get_arguments())
                if name != main:
                    odd(child, rel, "an operator registered in a header, once for each file that "
                        "includes it")
                else:
                    # `torch::dispatch(DispatchKey::X, fn)` names its own key, which the block's
                    # must match or libtorch's static init throws (review 29's R01): not read,
                    # so the key is one porter cannot read
                    explicit = any(c.kind == kinds.CALL_EXPR and c.spelling == "dispatch"
                                   for a in arguments[1:] for c in a.walk_preorder())
                    impls.append([rel, child.location.line,
                                  None if explicit else _dispatch_key(function),
                                  _literal(arguments[0]) if arguments else None])
            if child.kind == kinds.CALL_EXPR and spelled.startswith("register") and \
                    _on_class(child, "Dispatcher"):
                # the dispatcher's own registration calls (`Dispatcher::singleton()
                # .registerImpl(...)`): a kernel registered by hand (review 29's R02)
                odd(child, rel, f"`Dispatcher::{spelled}` registers with the dispatcher by hand")
                continue
            if child.kind == kinds.CALL_EXPR and _on_class(child, "RegisterOperators"):
                # the legacy API (`c10::RegisterOperators().op(...)`): an operator's kernel
                # registered by hand, which porter does not read (review 28's R01)
                odd(child, rel, "`RegisterOperators` registers an operator's kernel with the "
                    "dispatcher by hand")
                continue
            if child.kind in (kinds.MEMBER_REF_EXPR, kinds.DECL_REF_EXPR, kinds.CALL_EXPR) \
                    and spelled in SETTERS:
                odd(child, rel, f"`{spelled}` sets a stub's MPS function directly")
                continue
            if child.kind == kinds.VAR_DECL and REGISTRAR in child.type.get_canonical().spelling \
                    and not in_template:
                registration(child, rel)
                continue
            visit(child, in_template or child.kind in (kinds.CLASS_TEMPLATE, kinds.FUNCTION_TEMPLATE),
                  spelled if child.kind == kinds.FUNCTION_DECL else function)

    visit(unit.cursor)
    return Read(registrations, unmodelled, impls)


DEFINES = "def"        # an impls row's key for `m.def(...)`, an operator defined, not a kernel


_LIBRARY_INIT = re.compile(r"^TORCH_LIBRARY_IMPL_init_\w*?_([A-Za-z0-9]+)_\d+$")


def _dispatch_key(function: str) -> str | None:
    """The dispatch key of the block `TORCH_LIBRARY_IMPL(ns, KEY, m)` defines as the function
    `TORCH_LIBRARY_IMPL_init_<ns>_<KEY>_<uid>` (a key has no underscore); None elsewhere."""
    m = _LIBRARY_INIT.match(function)
    return m.group(1) if m else None


def _on_library(call) -> bool:
    return _on_class(call, "Library")


def _on_class(call, name: str) -> bool:
    """Whether `call` calls a member (a constructor too) of a class named `name`."""
    target = call.referenced
    parent = target.semantic_parent if target is not None else None
    return parent is not None and parent.spelling == name


def _literal(argument) -> str | None:
    """The text of the one string literal `argument` is built from (`"heaviside.out"`,
    `TORCH_SELECTIVE_NAME("aten::x")`), None for anything else."""
    import clang.cindex as ci
    found = [c for c in argument.walk_preorder() if c.kind == ci.CursorKind.STRING_LITERAL]
    if len(found) != 1:
        return None
    text = found[0].spelling
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' and "\\" not in text else None


def _named(argument, kinds: tuple) -> str | None:
    """The declaration `argument` names plainly (`x`, `&x`, through clang's implicit casts),
    if one of `kinds`; None for anything computed."""
    import clang.cindex as ci
    cursor = argument
    for _ in range(4):
        if cursor.kind == ci.CursorKind.DECL_REF_EXPR:
            target = cursor.referenced
            return target.spelling if target is not None and target.kind in kinds else None
        children = list(cursor.get_children())
        tokens = [t.spelling for t in cursor.get_tokens()]
        plain = cursor.kind == ci.CursorKind.UNEXPOSED_EXPR or (
            cursor.kind == ci.CursorKind.UNARY_OPERATOR and tokens[:1] in (["&"], []))
        if len(children) != 1 or not plain:
            return None
        cursor = children[0]
    return None
