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

from porter.emulate.build import EmulateBuildError, Library, build_file
from porter.emulate.client import WorkerClient
from porter.emulate.hostmap import HostKernel, host_kernels
from porter.emulate.runner import metal_dtype, pack_alpha, run_registration, torch_dtype

ARITY = {"unary": 1, "unary_alpha": 1, "binary": 2, "binary_alpha": 2, "ternary": 3}
# complex kernels whose result the host reads as real (abs of complex is a real tensor)
REAL_PART_KERNELS = {"abs"}
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

    # ------------------------------------------------------------ protocol
    def unavailable_reason(self) -> str | None:
        from porter.emulate import build
        try:
            build.compiler()
        except Exception as err:
            return f"--device emulate: {err}"
        return None

    def supported_dtypes(self, opinfo) -> None:
        """Every dtype the MPS test sends is run: a dtype without a kernel fails in `run`,
        with the message the GPU gives, as it fails on a Mac."""
        return None

    def registered_dtypes(self, opinfo) -> set:
        """torch dtypes whose (promoted) input the .metal registers a built kernel for."""
        dtypes = set()
        for host in self._candidates(opinfo):
            lib = self._library(host.metal)
            for reg in lib.find(host.kernel):
                if reg.built and torch_dtype(reg.in_type) is not None:
                    dtypes.add(torch_dtype(reg.in_type))
        return dtypes

    def skip_reason(self, opinfo) -> str | None:
        """Why porter cannot run the op at all, or None: its MPS path is no Metal kernel of
        a *Kernel.mm (still MPSGraph, or host code the emulator does not model)."""
        if self._candidates(opinfo):
            return None
        return (f"porter cannot run {opinfo.name} under the emulator: no *Kernel.mm of the "
                "checkout dispatches a Metal kernel for it (its MPS path is MPSGraph or host "
                "code porter does not model; `porter status` shows which)")

    def build_error(self, opinfo) -> str | None:
        """Why the op's kernel file would not compile on a Mac, or None. Every dtype fails
        then: one bad registration stops the whole .metal file."""
        for host in self._candidates(opinfo):
            try:
                lib = self._library(host.metal)
            except EmulateBuildError as err:
                return f"{self._rel(host.metal)} does not build: {self._rel(err.message)}"
            errors = lib.build_errors()
            if errors:
                more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
                return (f"{self._rel(host.metal)} does not build: "
                        f"{self._rel(errors[0])}{more}")
        return None

    def run(self, opinfo, sample, dtype):
        import torch
        host = self._select(opinfo, sample)
        lib = self._library(host.metal)
        regs = lib.find(host.kernel)
        if not regs:
            raise RuntimeError(f"no kernel {host.kernel!r} registered in {host.metal.name}: MPS "
                               f"raises 'Failed to create function state object for: "
                               f"{host.kernel}'")
        arity = ARITY[regs[0].kind]
        operands = [sample.input, *list(sample.args)[: arity - 1]]
        if any(not isinstance(x, (torch.Tensor, int, float, bool, complex)) for x in operands):
            raise RuntimeError(f"emulate: unsupported operands for {opinfo.name}")
        common = operands[0].dtype if arity == 1 else torch.result_type(*operands[:2]) \
            if arity == 2 else _result_type3(operands)
        want_out = _output_dtype(opinfo, sample)
        matching = [r for r in lib.find(host.kernel) if r.in_type == metal_dtype(common)]
        reg = next((r for r in matching if r.built and _out_matches(r, want_out, host)), None)
        if reg is None:
            raise RuntimeError(self._missing(host, lib, matching, common, want_out))
        tensors = [x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=common)
                   for x in operands]
        alpha = None
        if reg.kind.endswith("alpha"):
            alpha = pack_alpha(reg.alpha_type, self._scalar(host, sample, reg))
        out = run_registration(self._worker(), lib, reg, [t.cpu() for t in tensors], alpha)
        if want_out is not None and out.is_complex() and not want_out.is_complex:
            out = out.real.clone()    # |z| broadcast into both lanes; the host reads one
        return out

    # ------------------------------------------------------------ helpers
    def _missing(self, host: HostKernel, lib: Library, matching: list, common, want_out) -> str:
        """The failure a Mac reports for a (kernel, dtype) the .metal lacks or cannot build."""
        out = want_out if want_out is not None else common
        name = f"{host.kernel}_{_torch_name(common)}_{_torch_name(out)}"
        unbuilt = [r for r in matching if not r.built]
        if unbuilt:
            return f"kernel {name} does not build: {self._rel(lib.reason(unbuilt[0]) or '?')}"
        have = ", ".join(f"{_torch_name(torch_dtype(r.in_type))}->{_torch_name(torch_dtype(r.out_type))}"
                         for r in matching)
        where = f" (registered: {have})" if have else ""
        return (f"no kernel {name} registered in {host.metal.name}{where}: MPS raises "
                f"'Failed to create function state object for: {name}'")

    def _rel(self, text) -> str:
        return str(text).replace(str(self.root) + "/", "")

    def _host_kernels(self, names: set[str]) -> list[HostKernel]:
        if self._host is None:
            self._host = host_kernels(self.root)
        return [h for h in self._host if h.op in names]

    def _candidates(self, opinfo) -> list[HostKernel]:
        # the stub is named after the aten op (mish_stub), the OpInfo may not be
        # (nn.functional.mish): either names the kernel
        names = {opinfo.name, getattr(opinfo, "aten_name", None) or opinfo.name,
                 opinfo.name.removeprefix("nn.functional.")}
        hosts = self._host_kernels(names)
        if opinfo.name == "round":
            # round.decimals_N runs round_decimals_stub; plain round runs round_stub
            wants_decimals = "decimals" in (getattr(opinfo, "variant_test_name", "") or "")
            hosts = [h for h in hosts if (h.stub == "round_decimals") == wants_decimals]
        return hosts

    def _select(self, opinfo, sample) -> HostKernel:
        hosts = self._candidates(opinfo)
        if not hosts:
            raise RuntimeError(f"emulate: no Metal kernel is dispatched for {opinfo.name} "
                               f"in the checkout's *Kernel.mm")
        if opinfo.name == "div":
            want = DIV_KERNELS.get(sample.kwargs.get("rounding_mode"))
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

    def _library(self, metal: Path) -> Library:
        lib = self._libs.get(metal)
        if lib is None:
            try:
                lib = self._libs[metal] = build_file(metal, self.root, strict=False)
            except EmulateBuildError as err:      # remembered: one compile per session
                self._libs[metal] = err
                raise
        if isinstance(lib, EmulateBuildError):
            raise lib
        return lib

    def _worker(self) -> WorkerClient:
        if self._client is None:
            self._client = WorkerClient()
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _output_dtype(opinfo, sample):
    """The dtype the op's meta function gives the output (bool for logical ops, float for
    int->float math): the host looks the kernel up by it. None when it cannot be told."""
    import torch
    from porter.harness.backend import to_device
    for device in ("meta", "cpu"):
        try:
            moved = to_device(sample, device)
            out = opinfo(moved.input, *moved.args, **moved.kwargs)
        except Exception:
            continue
        if isinstance(out, torch.Tensor):
            return out.dtype
        return None
    return None


def _out_matches(reg, want_out, host) -> bool:
    if want_out is None or reg.out_type == metal_dtype(want_out):
        return True
    # complex abs: a float2 kernel whose real lane the host reads as the real result
    return (host.kernel in REAL_PART_KERNELS and torch_dtype(reg.out_type) is not None
            and torch_dtype(reg.out_type).is_complex and not want_out.is_complex)


def _torch_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _result_type3(operands):
    import torch
    t = torch.result_type(operands[0], operands[1])
    return torch.promote_types(t, torch.result_type(operands[2], operands[0]))
