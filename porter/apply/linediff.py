"""Unified diffs of large files with few edits, in O((N + M) * D) time (Myers' algorithm).

difflib's SequenceMatcher costs about a second on `common_methods_invocations.py`; porter's
edits change a handful of lines, so an edit-distance-bounded diff is the right tool.
"""

from __future__ import annotations


def _edit_script(a: list[str], b: list[str]) -> list[tuple[str, int, int]]:
    """Opcodes ('equal'|'delete'|'insert', i, j) walking a and b from the front."""
    n, m = len(a), len(b)
    maximum = n + m
    v = {1: 0}
    trace = []
    for d in range(maximum + 1):
        trace.append(dict(v))
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[k - 1] < v[k + 1]):
                x = v[k + 1]
            else:
                x = v[k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            v[k] = x
            if x >= n and y >= m:
                return _backtrack(trace, a, b, d, k)
    return []


def _backtrack(trace, a, b, d, k) -> list[tuple[str, int, int]]:
    x, y = len(a), len(b)
    ops = []
    for depth in range(d, 0, -1):
        v = trace[depth]
        if k == -depth or (k != depth and v.get(k - 1, -1) < v.get(k + 1, -1)):
            prev_k = k + 1
        else:
            prev_k = k - 1
        prev_x = v[prev_k]
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y:
            x, y = x - 1, y - 1
            ops.append(("equal", x, y))
        if x == prev_x:
            ops.append(("insert", x, prev_y))
        else:
            ops.append(("delete", prev_x, y))
        x, y, k = prev_x, prev_y, prev_k
    while x > 0 and y > 0:
        x, y = x - 1, y - 1
        ops.append(("equal", x, y))
    ops.reverse()
    return ops


def common_prefix_length(x: str, y: str) -> int:
    """Length of the common prefix, by binary search over slice comparisons (memcmp)."""
    lo, hi = 0, min(len(x), len(y))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if x[lo:mid] == y[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def unified_diff_text(old: str, new: str, fromfile: str, tofile: str, context: int = 3) -> list[str]:
    """Unified diff of two texts; only the lines around the changed region are split."""
    prefix = common_prefix_length(old, new)
    suffix = common_prefix_length(old[prefix:][::-1], new[prefix:][::-1])
    start = old.rfind("\n", 0, prefix) + 1
    # Enough whole lines before and after the change to give every hunk its context.
    for _ in range(context):
        start = old.rfind("\n", 0, max(0, start - 1)) + 1
    skipped = old.count("\n", 0, start)
    end_old, end_new = len(old) - suffix, len(new) - suffix
    for _ in range(context + 1):
        nxt = old.find("\n", end_old)
        if nxt < 0:
            end_old, end_new = len(old), len(new)
            break
        end_new += nxt + 1 - end_old
        end_old = nxt + 1
    a = old[start:end_old].splitlines(keepends=True)
    b = new[start:end_new].splitlines(keepends=True)
    return unified_diff(a, b, fromfile, tofile, context, offset=skipped)


def unified_diff(a: list[str], b: list[str], fromfile: str, tofile: str, context: int = 3,
                 offset: int = 0) -> list[str]:
    # Trim the common head and tail first: the edit script then covers only the changed middle.
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    mid = _edit_script(a[head:len(a) - tail], b[head:len(b) - tail])
    ops = [("equal", i, i) for i in range(head)]
    ops += [(op, i + head, j + head) for op, i, j in mid]
    ops += [("equal", len(a) - tail + t, len(b) - tail + t) for t in range(tail)]
    changed = [n for n, (op, _, _) in enumerate(ops) if op != "equal"]
    if not changed:
        return []
    out = [f"--- {fromfile}\n", f"+++ {tofile}\n"]
    groups, start = [], changed[0]
    prev = changed[0]
    for n in changed[1:]:
        if n - prev > 2 * context:
            groups.append((start, prev))
            start = n
        prev = n
    groups.append((start, prev))
    for first, last in groups:
        lo, hi = max(0, first - context), min(len(ops), last + context + 1)
        hunk = ops[lo:hi]
        a_start = next((i for op, i, _ in hunk if op != "insert"), None)
        b_start = next((j for op, _, j in hunk if op != "delete"), None)
        a_len = sum(1 for op, _, _ in hunk if op != "insert")
        b_len = sum(1 for op, _, _ in hunk if op != "delete")
        a_start = (a_start + 1 if a_len else (hunk[0][1])) if a_start is not None else hunk[0][1]
        b_start = (b_start + 1 if b_len else (hunk[0][2])) if b_start is not None else hunk[0][2]
        out.append(f"@@ -{_range(a_start + offset, a_len)} +{_range(b_start + offset, b_len)} @@\n")
        for op, i, j in hunk:
            if op == "equal":
                out.append(" " + a[i])
            elif op == "delete":
                out.append("-" + a[i])
            else:
                out.append("+" + b[j])
    return out


def _range(start: int, length: int) -> str:
    return f"{start}" if length == 1 else f"{start},{length}"
