"""`porter test --device mps-shader`: the checkout's Metal kernels on a real Apple GPU, no build.

A PyTorch build takes hours; the Metal half of a port does not need one. This backend compiles
the checkout's `.metal` file with `torch.mps.compile_shader` of an installed torch (release or
nightly), after inlining the checkout's own headers (`c10/metal/*.h`, `ATen/native/mps/kernels/
*.h`: the directories the emulator compiles against, porter/emulate/headers.py), and runs each
op's registered kernel through its dense entry point (`<kernel>_dense_<out>_<in>[_<alpha>]`)
the way the host's `mtl_dispatch1DJob` does: `dispatchThreads` with `threads=[N]` in total and
threadgroups of `min(max_threads_per_threadgroup, N)`. Operands are broadcast and made
contiguous first (the dense kernel indexes every operand by the thread position), so what is
tested is the functor and its registrations per dtype; strided and cast entry points, and the
host .mm, are the full build's (`--device mps`).

Where the checkout's `unary_dense` takes `numel` (c10/metal's ILP variant: each thread handles
ILP_PER_THREAD elements), N is ceil(numel / ILP_PER_THREAD) and numel is passed as a 32-bit
`uint`. The API (torch/csrc/mps/Module.cpp): tensors bind as buffers, a Python int as int64
and a float as float32 unless `arg_casts` says otherwise ("int32", "fp16", "bf16", ...).

Tested here against a fake `torch.mps` backed by the emulator (porter/testing/fake_mps.py:
the same calls, the same dispatch arithmetic); it has not yet run on Apple hardware.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from porter.emulate import headers
from porter.dispatch import kernel_choice
from porter.dispatch.kernel_choice import OpNames, torch_dtype
from porter.emulate.emulator_device import EmulateBackend

# markers around each inlined header: the source stays readable in a compiler error, and the
# emulator-backed fake can put the #include back
BEGIN, END = "// porter-inline-begin ", "// porter-inline-end "
INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)
PRAGMA_ONCE_RE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once[ \t]*$", re.M)
KIND_OF_MACRO = {
    "REGISTER_UNARY_OP": "unary", "REGISTER_UNARY_ALPHA_OP": "unary_alpha",
    "REGISTER_BINARY_OP": "binary", "REGISTER_OPMATH_BINARY_OP": "binary",
    "REGISTER_BINARY_ALPHA_OP": "binary_alpha",
    "REGISTER_TERNARY_OP": "ternary", "REGISTER_OPMATH_TERNARY_OP": "ternary",
    "REGISTER_TERNARY_ALPHA_OP": "ternary_alpha", "REGISTER_OPMATH_TERNARY_ALPHA_OP": "ternary_alpha",
}
# the c10/metal template each kind's dense entry point instantiates
DENSE_TEMPLATE = {"unary": "unary_dense", "unary_alpha": "unary_alpha_dense",
                  "binary": "binary_dense", "binary_alpha": "binary_alpha_dense",
                  "ternary": "ternary_dense"}
# how compile_shader's arg_casts writes a scalar of this Metal type (None: as it comes)
SCALAR_CASTS = {"float": None, "long": None, "half": "fp16", "bfloat": "bf16", "int": "int32",
                "uint": "int32", "short": "int16", "char": "int8", "uchar": "uint8", "bool": "uint8"}
DEFAULT_MAX_GROUP = 1024


def inline_headers(text: str, dirs: list[Path], seen: set[str] | None = None) -> str:
    """`text` with every #include found under `dirs` replaced by the header's text (once each,
    like #pragma once); includes found nowhere (<metal_stdlib>) stay for the Metal compiler."""
    seen = set() if seen is None else seen

    def replace(m: re.Match) -> str:
        name = m.group(1)
        for d in dirs:
            path = d / name
            if path.is_file():
                if name in seen:
                    return f"// porter-inline-again {name}"
                seen.add(name)
                body = PRAGMA_ONCE_RE.sub("", path.read_text(encoding="utf-8"))
                return f"{BEGIN}{name}\n{inline_headers(body, dirs, seen)}\n{END}{name}"
        return m.group(0)
    return INCLUDE_RE.sub(replace, text)


def source_dirs(root: Path) -> list[Path]:
    """Where the checkout's kernel headers come from: the emulator's -I list without its shim
    (a real Metal compiler brings its own metal_stdlib)."""
    return headers.checkout_include_dirs(root)


class DenseEntry:
    """The dense entry point of one kind of kernel, as the checkout's headers define it."""

    def __init__(self, kind: str, source: str):
        self.kind = kind
        self.template = DENSE_TEMPLATE[kind]
        # the definition (its parameters carry [[buffer(i)]]), not an instantiation in a macro
        m = re.search(rf"kernel\s+void\s+{self.template}\s*\((.*?)\)\s*\{{", source, re.S)
        params = m.group(1) if m else ""
        self.takes_numel = bool(re.search(r"&\s*numel\b", params))
        ilp = re.search(r"\bILP_PER_THREAD\s*=\s*(\d+)", source)
        self.ilp = int(ilp.group(1)) if ilp and self.takes_numel else 1

    def threads(self, numel: int) -> int:
        return math.ceil(numel / self.ilp)


class MpsShaderBackend(EmulateBackend):
    name = "mps-shader"
    device_type = "mps"
    mps_expectations = True

    def __init__(self, root: Path, mps=None, device: str = "mps"):
        super().__init__(root)
        self._mps = mps                 # torch.mps, or a stand-in with the same calls
        self.device = device
        self._shader_libs: dict[Path, tuple[object, str]] = {}
        self._registrations: dict[Path, list] = {}

    @property
    def mps(self):
        if self._mps is None:
            import torch.mps
            self._mps = torch.mps
        return self._mps

    # ------------------------------------------------------------ protocol
    def unavailable_reason(self) -> str | None:
        if self._mps is not None:
            return None
        import torch
        if not hasattr(torch.mps, "compile_shader"):
            return (f"--device mps-shader: torch {torch.__version__} has no torch.mps.compile_shader "
                    "(torch 2.6 or later)")
        if not torch.backends.mps.is_available():
            return (f"--device mps-shader: torch {torch.__version__} sees no MPS device (Apple silicon "
                    "only; elsewhere --device emulate runs the Metal kernels on this CPU)")
        return None

    # supported_dtypes (None: every dtype the MPS test sends runs, a missing kernel fails as on
    # a Mac) and skip_reason (no *Kernel.mm dispatches the op) are the emulator's

    def build_error(self, op: OpNames) -> str | None:
        """The Metal compiler's words when the op's kernel file does not compile: every dtype
        fails then, as no kernel of the file can be loaded."""
        for host in self._candidates(op):
            try:
                self._shader_library(host.metal)
            except Exception as err:          # compile_shader raises RuntimeError with the log
                return f"{self._rel(host.metal)} does not compile: {self._rel(str(err).strip())}"
        return None

    def _iterator_order(self, opinfo):
        """The op's kernel operands in its meta function's order (porter.source.native_definitions)."""
        from porter.source import checkout as co
        from porter.source.native_definitions import iterator_inputs
        name = (getattr(opinfo, "aten_name", None) or opinfo.name).removeprefix("nn.functional.")
        return iterator_inputs(co.Checkout(self.root), name.replace(".", "_", 1))

    def run(self, opinfo, sample, dtype):
        import torch
        host = self._select(OpNames.of(opinfo), sample.kwargs).for_sample(sample.kwargs)
        regs = [r for r in self._static_registrations(host.metal)
                if r.kernel == host.kernel and r.macro in KIND_OF_MACRO]
        if not regs:
            raise RuntimeError(f"mps-shader: kernel {host.kernel!r} is not registered in {host.metal.name}")
        kind = KIND_OF_MACRO[regs[0].macro]
        order = self._iterator_order(opinfo) if kernel_choice.operands_can_swap(kind) else None
        choice = kernel_choice.choose(host.kernel, regs, kind, sample,
                                      kernel_choice.TorchSample(opinfo, sample), "mps-shader",
                                      opinfo.name, order)
        reg, common, want_out = choice.reg, choice.common, choice.want_out
        if reg is None:
            name = f"{host.kernel}_{common}_{want_out if want_out is not None else common}"
            have = ", ".join(f"{r.in_type}->{r.out_type}" for r in choice.matching)
            raise RuntimeError(f"no kernel {name} registered in {host.metal.name}"
                               f"{f' (registered: {have})' if have else ''}: MPS raises "
                               f"'Failed to create function state object for: {name}'")
        if kind.startswith("ternary"):
            raise RuntimeError("mps-shader: ternary kernels are not run yet (use --device mps)")
        tensors = [x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=getattr(torch, common))
                   for x in choice.operands]
        alpha = self._scalar(host, sample, reg) if kind.endswith("alpha") else None
        if isinstance(alpha, (int, float)) and not isinstance(alpha, bool) and \
                reg.in_type in ("uchar", "char", "short", "int", "long"):
            # the host hands the kernel Scalar::to<T>() of the alpha: integers wrap (uint8 -1 -> 255)
            alpha = torch.tensor(alpha).to(torch_dtype(reg.in_type)).item()
        out = self.run_dense(host.metal, reg, kind, tensors, alpha)
        if want_out is not None and out.is_complex() and not want_out.startswith("complex"):
            out = out.real.clone()    # |z| in both lanes of a float2; the host reads one
        return out

    # ------------------------------------------------------------ the GPU call
    def run_dense(self, metal: Path, reg, kind: str, tensors: list, alpha=None):
        """Run `reg`'s dense entry point on `tensors` (CPU); the result on the CPU."""
        import torch
        lib, source = self._shader_library(metal)
        in_dtype, out_dtype = torch_dtype(reg.in_type), torch_dtype(reg.out_type)
        if in_dtype is None or out_dtype is None:
            raise RuntimeError(f"mps-shader: no torch dtype for Metal types {reg.in_type}/{reg.out_type}")
        shape = torch.broadcast_shapes(*(t.shape for t in tensors))
        inputs = [t.to(in_dtype).expand(shape).contiguous().to(self.device) for t in tensors]
        out = torch.empty(shape, dtype=out_dtype, device=self.device)
        numel = out.numel()
        if numel == 0:
            return out.cpu()
        entry = DenseEntry(kind, source)
        host_name = f"{reg.kernel}_dense_{reg.out_type}_{reg.in_type}"
        args: list = [out, *inputs]
        casts: dict[int, str] = {}
        if alpha is not None:
            host_name += f"_{reg.alpha_type}"
            args.append(scalar_arg(alpha, reg.alpha_type))
            if SCALAR_CASTS.get(reg.alpha_type):
                casts[len(args) - 1] = SCALAR_CASTS[reg.alpha_type]
        if entry.takes_numel:
            args.append(numel)
            casts[len(args) - 1] = "int32"          # constant uint& numel
        kernel = getattr(lib, host_name)
        threads = entry.threads(numel)
        group = min(getattr(kernel, "max_threads_per_threadgroup", DEFAULT_MAX_GROUP), threads)
        kernel(*args, threads=threads, group_size=group, arg_casts=casts or None)
        self.mps.synchronize()
        return out.cpu()

    def _shader_library(self, metal: Path):
        found = self._shader_libs.get(metal)
        if found is None:
            text = metal.read_text(encoding="utf-8")
            source = inline_headers(text, source_dirs(self.root))
            try:
                found = (self.mps.compile_shader(source), source)
            except Exception as err:           # remembered: one compile per session
                found = err
            self._shader_libs[metal] = found
        if isinstance(found, Exception):
            raise found
        return found

    def _static_registrations(self, metal: Path) -> list:
        regs = self._registrations.get(metal)
        if regs is None:
            from porter.source.metal_scan import MetalFile
            regs = self._registrations[metal] = MetalFile(
                metal.read_text(encoding="utf-8"), str(metal)).registrations
        return regs


def scalar_arg(value, metal_type: str):
    """A Python value compile_shader binds as `metal_type` (with SCALAR_CASTS)."""
    if metal_type in ("float2", "half2"):
        z = complex(value)
        return [z.real, z.imag]
    if metal_type in ("float", "half", "bfloat"):
        return float(value)
    return int(value)
