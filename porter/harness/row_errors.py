"""A row's error maxima, the table's max_abs and max_rel, as the cached run records them.

Every sample of a row records its (max abs, max rel) error (numpy_tensors.max_errors). Where a
kernel is wrong, each of a binary op's million-element reference inputs took ~7 ms of float64
passes, 36 of them a `--watch` round of heaviside: 0.25 s of the round's main thread, which
compares the samples while the kernel workers run the next (~5 ms each now, in pieces). A large
sample's maxima are computed beside the comparisons, in a thread of its own (numpy releases the
GIL in each pass), and the row's maxima are taken when the row ends, in sample order: the same
figures as computed one after the other (a maximum does not depend on the order, and raise_max
reads a NaN as inf).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

from porter.dispatch.numpy_tensors import max_errors
from porter.harness.verdicts import DtypeResult, raise_max

# elements from which a sample's maxima are computed beside the comparisons: below it, handing
# them to the thread costs more than computing them
BESIDE_ELEMENTS = 1 << 16

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="porter-row-errors")
        return _POOL


class RowErrors:
    """The maxima a row's samples record (`add`), raised into its result when it ends (`done`).
    A row that is given up (its source abandoned) leaves its maxima behind: the next row's
    first `add` drops them."""

    def __init__(self):
        self._res: DtypeResult | None = None
        self._found: list = []          # per sample: (abs, rel), None, or a Future of either

    def add(self, res: DtypeResult, expected, actual) -> None:
        if res is not self._res:
            self._res, self._found = res, []
        if getattr(expected.data, "size", 0) >= BESIDE_ELEMENTS:
            self._found.append(_pool().submit(max_errors, expected, actual))
        else:
            self._found.append(max_errors(expected, actual))

    def done(self, res: DtypeResult) -> None:
        found = self._found if res is self._res else []
        self._res, self._found = None, []
        for one in found:
            errors = one.result() if isinstance(one, Future) else one
            if errors is not None:
                raise_max(res, "max_abs", errors[0])
                raise_max(res, "max_rel", errors[1])
