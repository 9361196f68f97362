"""`porter bench OP`: write (and on a Mac, run) the before/after benchmark reviewers ask for.

The script is `porter/review/bench_script.py` with the op's facts appended as `CONFIG`: the
checkout's kernel file with its headers inlined (what `torch.mps.compile_shader` compiles),
each dtype's dense host name, output dtype, scalar argument (as the host passes it for the
op's first OpInfo sample) and dispatch arithmetic, and the torch function and scalar arguments
of the `before` call. It imports nothing of porter: a contributor runs it with a released torch.
"""

from __future__ import annotations

import inspect
import pprint
from pathlib import Path

from porter.errors import PorterError
from porter.review import bench_script


def config(root: Path, op: str) -> dict:
    import torch

    from porter.dispatch.kernel_choice import ARITY
    from porter.emulate.emulator_device import EmulateBackend
    from porter.emulate.hostmap import host_kernels
    from porter.dispatch.kernel_choice import torch_dtype
    from porter.harness import opdb
    from porter.harness.mps_shader_device import (KIND_OF_MACRO, SCALAR_CASTS, DenseEntry, scalar_arg,
                                           inline_headers, source_dirs)
    from porter.source.metal_scan import MetalFile

    root = Path(root)
    infos = opdb.find(opdb.load(root), op)
    info = infos[0]
    names = {op, info.name, getattr(info, "aten_name", None) or info.name, info.name.removeprefix("nn.functional.")}
    hosts = [h for h in host_kernels(root) if h.op in names or h.stub in names]
    if not hosts:
        raise PorterError(f"{op}: no *Kernel.mm of the checkout dispatches a Metal kernel for it, so "
                          "there is no `after` to measure", hint=f"port it first (porter status {op})")
    host = hosts[0]
    text = host.metal.read_text(encoding="utf-8")
    regs = [r for r in MetalFile(text, str(host.metal)).registrations
            if r.kernel == host.kernel and r.macro in KIND_OF_MACRO]
    if not regs:
        raise PorterError(f"{op}: {host.metal.name} registers no kernel {host.kernel!r}",
                          hint=f"porter check --root {root}")
    kind = KIND_OF_MACRO[regs[0].macro]
    if kind.startswith("ternary"):
        raise PorterError(f"{op}: ternary kernels are not benchmarked yet")
    source = inline_headers(text, source_dirs(root))
    entry = DenseEntry(kind, source)
    backend = EmulateBackend(root)
    kernels, before_args = {}, None
    for reg in regs:
        in_dtype, out_dtype = torch_dtype(reg.in_type), torch_dtype(reg.out_type)
        if in_dtype is None or out_dtype is None or in_dtype.is_complex:
            continue
        name = str(in_dtype).removeprefix("torch.")
        if name in kernels and out_dtype != in_dtype:
            continue          # the same-type registration is the one the op's own output takes
        sample = next(iter(info.sample_inputs("cpu", in_dtype)), None)
        if sample is None:
            continue
        scalars = [a for a in sample.args if not isinstance(a, torch.Tensor)]
        if before_args is None or in_dtype == torch.float32:
            before_args = (scalars, {k: v for k, v in sample.kwargs.items()
                                     if isinstance(v, (int, float, bool, str)) or v is None})
        alpha, cast = None, None
        if kind.endswith("alpha"):
            value = backend._scalar(host, sample, reg, ARITY[kind])
            if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                    reg.in_type in ("uchar", "char", "short", "int", "long"):
                value = torch.tensor(value).to(in_dtype).item()    # Scalar::to<T>(), as the host
            alpha = scalar_arg(value, reg.alpha_type) if not isinstance(value, (list, tuple)) else list(value)
            cast = SCALAR_CASTS.get(reg.alpha_type)
        kernels[name] = {"host_name": f"{reg.kernel}_dense_{reg.out_type}_{reg.in_type}"
                                      + (f"_{reg.alpha_type}" if kind.endswith("alpha") else ""),
                         "out_dtype": str(out_dtype).removeprefix("torch."),
                         "alpha": alpha, "alpha_cast": cast,
                         "takes_numel": entry.takes_numel, "ilp": entry.ilp}
    backend.close()
    order = ["float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]
    kernels = {k: kernels[k] for k in sorted(kernels, key=lambda k: order.index(k) if k in order else 99)}
    args, kwargs = before_args or ([], {})
    return {"op": op, "kernel": host.kernel, "torch_op": info.name, "arity": ARITY[kind],
            "args": args, "kwargs": kwargs, "kernels": kernels,
            "kernel_file": str(host.metal.relative_to(root)), "source": source}


def script(cfg: dict) -> str:
    """The standalone script: bench_script's code, then CONFIG, then the entry point."""
    code = inspect.getsource(bench_script)
    return (f"{code}\n\n# written by `porter bench {cfg['op']}` from {cfg['kernel_file']}\n"
            f"CONFIG = {pprint.pformat(cfg, width=100, sort_dicts=False)}\n\n\n"
            "if __name__ == \"__main__\":\n    sys.exit(main())\n")


def mps_module():
    """torch.mps where it can run the script (Apple silicon, torch with compile_shader), else None.
    Tests put porter.testing.fake_mps here."""
    import torch
    if hasattr(torch.mps, "compile_shader") and torch.backends.mps.is_available():
        return torch.mps, torch, "mps"
    return None
