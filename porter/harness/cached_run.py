"""`porter test --device emulate` from the reference cache: no op database, no torch.

`try_run` answers only when every OpInfo and dtype the run needs is cached under this
environment's key (porter.harness.refcache); otherwise it returns None and the session runs
the ordinary way, then records (porter.harness.record). A cached run repeats
`opinfo_run.run_opinfo` step for step, on dtype names:

- the dtypes to test: the OpInfo's (recorded), each run against the kernels the checkout's
  `.metal` registers now (built on every run: the kernel is what the author is editing);
- expectations: `common_mps.py` parsed now, plus the OpInfo's DecorateInfos (recorded);
- tolerances: `test_mps.py`'s rules read and run now, plus the recorded floors;
- each sample runs on the emulator (`EmulateBackend.run_portable`) and is compared with the
  recorded CPU reference by `porter.harness.numpy_compare.compare`, upstream's assertEqual in numpy.

Anything numpy cannot do (`porter.dispatch.arrays.Unsupported`) abandons the cached run for the ordinary one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import SimpleNamespace

from porter.errors import PorterError
from porter.harness import mps_expectations as expmod
from porter.harness import sample_rules
from porter.harness import refcache, tolerances
from porter.dispatch.arrays import PArray, Unsupported, astype
from porter.harness.numpy_compare import compare, max_errors
from porter.harness.opinfo_run import (PASS, SKIP, DtypeResult, OpResult, not_run_verdict, settle,
                                   _dtype_order, _one_line, _raise_max)


class Miss(Exception):
    pass


@dataclass
class Sample:
    input: object
    args: list
    kwargs: dict
    promoted: dict
    out_dtype: str | None            # the meta output dtype (the host's kernel lookup)
    ref: PArray | None
    ref_cast: bool
    ref_error: str | None


@dataclass
class CachedRun:
    results: list[OpResult]
    expectations: expmod.Expectations
    lists: tolerances.LowPrecisionLists
    db: SimpleNamespace                      # source, torch_version, torch_path (for the header)
    from_reference_cache: bool = True
    macos: tuple[int, int] = expmod.NEWEST_MACOS          # the lists applied (macos=None: newest)
    samples: sample_rules.SampleRules = sample_rules.BUILT_IN   # as record.py generated them


def cache_wanted(opts, backend) -> bool:
    """Only emulate runs are cached: a real device's verdict is the device's, every time."""
    return (getattr(backend, "name", "") == "emulate" and hasattr(backend, "run_portable")
            and not getattr(opts, "no_cache", False) and not opts.upstream
            and not getattr(opts, "grad", False)     # backward ops: built from the checkout
            # the cache holds upstream's samples on the newest macOS's lists
            and not getattr(opts, "reference_inputs", False) and not getattr(opts, "macos", None))


def samples_recordable(checkout) -> bool:
    """record.py records the samples upstream's built-in keywords ask for: a checkout whose
    test asks with others (requires_grad=False, conjugated inputs) gets other samples on a
    Mac, so its runs neither read nor write the cache."""
    rules = sample_rules.load(checkout)
    built_in = sample_rules.BUILT_IN
    return (rules.requires_grad, rules.conjugated) == (built_in.requires_grad, built_in.conjugated)


def environment(root, backend) -> str | None:
    return refcache.environment(root, getattr(backend, "device_type", backend.name))


def try_run(opts, checkout, backend, env: str) -> CachedRun | None:
    try:
        return _run(opts, checkout, backend, env)
    except (Miss, Unsupported):
        return None


def _run(opts, checkout, backend, env: str) -> CachedRun:
    entries = []
    for query in opts.ops:
        data = refcache.load_ops(env, query)
        if data is None or any(r.get("uncacheable") for r in data["ops"]):
            raise Miss(query)
        entries.append(data)
    exp = expmod.load(checkout) if checkout is not None else expmod.Expectations(None)
    lists = tolerances.load_lists(checkout)
    results = []
    for data in entries:
        for rec in data["ops"]:
            results.append(_run_record(rec, env, backend, exp, lists, opts.dtypes, opts.sample))
    meta = entries[0]["meta"] if entries else {}
    db = SimpleNamespace(source=meta.get("source", "?"), torch_version=meta.get("torch", "?"),
                         torch_path=meta.get("path", "?"))
    # recordable samples are asked with the built-in keywords, whichever file says them
    return CachedRun(results, exp, lists, db, samples=sample_rules.load(checkout))


def _canonical(name: str) -> str:
    return expmod.canonical_dtype(name.removeprefix("torch."))


def _run_record(rec: dict, env: str, backend, exp, lists, dtypes, only) -> OpResult:
    """opinfo_run.run_opinfo on a record: every dtype the MPS test sends is run (a dtype without
    a kernel fails in the backend); the op beyond the emulator is skipped, a kernel file that
    does not build fails every dtype."""
    from porter.dispatch.kernel_choice import OpNames
    result = OpResult(rec["full_name"], rec["name"], rec["variant"], rec["key"], backend.name)
    wanted = {_canonical(d) for d in dtypes} if dtypes else None
    declared = set(rec["supported"])
    result.supported = sorted(declared, key=_dtype_order)
    if wanted:
        for name in sorted(wanted - declared, key=_dtype_order):
            result.dtypes.append(DtypeResult(name, SKIP, message=(
                f"{rec['full_name']} does not support {name} on {backend.name}")))
    op = OpNames(rec["name"], rec.get("aten_name"), rec["variant"])
    cannot_run = backend.skip_reason_named(op)
    build_error = None if cannot_run else backend.build_error_named(op)
    for name in sorted(declared, key=_dtype_order):
        if wanted is not None and name not in wanted:
            continue
        if cannot_run or build_error:
            result.dtypes.append(_not_run(rec, name, exp, cannot_run, build_error))
        else:
            result.dtypes.append(_run_dtype(rec, op, name, env, backend, exp, lists, only))
    result.dtypes.sort(key=lambda d: _dtype_order(d.dtype))
    return result


def _not_run(rec, name, exp, cannot_run, failure) -> DtypeResult:
    xfail_by, skip_by, _ = _expectations(rec, name, exp)
    return not_run_verdict(name, xfail_by, skip_by, cannot_run, failure)


def _expectations(rec: dict, dtype: str, exp: expmod.Expectations):
    """opinfo_run._expectations: the checkout's entries now, the OpInfo's as recorded."""
    xfail, skip = [], []
    for entry in exp.active(rec["key"], dtype, macos=None):
        (skip if entry.kind == expmod.SKIP else xfail).append(entry.where)
    if exp.complex_xfail(rec["key"], dtype):
        xfail.append(f"SUPPORTED_COMPLEX_OPS lacks {rec['key']!r}")
    recorded = rec["decorators"].get(dtype)
    if recorded is None:
        raise Miss(f"{rec['full_name']} {dtype}")
    dec_xfail, dec_skip, floors = recorded
    return xfail + dec_xfail, skip + dec_skip, tuple(floors)


def _run_dtype(rec, op, dtype, env, backend, exp, lists, only) -> DtypeResult:
    xfail_by, skip_by, floors = _expectations(rec, dtype, exp)
    res = DtypeResult(dtype, PASS)
    if skip_by:
        res.outcome, res.expected_by = SKIP, skip_by
        res.message = "skipped by " + ", ".join(skip_by)
        return res
    # the checkout's rules, as the uncached run applies them (a stand-in torch: no import)
    res.atol, res.rtol = lists.named(rec["name"], rec["variant"], dtype)
    loaded = refcache.load_refs(env, rec["full_name"], dtype)
    if loaded is None:
        raise Miss(f"{rec['full_name']} {dtype}")
    meta, arrays = loaded
    start = time.perf_counter()
    for index, raw in enumerate(meta["samples"]):
        if only is not None and index != only:
            continue
        res.samples += 1
        err = _check_sample(rec, op, _decode_sample(raw, arrays), dtype, backend, lists,
                            floors, res)
        if err is not None:
            res.failed_samples += 1
            if res.first_failure is None:
                res.first_failure, res.message = index, err
    if meta["error"]:
        res.failed_samples += 1
        res.message = res.message or meta["error"]
    elif only is not None and not res.samples:
        # nothing ran: a pass here would be a green no device ever gave (as opinfo_run._run_dtype)
        generated = len(meta["samples"])
        raise PorterError(f"--sample {only}: {rec['full_name']} has {generated} sample input(s) "
                          f"for {dtype}", hint=f"pass --sample 0 to {generated - 1}" if generated else None)
    return settle(res, start, xfail_by)


def _check_sample(rec, op, sample: Sample, dtype, backend, lists, floors, res) -> str | None:
    try:
        atol, rtol = lists.named(rec["name"], rec["variant"], dtype, sample)
    except Exception as exc:      # a rule reading the sample's tensors: run them as torch ones
        raise Unsupported(f"the checkout's tolerance rules on a cached sample: {exc}") from exc
    try:
        dev_out = backend.run_portable(op, sample)
    except Unsupported:
        raise
    except Exception as exc:
        return f"{backend.name} error: {_one_line(exc)}"
    if sample.ref_error:
        return sample.ref_error
    # the wider reference goes back to the op's own output dtype (the meta function's), not
    # the device's answer: a float32 answer for a half op still fails the exact-dtype check
    ref = astype(sample.ref, _cast_target(sample, dev_out)) if sample.ref_cast else sample.ref
    errors = max_errors(ref, dev_out)
    if errors is not None:
        _raise_max(res, "max_abs", errors[0])
        _raise_max(res, "max_rel", errors[1])
    if rec["name"] == "kthvalue":
        raise Unsupported("kthvalue's index check")
    message = compare(ref, dev_out, atol, rtol, floors)
    return None if message is None else _one_line(AssertionError(message))


def _decode(value: dict, arrays: dict):
    kind = value["t"]
    if kind == "array":
        return PArray(value["dtype"], arrays[value["k"]])
    if kind == "complex":
        return complex(*value["v"])
    if kind == "tuple":
        return tuple(value["v"])
    if kind == "dtype":
        raise Unsupported("a dtype argument")
    return value["v"]


def _decode_sample(raw: dict, arrays: dict) -> Sample:
    return Sample(_decode(raw["input"], arrays), [_decode(a, arrays) for a in raw["args"]],
                  {k: _decode(v, arrays) for k, v in raw["kwargs"].items()}, raw["promoted"],
                  raw["out_dtype"], _decode(raw["ref"], arrays) if raw["ref"] else None, raw["ref_cast"],
                  raw["ref_error"])


def _cast_target(sample: Sample, dev_out) -> str:
    return sample.out_dtype or dev_out.dtype
