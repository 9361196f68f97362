"""`porter audit-xfails`: run every op that has an expectation entry, list the stale ones.

The op list (xfail keys of `mps_ops_modifier`'s dicts) comes from a static parse, sorted, so
`--shard K/N` is deterministic and the parent process never imports torch. With `--jobs N`
each of N spawned workers imports torch and the op database once (pool initializer), then
takes keys from the pool's task queue.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from porter.errors import PorterError

_WORKER: dict = {}


@dataclass
class AuditResult:
    results: list = field(default_factory=list)   # OpResult
    orphans: list[str] = field(default_factory=list)   # keys no OpInfo has
    keys: int = 0
    seconds: float = 0.0


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise PorterError(f"--shard {text}: expected K/N, e.g. 1/8") from None
    if not 1 <= k <= n:
        raise PorterError(f"--shard {text}: K must be between 1 and N")
    return k, n


def missing_shards(shards: list[tuple[str, str | None]]) -> list[str]:
    """The K/N shards absent from merged files ((file, its "shard")). A file of an unsharded
    run covers every key. Files of different N, or one shard twice, are bad input: their sum
    is no whole run."""
    if any(shard is None for _, shard in shards):
        return []
    seen: dict[tuple[int, int], str] = {}
    for path, text in shards:
        shard = parse_shard(text)
        if shard in seen:
            raise PorterError(f"shard {text} is merged twice ({seen[shard]} and {path})",
                              hint="pass each shard's --json file once")
        seen[shard] = path
    counts = {n for _, n in seen}
    if len(counts) > 1:
        raise PorterError(f"the merged files are shards of different splits ({', '.join(sorted({t for _, t in shards}))})",
                          hint="merge the shards of one --shard K/N run")
    n = counts.pop()
    return [f"{k}/{n}" for k in range(1, n + 1) if (k, n) not in seen]


def shard_keys(keys: list[str], shard: tuple[int, int] | None) -> list[str]:
    keys = sorted(keys)
    if shard is None:
        return keys
    k, n = shard
    return keys[k - 1::n]


def _init_worker(root: str | None, device: str, threads: int = 0) -> None:
    if threads:
        # N workers x torch's default intra-op threads would oversubscribe the cores
        import torch
        torch.set_num_threads(threads)
    from porter.harness import opinfo_run
    from porter.harness.devices import get_backend
    backend = get_backend(device, root)
    ctx = opinfo_run.make_context(root, backend)
    from porter.harness import opdb
    _WORKER.update(ctx=ctx, by_key=opdb.by_key(ctx.db))


def _run_key(key: str):
    from porter.harness import opinfo_run
    ctx, by_key = _WORKER["ctx"], _WORKER["by_key"]
    infos = by_key.get(key)
    if not infos:
        return key, None
    return key, [opinfo_run.run_opinfo(info, ctx).to_json() for info in infos]


def run(root, device: str, keys: list[str], jobs: int = 1, progress: bool = False) -> AuditResult:
    from porter.harness.verdicts import OpResult
    start = time.perf_counter()
    out = AuditResult(keys=len(keys))
    bar = _Progress(len(keys)) if progress else None
    root_s = str(root) if root is not None else None
    if jobs <= 1 or len(keys) <= 1:
        _init_worker(root_s, device)
        done = (_run_key(k) for k in keys)
        pool = None
    else:
        import multiprocessing
        pool = multiprocessing.get_context("spawn").Pool(
            min(jobs, len(keys)), initializer=_init_worker, initargs=(root_s, device, 1))
        done = pool.imap_unordered(_run_key, keys)
    try:
        for key, results in done:
            if results is None:
                out.orphans.append(key)
            else:
                out.results += [OpResult.from_json(r) for r in results]
            if bar:
                bar.step(key)
    finally:
        if pool is not None:
            pool.close()
            pool.join()
        if bar:
            bar.close()
    out.results.sort(key=lambda r: (r.key, r.op))
    out.orphans.sort()
    out.seconds = round(time.perf_counter() - start, 2)
    return out


def stale_lines(results) -> list[str]:
    from porter.harness.verdicts import XPASS

    lines = []
    for r in results:
        by_source: dict[str, list[str]] = {}
        for d in r.dtypes:
            if d.outcome == XPASS:
                for src in d.expected_by:
                    by_source.setdefault(src, []).append(d.dtype)
        for src, dtypes in by_source.items():
            lines.append(f"{r.op}: {src} xpasses for {', '.join(dtypes)}")
    return lines


class _Progress:
    """A one-line bar on stderr."""

    def __init__(self, total: int):
        self.total, self.done, self.start = total, 0, time.perf_counter()

    def step(self, label: str) -> None:
        self.done += 1
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                         f"{time.perf_counter() - self.start:5.0f}s {label[:30]:<30}")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")
        sys.stderr.flush()
