"""Under `porter test --watch`, a large kernel call on integer inputs runs each distinct tuple of
input elements (twice: below), and its answer is spread back over the elements that repeat it.

Why: upstream's reference inputs of an integer or bool dtype are built from a few values. A
binary op's three large calls per dtype hold 2.2 M elements and at most 361 distinct (a, b)
pairs (docs/measurements.md), and every `--watch` round ran all of them, on two cores shared
with the build and the comparisons.

Why it is the same answer: a registration's kernel computes each output element from that
element's inputs and the call's scalar (porter/emulate/include/porter/prelude.h's `elem`);
Metal gives a functor no state that outlives its thread (mutable program-scope storage is an
error there, and porter's front end refuses it). So equal input tuples give equal answers, and
what the worker reports of a call (an undefined reading reached, a read past an array) is
reached by the distinct tuples as it was by all of them. A local read before it is written is
the exception: it reads what the element run before left (the -O0 build keeps locals in one
frame, which the worker fills twice, porter/emulate/worker.py). So the distinct tuples run in
the order of their first occurrence, where the first element to reach a slot unwritten is the
whole call's, and then again in reverse order, after other neighbours, as the whole call's run
on zeros (every k-th element) runs them: a tuple whose two answers differ read what another
left, and the call is not proven (numpy_run, READ_BEFORE_WRITTEN). (Run once, in order, such a
read went unseen where the whole call's run on zeros found it: an earlier try, in
docs/measurements.md, and tests/emulate/test_repeated_elements.py.)

When: only inside `planning()` (`--watch`), only on arrays that cannot change while the plan
is kept (read-only: the rows refcache.held_rows keeps), only for dense calls of at least
MIN_ELEMENTS elements whose inputs are integers or bool, and only where the distinct tuples
are at most a quarter of the elements. A plan lives as long as its arrays do.
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass

import numpy as np

MIN_ELEMENTS = 1 << 16
# the worker's bit for a local read before it is written (porter/emulate/worker.py's
# _UNINITIALIZED, porter.emulate.emulator_device's): set where a tuple's two answers differ
READ_BEFORE_WRITTEN = 32768
# the dtypes whose large reference tensors repeat a few values; a float's are random
_INTEGRAL = frozenset({"bool", "uint8", "int8", "int16", "int32", "int64"})
# element counts up to this are factorized by a table, not by sorting
_TABLE = 1 << 20

# (id of each input array) -> ([weak reference to each], Plan or None); None outside planning()
_PLANS: "dict[tuple[int, ...], tuple[list, Plan | None]] | None" = None


@dataclass(frozen=True)
class Plan:
    picks: np.ndarray      # the flat index of each distinct tuple's first occurrence, ascending
    inverse: np.ndarray    # per element (flat, C order), its tuple's position in `picks`
    shape: tuple


@contextlib.contextmanager
def planning():
    """While it runs, `plan_for` keeps a plan per set of held input arrays (porter test
    --watch: each round runs the samples the last one ran)."""
    global _PLANS
    if _PLANS is not None:               # already planning: the outer one ends it
        yield
        return
    _PLANS = {}
    try:
        yield
    finally:
        _PLANS = None


def plan_for(dtypes: list[str], arrays: list[np.ndarray]) -> Plan | None:
    """The plan for a call on `arrays` (one per tensor input, of the torch dtypes `dtypes`, each
    C-contiguous in the call's shape), or None where the call runs whole."""
    plans = _PLANS
    if plans is None or not arrays or any(d not in _INTEGRAL for d in dtypes):
        return None
    shape = arrays[0].shape
    if any(a.shape != shape or a.flags.writeable or not a.flags.c_contiguous for a in arrays):
        return None
    if int(np.prod(shape, dtype=np.int64)) < MIN_ELEMENTS:
        return None
    key = tuple(id(a) for a in arrays)
    found = plans.get(key)
    if found is not None and all(ref() is a for ref, a in zip(found[0], arrays)):
        return found[1]
    plan = _planned(arrays, shape)

    def forget(_, key=key):
        current = _PLANS
        if current is not None:
            current.pop(key, None)
    plans[key] = ([weakref.ref(a, forget) for a in arrays], plan)
    return plan


def _planned(arrays: list[np.ndarray], shape: tuple) -> Plan | None:
    n = arrays[0].size
    codes, count = None, 1
    for a in arrays:
        factor = _factorized(a.reshape(-1), n // 4)
        if factor is None:
            return None
        inverse, k = factor
        if count * k >= 1 << 62:
            return None
        codes = inverse if codes is None else codes * k + inverse
        count *= k
    picks, inverse = _first_occurrences(codes, count)
    if len(picks) > n // 4:
        return None
    # numpy indexes by intp: an int32 inverse is converted on every spread (twice the time)
    return Plan(picks, inverse.astype(np.intp, copy=False), tuple(shape))


def _factorized(flat: np.ndarray, most: int) -> tuple[np.ndarray, int] | None:
    """(per element, the index of its value among the distinct values; how many there are),
    or None where there are more than `most`. Values are compared by their bytes."""
    bits = flat.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[flat.itemsize])
    if flat.itemsize <= 2:
        present = np.zeros(1 << (8 * flat.itemsize), dtype=bool)
        present[bits] = True
        index = np.cumsum(present, dtype=np.int64) - 1
        k = int(index[-1]) + 1
        return (index[bits], k) if k <= most else None
    # a few values: found among a spread of the elements, then every element looked up there
    values = np.unique(bits[::max(1, bits.size // 4096)])
    at = np.searchsorted(values, bits)
    np.minimum(at, len(values) - 1, out=at)
    if not np.array_equal(values[at], bits):
        values = np.unique(bits)
        if len(values) > most:
            return None
        at = np.searchsorted(values, bits)
    return at.astype(np.int64, copy=False), len(values)


def _first_occurrences(codes: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(the flat index of each distinct code's first occurrence, ascending; per element, its
    code's position there)."""
    n = codes.size
    if count > _TABLE:
        _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return first[order], rank[inverse.reshape(-1)]
    first = np.full(count, n, dtype=np.int64)
    wanted = int(np.count_nonzero(np.bincount(codes, minlength=count)))
    found, start, step = 0, 0, 4096
    while found < wanted and start < n:    # the codes met first lie early: growing chunks
        chunk = codes[start:start + step]
        seen, at = np.unique(chunk, return_index=True)
        new = first[seen] == n
        first[seen[new]] = at[new] + start
        found += int(np.count_nonzero(new))
        start, step = start + step, step * 2
    present = np.flatnonzero(first < n)
    ordered = present[np.argsort(first[present], kind="stable")]
    rank = np.empty(count, dtype=np.int64)
    rank[ordered] = np.arange(len(ordered))
    return first[ordered], rank[codes]


def twice(firsts: np.ndarray) -> np.ndarray:
    """The distinct tuples' elements of one input as the call runs them: in the order met, then
    in reverse, so that each runs after two different neighbours."""
    return np.concatenate([firsts, firsts[::-1]])


def halves(answers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the answers of the run in the order met, those of the run in reverse, put back in that
    order) of a call on `twice`'s elements."""
    count = answers.size // 2
    return answers[:count], answers[count:][::-1]


def spread(plan: Plan, answers: np.ndarray) -> np.ndarray:
    """The whole call's answers from the distinct tuples' `answers` (flat, in `picks`' order)."""
    return answers[plan.inverse].reshape(plan.shape)
