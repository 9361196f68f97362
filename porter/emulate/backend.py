"""`porter test --device emulate`: the harness backend that runs the checkout's Metal kernels
on the host CPU.

The op's kernel comes from the host .mm (hostmap); the .metal file is built once per session
(build, cached on disk); kernels run in one long-lived worker process (client), so a kernel
that faults fails its test with "kernel crashed (signal N)" instead of killing porter.
TensorIterator semantics are emulated here: type promotion with torch.result_type,
broadcasting, and the kernel's registered output dtype (int -> float for math ops).
"""

from __future__ import annotations

from pathlib import Path

from porter.emulate.build import Library, build_file, build_source
from porter.emulate.client import WorkerClient
from porter.emulate.hostmap import HostKernel, host_kernels
from porter.emulate import nprun
from porter.emulate.nprun import METAL_TO_NAME, NAME_TO_METAL
from porter.emulate.nprun import pack_alpha as pack_alpha_np
from porter.emulate.runner import metal_dtype, pack_alpha, run_registration, torch_dtype
from porter.harness.portable import PArray, Unsupported
from porter.harness.portable import scalar as portable_scalar

ARITY = {"unary": 1, "unary_alpha": 1, "binary": 2, "binary_alpha": 2, "ternary": 3}
# div's rounding_mode kwarg selects the kernel (div_true_stub, div_floor_stub, ...)
DIV_KERNELS = {None: "div_true", "floor": "div_floor", "trunc": "div_trunc"}


class EmulateBackend:
    name = "emulate"
    device_type = "mps"
    mps_expectations = True

    def __init__(self, root: Path):
        self.root = Path(root)
        self._libs: dict[Path, Library] = {}
        self._host: list[HostKernel] | None = None
        self._client: WorkerClient | None = None
        self._focus: set[str] | None = None     # kernel names to build; None: every one

    # ------------------------------------------------------------ protocol
    def unavailable_reason(self) -> str | None:
        from porter.emulate import build
        try:
            build.compiler()
        except Exception as err:
            return f"--device emulate: {err}"
        return None

    def supported_dtypes(self, opinfo) -> set:
        """torch dtypes whose (promoted) input the .metal registers a kernel for."""
        return {torch_dtype(NAME_TO_METAL[n])
                for n in self.supported_dtype_names(opinfo.name, _variant(opinfo))}

    def supported_dtype_names(self, name: str, variant: str) -> set[str]:
        """`supported_dtypes` as dtype names ("float32"), without importing torch."""
        dtypes = set()
        for host in self._candidates_named(name, variant):
            lib = self._library(host.metal)
            for reg in lib.find(host.kernel):
                if reg.built and reg.in_type in METAL_TO_NAME:
                    dtypes.add(METAL_TO_NAME[reg.in_type])
        return dtypes

    def run_portable(self, name: str, variant: str, sample) -> PArray:
        """`run` on a sample of the reference cache (porter.harness.cached_run.Sample): numpy
        arrays, the promoted dtype per arity recorded with torch when it was cached."""
        host = self._select_named(name, variant, sample.kwargs)
        lib = self._library(host.metal)
        regs = [r for r in lib.find(host.kernel) if r.built]
        if not regs:
            raise RuntimeError(f"emulate: kernel {host.kernel!r} is not registered in {host.metal.name}")
        arity = ARITY[regs[0].kind]
        operands = [sample.input, *list(sample.args)[: arity - 1]]
        if any(not isinstance(x, (PArray, int, float, bool, complex)) for x in operands):
            raise RuntimeError(f"emulate: unsupported operands for {name}")
        common = sample.promoted.get(str(arity))
        if common is None:
            raise Unsupported(f"no recorded promotion for {arity} operands")
        metal = NAME_TO_METAL.get(common)
        reg = next((r for r in regs if r.in_type == metal), None)
        if reg is None:
            raise RuntimeError(f"Failed to create function state object for: "
                               f"{host.kernel} on {metal or 'torch.' + common}")
        tensors = [x if isinstance(x, PArray) else portable_scalar(x, common) for x in operands]
        alpha = None
        if reg.kind.endswith("alpha"):
            alpha = pack_alpha_np(reg.alpha_type, self._scalar(host, sample, reg))
        return nprun.run_registration(self._worker(), lib, reg, tensors, alpha)

    def run(self, opinfo, sample, dtype):
        import torch
        host = self._select(opinfo, sample)
        lib = self._library(host.metal)
        regs = [r for r in lib.find(host.kernel) if r.built]
        if not regs:
            raise RuntimeError(f"emulate: kernel {host.kernel!r} is not registered in {host.metal.name}")
        arity = ARITY[regs[0].kind]
        operands = [sample.input, *list(sample.args)[: arity - 1]]
        if any(not isinstance(x, (torch.Tensor, int, float, bool, complex)) for x in operands):
            raise RuntimeError(f"emulate: unsupported operands for {opinfo.name}")
        common = operands[0].dtype if arity == 1 else torch.result_type(*operands[:2]) \
            if arity == 2 else _result_type3(operands)
        reg = next((r for r in regs if r.in_type == metal_dtype(common)), None)
        if reg is None:
            # Metal has no such function: what the GPU reports as a missing state object
            raise RuntimeError(f"Failed to create function state object for: "
                               f"{host.kernel} on {metal_dtype(common) or common}")
        tensors = [x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=common)
                   for x in operands]
        alpha = None
        if reg.kind.endswith("alpha"):
            alpha = pack_alpha(reg.alpha_type, self._scalar(host, sample, reg))
        return run_registration(self._worker(), lib, reg, [t.cpu() for t in tensors], alpha)

    # ------------------------------------------------------------ helpers
    def _host_kernels(self, op: str) -> list[HostKernel]:
        return [h for h in self._host_kernels_all() if h.op == op]

    def _candidates(self, opinfo) -> list[HostKernel]:
        return self._candidates_named(opinfo.name, _variant(opinfo))

    def _candidates_named(self, name: str, variant: str) -> list[HostKernel]:
        hosts = self._host_kernels(name)
        if name == "round":
            # round.decimals_N runs round_decimals_stub; plain round runs round_stub
            wants_decimals = "decimals" in variant
            hosts = [h for h in hosts if (h.stub == "round_decimals") == wants_decimals]
        return hosts

    def _select(self, opinfo, sample) -> HostKernel:
        return self._select_named(opinfo.name, _variant(opinfo), sample.kwargs)

    def _select_named(self, name: str, variant: str, kwargs: dict) -> HostKernel:
        hosts = self._candidates_named(name, variant)
        if not hosts:
            raise RuntimeError(f"emulate: no Metal kernel is dispatched for {name} "
                               f"in the checkout's *Kernel.mm")
        if name == "div":
            want = DIV_KERNELS.get(kwargs.get("rounding_mode"))
            hosts = [h for h in hosts if h.kernel == want] or hosts
        return hosts[0]

    @staticmethod
    def _scalar(host: HostKernel, sample, reg):
        kwargs = sample.kwargs
        if host.stub == "round_decimals":
            return kwargs.get("decimals", 0)
        if "alpha" in kwargs and kwargs["alpha"] is not None:
            return kwargs["alpha"]
        return 1

    def focus(self, op_names) -> None:
        """Build only the kernels these ops (OpInfo names) dispatch to (porter.emulate.focus);
        call before the first run."""
        names = set(op_names)
        self._focus = {h.kernel for h in self._host_kernels_all() if h.op in names}
        self._libs.clear()

    def _host_kernels_all(self) -> list[HostKernel]:
        if self._host is None:
            self._host = host_kernels(self.root)
        return self._host

    def _library(self, metal: Path) -> Library:
        lib = self._libs.get(metal)
        if lib is None:
            if self._focus is None:
                lib = build_file(metal, self.root, strict=False)
            else:
                from porter.emulate.focus import focused_source
                try:
                    text = metal.read_text(encoding="utf-8")
                except OSError:
                    lib = build_file(metal, self.root, strict=False)   # its error message
                else:
                    lib = build_source(focused_source(text, self._focus), metal, self.root,
                                       strict=False)
            self._libs[metal] = lib
        return lib

    def _worker(self) -> WorkerClient:
        if self._client is None:
            self._client = WorkerClient()
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _variant(opinfo) -> str:
    return getattr(opinfo, "variant_test_name", "") or ""


def _result_type3(operands):
    import torch
    t = torch.result_type(operands[0], operands[1])
    return torch.promote_types(t, torch.result_type(operands[2], operands[0]))
