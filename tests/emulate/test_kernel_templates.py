"""The emulator stands in for c10/metal/indexing.h's kernel templates with its own loop, as the
installed torch writes them: a checkout whose indexing.h is another is "not proven" (review
21's X01, X02: a swapped operand in binary_dense, the second operand read with the first
one's strides in binary_strided, were green on every dtype)."""

from __future__ import annotations

import pytest

from porter.emulate.kernel_templates import INDEXING, _unlike, unlike_the_model
from porter.emulate.headers import torch_include_dir
from tests.porter_run import porter

GUARDED = """#if !defined(TORCH_STABLE_ONLY) && !defined(TORCH_TARGET_VERSION)
#pragma once
template <typename T, typename F>
kernel void binary_dense(device T* out, constant T* a, constant T* b, uint tid) {
  out[tid] = F()(a[tid], b[tid]);
}
#else
#error "This file should not be included when either TORCH_STABLE_ONLY or TORCH_TARGET_VERSION is defined."
#endif  // !defined(TORCH_STABLE_ONLY) && !defined(TORCH_TARGET_VERSION)
"""
PLAIN = GUARDED.split("\n", 1)[1].rsplit("#else", 1)[0]

# (id, the checkout's text, the first line that differs from GUARDED's, None for the same)
CASES = [
    ("same bytes", GUARDED, None),
    ("no packaging guard, as a checkout has it", PLAIN, None),
    ("a comment added", PLAIN.replace("#pragma once", "#pragma once  // the kernels"), None),
    ("a block comment over lines", PLAIN.replace("template", "/* a\nb */ template", 1), None),
    ("layout only", PLAIN.replace("out[tid] = F()(a[tid], b[tid]);", "out[tid] =\n   F()(a[tid],b[tid]);"),
     None),
    ("operands swapped", PLAIN.replace("F()(a[tid], b[tid])", "F()(b[tid], a[tid])"), 4),
    ("a statement added at the end", PLAIN + "static_assert(true);\n", 6),
    ("the file cut short", PLAIN.rsplit("}", 1)[0], 4),
]


@pytest.mark.parametrize(("text", "line"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_first_differing_line_ignores_comments_layout_and_the_wheels_guard(text, line):
    assert _unlike(text, GUARDED) == line


# review 21's plants, in the installed torch 2.13's text: X02 swaps binary_dense's operands,
# X01 reads binary_strided's second operand with the first one's strides
PLANTS = {
    "binary_dense": ("f(om_t(input[tid]), om_t(other[tid]))", "f(om_t(other[tid]), om_t(input[tid]))"),
    "binary_strided": ("other_offs = offset_from_coord(pos, other_strides",
                       "other_offs = offset_from_coord(pos, input_strides"),
}


@pytest.mark.skipif(torch_include_dir() is None, reason="needs the installed torch's c10/metal")
@pytest.mark.parametrize("kernel", sorted(PLANTS))
@pytest.mark.slow
def test_a_changed_kernel_template_is_not_proven_and_its_revert_green(real_root, kernel):
    path = real_root / INDEXING
    before = path.read_text()
    right, wrong = PLANTS[kernel]
    at = before.index(right, before.index(f"kernel void {kernel}("))
    path.write_text(before[:at] + wrong + before[at + len(right):])
    line = before[:at].count("\n") + 1
    run = ("test", "hypot", "--device", "emulate", "--samples-only", "--dtype", "float32")
    result = porter(*run, root=real_root)
    assert result.code == 1, result.out
    assert f"not proven: {INDEXING}:{line} differs from the installed torch" in result.out, result.out
    path.write_text(before)
    again = porter(*run, root=real_root)
    assert again.code == 0, again.out + again.err


def test_porters_own_ternary_addition_is_modelled_and_a_deleted_header_is_not_found(real_root,
                                                                                    mini_root):
    """review 22's C4: `migrate-from-mpsgraph addcmul` adds the ternary kernels with a scalar
    to indexing.h (porter.port.ternary_alpha), which the prelude models: not a difference.
    B04: a checkout's c10/metal without indexing.h stops a Mac's build; a checkout with no
    c10/metal at all (the miniature) builds against the installed torch's."""
    from porter.port.ternary_alpha import add_macros
    path = real_root / INDEXING
    text = path.read_text()
    path.write_text(add_macros(text))
    assert unlike_the_model(real_root) is None
    path.unlink()
    said = unlike_the_model(real_root)
    assert said is not None and said.startswith(f"'{INDEXING}' file not found"), said
    assert not (mini_root / "c10/metal").exists() and unlike_the_model(mini_root) is None


def test_a_macro_line_wrapped_by_clang_format_is_layout():
    """A long `#define` line wrapped adds a `\\` continuation: no token of the macro changes
    (the addcmul port's ternary macros, clang-formatted: review 22's C4)."""
    one = "#define REG(NAME, T) template [[host_name(#NAME \"_dense_\" #T)]] kernel void k<T>();\n"
    wrapped = "#define REG(NAME, T)                 \\\n  template [[host_name(       \\\n      #NAME \"_dense_\" #T)]] kernel void k<T>();\n"
    assert _unlike(wrapped, one) is None
    assert _unlike(wrapped.replace("_dense_", "_strided_"), one) == 3
