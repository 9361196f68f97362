"""Test support: the fixture checkout and the real-size tree built from the installed torch wheel,
and a fake `torch.mps` backed by the emulator (`fake_mps`).

May import: `porter.source`, `porter.dispatch`, `porter.emulate`, `porter.harness`,
`porter.errors`, `porter.exit_codes`. Nothing in porter imports it but the tests.
"""

from __future__ import annotations

__all__ = ["build_real_tree", "fixture_root"]


def __getattr__(name: str):
    # Lazy, so that `python -m porter.testing.trees` does not import trees twice.
    if name in __all__:
        from porter.testing import trees

        return getattr(trees, name)
    raise AttributeError(name)
