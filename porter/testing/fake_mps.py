"""A stand-in for `torch.mps` backed by the Metal emulator, for testing `--device mps-shader`
where there is no Apple GPU.

It takes the same calls as the real API (`compile_shader(source)`, `lib.<host_name>`,
`kernel(*args, threads=, group_size=, arg_casts=)`, `kernel.max_threads_per_threadgroup`,
`synchronize()`) and keeps the same rules (torch/csrc/mps/Module.cpp): `threads` defaults to
the first tensor's numel, `group_size` must have as many dimensions as `threads`, a Python int
binds as 8 bytes and a float as 4 unless `arg_casts` says otherwise, and a scalar parameter
reads as many bytes as its Metal type has. Dispatch is `dispatchThreads`: thread t of the dense
entry point writes element t (or elements [t*ILP, t*ILP+ILP) for c10/metal's ILP variant), so
too few threads leave elements unwritten and too many write past the end of the output (an
error here; memory corruption on a GPU).

What it cannot see: Metal compiler errors that g++ accepts, and GPU numerics that differ from
the host's. Its source must not leave an #include the installed torch's include directory holds: the real
call would take that header from the wheel, silently, instead of the checkout's.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

from porter.emulate import headers
from porter.emulate.build import build_source
from porter.emulate.client import WorkerClient
from porter.errors import PorterError
from porter.dispatch.kernel_choice import METAL_DTYPES, torch_dtype
from porter.emulate.torch_run import run_registration
from porter.harness.mps_shader_device import BEGIN, END, INCLUDE_RE, DenseEntry

TYPES = "|".join(sorted(METAL_DTYPES, key=len, reverse=True))
HOST_NAME_RE = re.compile(rf"^(?P<kernel>\w+?)_dense_(?P<out>{TYPES})_(?P<in>{TYPES})(?:_(?P<alpha>{TYPES}))?$")
SCALAR_SIZES = {"float": 4, "half": 2, "bfloat": 2, "long": 8, "int": 4, "uint": 4, "short": 2,
                "char": 1, "uchar": 1, "bool": 1, "float2": 8, "half2": 4}
CAST_FORMATS = {None: ("<q", "<f"), "int32": ("<i", "<i"), "int16": ("<h", "<h"), "int8": ("<b", "<b"),
                "uint8": ("<B", "<B")}
MAX_THREADS_PER_THREADGROUP = 1024


def restore_includes(source: str) -> str:
    """Undo porter's header inlining: each outermost inlined block becomes its #include again."""
    out, depth, lines = [], 0, source.split("\n")
    for line in lines:
        if line.startswith(BEGIN):
            if depth == 0:
                out.append(f"#include <{line[len(BEGIN):]}>")
            depth += 1
        elif line.startswith(END):
            depth -= 1
        elif depth == 0 and not line.startswith("// porter-inline-again "):
            out.append(line)
    return "\n".join(out)


class FakeMps:
    """`torch.mps` for MpsShaderBackend(mps=FakeMps(root), device="cpu")."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.client = WorkerClient()
        self.sources: list[str] = []          # what compile_shader was given
        self.calls: list[dict] = []           # every dispatch: kernel, threads, group_size, casts
        # called with (host name, numel) on every dispatch: a test's clock advances by the
        # time it says the kernel took (porter bench's arithmetic is checked against it)
        self.on_dispatch = None

    def compile_shader(self, source: str) -> "FakeShaderLibrary":
        # what the real compile_shader would still find, in the installed torch's include dir
        include = headers.torch_include_dir()
        left = [m.group(1) for m in INCLUDE_RE.finditer(source)
                if include is not None and (include / m.group(1)).is_file()]
        if left:
            raise RuntimeError(f"compile_shader: #include <{left[0]}> is not inlined: the installed "
                               "torch's header would be used, not the checkout's")
        self.sources.append(source)
        try:
            lib = build_source(restore_includes(source), "compile_shader.metal", self.root, strict=False)
        except PorterError as err:
            raise RuntimeError(f"Failed to create metal library, error: {err.message}") from None
        # what the emulator sets aside one functor at a time stops a Metal library whole
        errors = lib.build_errors()
        if errors:
            raise RuntimeError(f"Failed to create metal library, error: {errors[0]}")
        return FakeShaderLibrary(self, lib, source)

    def synchronize(self) -> None:
        pass

    def close(self) -> None:
        self.client.close()


class FakeShaderLibrary:
    def __init__(self, mps: FakeMps, lib, source: str):
        self._mps, self._lib, self._source = mps, lib, source

    def __getattr__(self, name: str) -> "FakeKernel":
        m = HOST_NAME_RE.match(name)
        regs = [] if m is None else [
            r for r in self._lib.find(m.group("kernel"), m.group("in"))
            if r.built and r.out_type == m.group("out") and (r.alpha_type or None) == m.group("alpha")]
        if not regs:
            raise RuntimeError(f"Failed to create function state object for: {name}")
        return FakeKernel(self._mps, self._lib, regs[0], name, DenseEntry(regs[0].kind, self._source))


class FakeKernel:
    max_threads_per_threadgroup = MAX_THREADS_PER_THREADGROUP

    def __init__(self, mps: FakeMps, lib, reg, name: str, entry: DenseEntry):
        self._mps, self._lib, self._reg, self._name, self._entry = mps, lib, reg, name, entry

    def __call__(self, *args, threads=None, group_size=None, arg_casts=None):
        import torch
        reg, entry = self._reg, self._entry
        casts = arg_casts if isinstance(arg_casts, dict) else {}
        default_cast = arg_casts if isinstance(arg_casts, str) else None
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        threads = _dims(threads if threads is not None else (tensors[0].numel() if tensors else None))
        group = _dims(group_size)
        if threads is None or not 1 <= len(threads) <= 3:
            raise RuntimeError("Number of threads is undefined or has wrong dimension")
        if group is not None and len(group) != len(threads):
            raise RuntimeError("threads and group_size have different dimensions")
        if group is not None and (min(group) < 1 or _product(group) > self.max_threads_per_threadgroup):
            raise RuntimeError(f"group_size {group}: more than {self.max_threads_per_threadgroup} "
                               "threads per threadgroup, or none")
        if len(threads) != 1:
            raise RuntimeError(f"{self._name}: a dense entry point is one-dimensional, got threads={threads}")
        arity = {"unary": 1, "unary_alpha": 1, "binary": 2, "binary_alpha": 2}.get(reg.kind)
        if arity is None:
            raise RuntimeError(f"{self._name}: {reg.kind} kernels are not faked")
        want = 1 + arity + reg.kind.endswith("alpha") + entry.takes_numel
        if len(args) != want:
            raise RuntimeError(f"{self._name} takes {want} arguments ([[buffer(0..{want - 1})]]), "
                               f"got {len(args)}")
        out, inputs = args[0], list(args[1:1 + arity])
        for i, (t, metal) in enumerate([(out, reg.out_type)] + [(x, reg.in_type) for x in inputs]):
            if not isinstance(t, torch.Tensor) or t.dtype != torch_dtype(metal) or not t.is_contiguous():
                raise RuntimeError(f"{self._name}: buffer({i}) must be a contiguous {metal} tensor, got "
                                   f"{getattr(t, 'dtype', type(t).__name__)}")
        rest = list(enumerate(args))[1 + arity:]
        alpha = None
        if reg.kind.endswith("alpha"):
            index, value = rest.pop(0)
            alpha = _read_as(_bind(value, casts.get(index, default_cast)), SCALAR_SIZES[reg.alpha_type])
        numel = out.numel()
        if entry.takes_numel:
            index, value = rest.pop(0)
            numel = int.from_bytes(_read_as(_bind(value, casts.get(index, default_cast)), 4), "little")
        n = threads[0]
        written = min(n * entry.ilp, numel)
        if n > -(-numel // entry.ilp) and not entry.takes_numel:
            raise RuntimeError(f"{self._name}: {n} threads write past the end of the {numel}-element "
                               "output (the dense kernel has no bounds check)")
        self._mps.calls.append({"kernel": self._name, "threads": threads, "group_size": group,
                                "arg_casts": arg_casts})
        if self._mps.on_dispatch is not None:
            self._mps.on_dispatch(self._name, numel)
        result = run_registration(self._mps.client, self._lib, reg, [x.cpu() for x in inputs], alpha)
        out.view(-1)[:written] = result.reshape(-1)[:written].to(out.device)


def _dims(value):
    if value is None:
        return None
    return [int(value)] if isinstance(value, int) else [int(v) for v in value]


def _product(values) -> int:
    total = 1
    for v in values:
        total *= v
    return total


def _bind(value, cast: str | None) -> bytes:
    """The bytes compile_shader puts in the argument buffer for a Python scalar or list."""
    if isinstance(value, (list, tuple)):
        return b"".join(_bind(v, cast) for v in value)
    if cast in ("fp16", "bf16"):
        import torch
        t = torch.tensor([float(value)], dtype=torch.float16 if cast == "fp16" else torch.bfloat16)
        return t.view(torch.int16).numpy().tobytes()
    if cast not in CAST_FORMATS:
        raise RuntimeError(f"Unsupported cast instruction {cast}")
    int_format, float_format = CAST_FORMATS[cast]
    if isinstance(value, bool) or isinstance(value, int):
        return struct.pack(int_format, int(value))
    if isinstance(value, float):
        return struct.pack(float_format, value) if cast is None else struct.pack(int_format, int(value))
    raise RuntimeError("Unsupported argument type")


def _read_as(data: bytes, size: int) -> bytes:
    """What a `constant T&` of `size` bytes reads from the bound bytes."""
    return (data + bytes(size))[:size]
