"""Error text a terminal cannot be tricked by: what the user typed comes back escaped.

A bidi override (U+202E) in a path would show the rest of the line reversed, a zero-width space
(U+200B) would hide why `heaviside` is "not found"; both are Unicode format characters (Cf),
which porter's one-line errors show as escapes, as they do terminal control characters."""

from __future__ import annotations

from porter.errors import PorterError, one_line
from tests.porter_run import porter

BEFORE_AFTER = [
    ("plain", "plain"),
    ("two\nlines\tand a tab", "two lines and a tab"),
    ("bidi \u202eoverride", "bidi \\u202eoverride"),
    ("isolate \u2067x\u2069", "isolate \\u2067x\\u2069"),
    ("zero\u200bwidth\u200djoiner\ufeff", "zero\\u200bwidth\\u200djoiner\\ufeff"),
    ("escape \x1b[31mred", "escape \\x1b[31mred"),
    ("héaviside ｈ 𝔥", "héaviside ｈ 𝔥"),        # letters, however foreign, stay as typed
]


def test_one_line_escapes_control_and_format_characters():
    assert [(text, one_line(text)) for text, _ in BEFORE_AFTER] == BEFORE_AFTER


def test_an_error_naming_a_path_shows_its_bidi_and_zero_width_characters_escaped(tmp_path):
    missing = tmp_path / "no\u202eroot\u200b"
    result = porter("status", "--root", str(missing), "--", "heaviside")
    assert result.code == 2
    assert result.err == f"porter: error: --root {tmp_path}/no\\u202eroot\\u200b: no such directory\n"
    assert str(PorterError("x", path=missing)) == f"{tmp_path}/no\\u202eroot\\u200b: x"


def test_a_dtype_that_names_no_torch_dtype_is_bad_input(mini_root):
    """--dtype float33 ran, matched no dtype and ended "nothing was tested ... port it first"
    (exit 1, as if the op were unported); a misspelt or aliased name is bad input with the
    name torch's tables use."""
    for command in (("test", "add", "--device", "emulate"), ("pr", "add")):
        for given, suggested in (("float33", "float32"), ("half", "float16"), ("long", "int64")):
            result = porter(*command, "--dtype", given, root=mini_root)
            assert result.code == 2, (command, given, result.err)
            assert result.err.strip() == (f"porter: error: --dtype {given}: not a torch dtype name "
                                          f"(did you mean {suggested}?)"), result.err
    result = porter("test", "add", "--device", "emulate", "--dtype", "xyz", root=mini_root)
    assert result.code == 2 and "one of bool, uint8," in result.err
