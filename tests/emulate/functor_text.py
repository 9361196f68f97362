"""Editing one functor struct of a kernel file's text, as an author's save does (the tests of
the g++ pieces and of the front end's memo, both keyed per functor)."""

from __future__ import annotations

from porter.emulate import groups


def edit_body(text: str, name: str, old: str, new: str) -> str:
    """`text` with the first `old` inside `name`'s functor struct replaced by `new`."""
    start, end = groups.functor_spans(text)[name]
    lines = text.split("\n")
    body = "\n".join(lines[start:end + 1])
    assert old in body, body
    lines[start:end + 1] = body.replace(old, new, 1).split("\n")
    return "\n".join(lines)


def pieces_of(text: str, root, display: str = "BinaryKernel.metal"):
    """groups.pieces of a kernel file's text, with its expansion as the build reads it."""
    from porter.emulate import frontend, groups
    from porter.emulate.toolchain import PRIMARY_VERSION

    return groups.pieces(text, frontend.expansion(text, display, root, PRIMARY_VERSION))
