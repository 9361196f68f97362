"""porter.source.host_names: the kernel name a host call passes, where the compiler knows it.
A before/after table: the argument and the host text around it -> the name, or None (not
proven: hostmap says so)."""

from __future__ import annotations

import pytest

from porter.source.host_names import constant_string


def _call(body: str, arg: str, before: str = "") -> tuple[str, str, int, int]:
    """A host file whose function runs `body` then a call passing `arg`: (arg, text, body
    start, call start)."""
    text = f"{before}static void k(TensorIteratorBase& iter) {{\n{body}  lib.exec_binary_kernel(iter, {arg});\n}}\n"
    return arg, text, text.index("{"), text.index("lib.exec")


CASES = [
    ("a literal", _call("", '"heaviside"'), "heaviside"),
    ("adjacent literals", _call("", '"heavi" "side"'), "heaviside"),
    ("std::string + literal", _call("", 'std::string("heavi") + "side"'), "heaviside"),
    ("literal + std::string", _call("", '"heavi" + std::string("side")'), "heaviside"),
    ("three terms, a + inside a literal", _call("", 'std::string("a+") + "b" + "c"'), "a+bc"),
    ("two bare literals do not add", _call("", '"heavi" + "side"'), None),
    ("a call in a term", _call("", 'std::string(prefix()) + "side"'), None),
    ("constexpr auto", _call('  constexpr auto name = "heaviside";\n', "name"), "heaviside"),
    ("const std::string, braces", _call('  const std::string name{"heavi" "side"};\n', "name"), "heaviside"),
    ("a const array", _call('  static const char name[] = "heaviside";\n', "name"), "heaviside"),
    ("a const pointer to const", _call('  const char* const name = "heaviside";\n', "name"), "heaviside"),
    ("a constant of a concatenation", _call('  constexpr auto n = "x";\n  const std::string name = std::string("heavi") + "side";\n', "name"), "heaviside"),
    # outside the function, which declaration a call names is C++'s name lookup (review 20's
    # K01: a decoy in another namespace was read)
    ("at file scope", _call("", "kName", before='static constexpr char kName[] = "heaviside";\n'), None),
    ("a macro of the same name (review 20's K03)",
     _call('  constexpr auto kname = "heaviside";\n', "kname", before='#define kname "copysign"\n'), None),
    ("the function's own before the file's", _call('  constexpr auto name = "heaviside";\n', "name",
                                                   before='constexpr auto name = "hypot";\n'), "heaviside"),
    ("declared in a block closed before the call", _call('  {\n  constexpr auto name = "heaviside";\n  }\n', "name",
                                                        before='constexpr auto name = "hypot";\n'), None),
    ("a pointer that may point elsewhere", _call('  const char* name = "heaviside";\n', "name"), None),
    ("not const at all", _call('  std::string name = "heaviside";\n', "name"), None),
    ("declared twice in the function", _call('  constexpr auto name = "a";\n  {\n  constexpr auto name = "b";\n  }\n', "name"), None),
    ("declared twice at file scope", _call("", "kName", before='constexpr auto kName = "a";\nconstexpr auto kName2 = "b";\nconstexpr auto kName = "c";\n'), None),
    ("a constant naming a constant", _call('  constexpr auto a = "heaviside";\n  constexpr auto name = a;\n', "name"), None),
    ("a helper's answer", _call("", "kernel_name()"), None),
    ("no declaration", _call("", "name"), None),
]


@pytest.mark.parametrize("found,name", [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_the_name_a_host_call_passes(found, name):
    arg, text, body, call = found
    assert constant_string(arg, text, body, call) == name
