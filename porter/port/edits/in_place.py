"""Port an op in place: its own structured MPS impl stays, its MPSGraph body becomes a Metal call.

`TORCH_IMPL_FUNC(sigmoid_backward_out_mps)(...) { <MPSGraph> }` becomes
`{ if (this->numel() == 0) return; lib.exec_binary_kernel(*this, "sigmoid_backward"); }`: a
structured impl is the TensorIterator it computes (`structured_inherits: TensorIteratorBase`),
so the kernel runs on `*this`, as upstream's own Activation.mm ports do. The signature, the
yaml row and the `<op>_native.h` include stay (the impl is still the op's MPS kernel); the
`static` helpers only the old body used go, repeatedly, as a migration deletes them; the file
gets the kernel library (`lib`) if it has none.
"""

from __future__ import annotations

import re

from porter.port.edits.mpsgraph import Removed, orphaned_statics, cut
from porter.port.templates import render
from porter.source.cpp_scan import matching_close
from porter.source.mpsgraph_scan import Definition, source_of

LIB_RE = re.compile(r"\blib\s*=\s*[\w:]*MetalShaderLibrary::getBundledLibrary\(\)|_metallib\.h>")
NAMESPACE_RE = re.compile(r"^namespace at::native \{[^\n]*\n|^namespace native \{[^\n]*\n", re.M)


def body_span(text: str, d: Definition) -> tuple[int, int]:
    """[start, end) of the impl's body, between its braces."""
    mask = source_of(text).mask
    name_open = mask.index("(", d.start)
    params_open = mask.index("(", matching_close(mask, name_open) + 1)
    brace = mask.index("{", matching_close(mask, params_open) + 1)
    return brace + 1, d.end - 1


def replace_body(text: str, d: Definition, kernel: str, kind: str) -> tuple[str, list[Removed]]:
    """`text` with `d`'s body calling Metal kernel `kernel` (kind unary | binary), without the
    static helpers only the old body used."""
    start, end = body_span(text, d)
    source = source_of(text)
    helpers = orphaned_statics(text, source, [(start, end)])
    body = "\n" + render("in_place_impl_body.mm.j2", kind=kind, kernel=kernel).lstrip("\n")
    new = cut(text, [(start, end)] + [span for span, _ in helpers], {start: body})
    return new, [Removed(s.name, "static helper", s.line) for _, s in helpers]


def replace_body_text(text: str, d: Definition, body: str) -> tuple[str, list[Removed]]:
    """`text` with `d`'s body replaced by the statements `body` (indented, without braces),
    without the static helpers only the old body used (gelu's `normcdf` once both gelu impls
    call their stub)."""
    start, end = body_span(text, d)
    source = source_of(text)
    helpers = orphaned_statics(text, source, [(start, end)])
    new = cut(text, [(start, end)] + [span for span, _ in helpers], {start: "\n" + body})
    return new, [Removed(s.name, "static helper", s.line) for _, s in helpers]


def has_library(text: str) -> bool:
    return bool(LIB_RE.search(source_of(text).mask))


def add_library(text: str, metal_stem: str) -> str:
    """The bundled kernel library (`lib`) at the top of the file's `at::native` namespace."""
    m = NAMESPACE_RE.search(source_of(text).mask)
    if m is None:
        raise ValueError("no `namespace at::native {` line to declare the kernel library after")
    block = render("metal_library.mm.j2", metal_stem=metal_stem)
    return text[:m.end()] + "\n" + block + text[m.end():]
