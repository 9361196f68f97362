"""Real upstream Metal bugs, replayed: the kernel before the fix is red under
`porter test OP --reference-inputs --device emulate`, the fixed one green (issue 33).

- #190476 (fixed by #190481): nextafter's functor called ::metal::nextafter for bfloat, which
  Metal has no overload of; the call goes through float's and rounds back, returning its input
  for most inputs. porter's Metal stand-in had a bfloat nextafter, so it was green.
- #186278 (fixed by #186286): gelu's tanh approximation called fast::tanh for half and bfloat;
  Apple's is (exp(2x) - 1) / (exp(2x) + 1), which is inf / inf = NaN once exp overflows.
  porter ran fast::tanh as the precise one, so it was green.

The ops are laid into a real-size tree in upstream's shapes (tests/emulate/replay_ops.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from tests.emulate import replay_ops  # noqa: E402
from tests.porter_run import porter  # noqa: E402


def _reference_rows(out: str) -> str:
    return out[out.index("(reference inputs:"):]


@pytest.mark.slow
def test_nextafter_before_190481_is_red_in_bfloat16(real_root):
    replay_ops.lay_nextafter(real_root, replay_ops.NEXTAFTER_BEFORE)
    res = porter("test", "nextafter", "--device", "emulate", "--reference-inputs", root=real_root)
    assert res.code == 1, res.out + res.err
    rows = _reference_rows(res.out)
    # float32 and float16 have Metal's own overloads: right; bfloat16 steps a float ULP
    assert "FAIL bfloat16" in rows and "FAIL float16" not in rows and "FAIL float32" not in rows
    # nextafter(inf, -inf) is FLT_MAX in float, which rounds back to inf in bfloat
    assert "0x7f7f    0x7f80" in rows


@pytest.mark.slow
def test_nextafter_after_190481_is_green(real_root):
    replay_ops.lay_nextafter(real_root, replay_ops.NEXTAFTER_AFTER)
    res = porter("test", "nextafter", "--device", "emulate", "--reference-inputs", root=real_root)
    assert res.code == 0, res.out + res.err
    # the full verdict: upstream's samples, the reference inputs and the shapes, 3 dtypes each
    assert "summary: 9 pass, 0 fail, 0 xfail, 0 xpass; 0 skip" in res.out
    assert "FAIL" not in _reference_rows(res.out)


@pytest.fixture
def gelu_root(real_root):
    assert porter("migrate-from-mpsgraph", "gelu", root=real_root).code == 0
    return real_root


@pytest.mark.slow
def test_gelu_tanh_before_186286_is_red_in_half_and_bfloat16(gelu_root):
    replay_ops.swap_gelu_tanh(gelu_root, replay_ops.GELU_TANH_BEFORE)
    res = porter("test", "nn.functional.gelu", "--device", "emulate", "--reference-inputs",
                 root=gelu_root)
    assert res.code == 1, res.out + res.err
    rows = _reference_rows(res.out)
    assert "FAIL float16" in rows and "FAIL bfloat16" in rows and "FAIL float32" not in rows
    # 100.5: the argument is ~36,000, exp(2x) is inf, and inf / inf is NaN
    assert "100.5    100.5    nan" in rows


@pytest.mark.slow
def test_gelu_tanh_after_186286_is_green(gelu_root):
    replay_ops.swap_gelu_tanh(gelu_root, replay_ops.GELU_TANH_AFTER)
    res = porter("test", "nn.functional.gelu", "--device", "emulate", "--reference-inputs",
                 root=gelu_root)
    assert res.code == 0, res.out + res.err
    # the full verdict: upstream's samples, the reference inputs and the shapes, 3 dtypes each
    assert "summary: 9 pass, 0 fail, 0 xfail, 0 xpass; 0 skip" in res.out
    assert "FAIL" not in _reference_rows(res.out)
