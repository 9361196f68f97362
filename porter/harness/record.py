"""Fill the reference cache after an ordinary (cold) `porter test` run, which has torch and
the op database loaded already.

For every OpInfo the command line named, and every dtype it declares for the device (not only
the ones tested this time: the next edit may register a kernel for another), it records what
the runner would compute before the device runs: the sample inputs (`opinfo_run.generate_samples`,
the very call the runner makes), the CPU reference (`opinfo_run.reference_uncast`), the OpInfo's
own DecorateInfo expectations and tolerance floors per dtype, and, per sample, the dtype torch
promotes 1, 2 or 3 operands to (the emulator's TensorIterator step, which needs torch).

A sample porter cannot represent without torch (a non-contiguous or exotic tensor, a tensor
in kwargs, a tuple output) makes the whole OpInfo uncacheable: recorded as such, so the next
run goes the ordinary way at once.
"""

from __future__ import annotations

import hashlib
import inspect

from porter.dispatch import kernel_choice
from porter.dispatch.arrays import Unsupported, from_torch
from porter.harness import opdb, opinfo_run, refcache
from porter.harness.devices import mps_dtypes


class _Encoder:
    """Sample values as JSON, tensors as named numpy arrays beside it."""

    def __init__(self):
        self.arrays: dict = {}

    def value(self, x, name: str):
        import torch
        if isinstance(x, torch.Tensor):
            if not x.is_contiguous() or x.is_conj() or x.is_neg():
                raise Unsupported("a non-contiguous or lazily conjugated tensor")
            arr = from_torch(x)
            self.arrays[name] = arr.data
            return {"t": "array", "k": name, "dtype": arr.dtype}
        if isinstance(x, bool) or x is None or isinstance(x, (int, float, str)):
            return {"t": "py", "v": x}
        if isinstance(x, complex):
            return {"t": "complex", "v": [x.real, x.imag]}
        if isinstance(x, (list, tuple)) and all(isinstance(v, (bool, int, float, str)) for v in x):
            return {"t": "list" if isinstance(x, list) else "tuple", "v": list(x)}
        if isinstance(x, torch.dtype):
            return {"t": "dtype", "v": str(x).removeprefix("torch.")}
        raise Unsupported(f"a sample value of type {type(x).__name__}")


def _source_sha(info) -> str:
    try:
        return hashlib.sha256(inspect.getsource(info.sample_inputs_func).encode()).hexdigest()[:16]
    except (OSError, TypeError):
        return "?"


def record_dtype(env: str, info, dtype) -> None:
    """Samples and references of one OpInfo and dtype (raises Unsupported)."""
    import torch
    enc = _Encoder()
    samples, error = [], None
    try:
        for i, sample in enumerate(opinfo_run.generate_samples(info, dtype)):
            item = {"input": enc.value(sample.input, f"s{i}_input"),
                    "args": [enc.value(a, f"s{i}_arg{j}") for j, a in enumerate(sample.args)],
                    "kwargs": {k: enc.value(v, f"s{i}_kw_{k}") for k, v in sample.kwargs.items()},
                    "promoted": kernel_choice.promotions(sample), "out_dtype": kernel_choice.TorchSample(info, sample).out_dtype(),
                    "ref": None, "ref_cast": False,
                    "ref_error": None}
            try:
                out, cast = opinfo_run.reference_uncast(info, sample)
            except Exception as exc:
                item["ref_error"] = f"CPU reference error: {opinfo_run._one_line(exc)}"
            else:
                if not isinstance(out, torch.Tensor):
                    raise Unsupported("a reference that is not one tensor")
                item["ref"] = enc.value(out, f"s{i}_ref")
                item["ref_cast"] = cast
            samples.append(item)
    except Unsupported:
        raise
    except Exception as exc:          # the runner reports it the same way
        error = f"sample inputs failed: {opinfo_run._one_line(exc)}"
    meta = {"op": info.full_name, "dtype": opinfo_run._dtype_name(dtype), "samples": samples,
            "error": error, "sample_source_sha": _source_sha(info)}
    refcache.save_refs(env, info.full_name, opinfo_run._dtype_name(dtype), enc.arrays, meta)


def record(ctx: opinfo_run.RunContext, queries: list[str], env: str) -> None:
    """Record every OpInfo `queries` name that the cache lacks. Never fails the run."""
    backend = ctx.backend
    device_type = getattr(backend, "device_type", backend.name)
    mps_like = getattr(backend, "mps_expectations", False)
    db_meta = {"source": ctx.db.source, "torch": ctx.db.torch_version, "path": ctx.db.torch_path}
    for query in queries:
        if refcache.load_ops(env, query) is not None:
            continue
        try:
            infos = opdb.find(ctx.db, query)
        except Exception:
            continue
        records = []
        for info in infos:
            supported = set(info.supported_dtypes(device_type))
            if device_type == "mps":
                supported &= mps_dtypes()
            rec = {"full_name": info.full_name, "name": info.name,
                   "aten_name": getattr(info, "aten_name", None),
                   "variant": info.variant_test_name, "key": opdb.xfail_key(info),
                   "supported": sorted(opinfo_run._dtype_name(d) for d in supported),
                   "decorators": {}, "uncacheable": None}
            try:
                for dtype in supported:
                    xfail, skip, floors = opinfo_run.decorator_expectations(info, dtype, device_type,
                                                                        mps_like)
                    rec["decorators"][opinfo_run._dtype_name(dtype)] = [xfail, skip, list(floors)]
                    if not refcache.ref_path(env, info.full_name, opinfo_run._dtype_name(dtype)).is_file():
                        record_dtype(env, info, dtype)
            except Unsupported as why:
                rec["uncacheable"] = str(why)
            records.append(rec)
        refcache.save_ops(env, query, records, db_meta)
    refcache.evict()
