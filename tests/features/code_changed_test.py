"""porter.source.cpp_scan.code_changed: a change a build sees, as a table of text pairs
(review 25's H9: a comment added to native/Gelu.h made every op's CPU reference "not proven")."""

from __future__ import annotations

import pytest

from porter.source.cpp_scan import code_changed

BASE = "// Gelu helpers\ninline float gelu(float x) {\n  return x * 0.5f;\n}\n"
# (id, the other text, whether the code changed)
CASES = [
    ("a line comment added", "// a note\n" + BASE, False),
    ("a block comment added", BASE.replace("{\n", "{ /* why */\n"), False),
    ("blank lines and indentation", "\n\n" + BASE.replace("  return", "      return"), False),
    ("a constant changed", BASE.replace("0.5f", "0.25f"), True),
    ("code moved into a comment", BASE.replace("return x * 0.5f;", "// return x * 0.5f;"), True),
    ("a string's text", BASE.replace("return", 'const char* s = "a";\n  return'), True),
    ("the file deleted", None, True),
    # the compiler splices the next line into the comment (review 26's C1)
    ("a comment continued by a backslash", BASE.replace("// Gelu helpers", "// Gelu helpers \\"), True),
]


@pytest.mark.parametrize(("other", "changed"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_code_changed(other, changed):
    assert code_changed(BASE, other) is changed
    assert code_changed(other, BASE) is changed
