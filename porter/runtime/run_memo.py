"""Checkout facts read once per run and shared by the code that asks for them.

A run is one porter command, or one `--watch` round: files may change between rounds, not
within one, so the round's end forgets everything held here (porter.harness.watch).
"""

from __future__ import annotations

from typing import Callable, Hashable, TypeVar

T = TypeVar("T")
_HELD: dict[Hashable, object] = {}


def once(key: Hashable, compute: Callable[[], T]) -> T:
    """`compute()`, the first time this run asks for `key`; what it returned, after."""
    if key not in _HELD:
        _HELD[key] = compute()
    return _HELD[key]      # type: ignore[return-value]


def forget() -> None:
    """The run is over: the next one reads the checkout again."""
    _HELD.clear()
