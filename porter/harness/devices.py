"""Devices the harness runs an op on.

A backend takes a CPU `SampleInput`, runs the OpInfo's op on its device and returns the
result moved back to the CPU; the runner computes the CPU reference and compares. New devices
(the Metal emulator, a test double) plug in through `register_backend`.
"""

from __future__ import annotations

from typing import Callable, Protocol

from porter.dispatch.kernel_choice import to_cpu, to_device
from porter.errors import PorterError

# dtypes an MPS device has (no float64 / complex128); `emulate` stands in for MPS
MPS_DTYPE_NAMES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                   "float32", "complex64")


class Backend(Protocol):
    name: str
    # the device_type whose OpInfo dtypes and DecorateInfos apply ("mps" for emulate)
    device_type: str
    # whether common_mps.py expectations apply
    mps_expectations: bool

    def unavailable_reason(self) -> str | None: ...

    def supported_dtypes(self, opinfo) -> set | None: ...

    def run(self, opinfo, sample, dtype): ...


def mps_dtypes() -> set:
    import torch
    return {getattr(torch, n) for n in MPS_DTYPE_NAMES}


class TorchDeviceBackend:
    """A real torch device: cuda, mps, or cpu (cpu compares CPU against CPU: overhead only)."""

    def __init__(self, device: str, as_mps: bool = False):
        self.name = f"{device}-mps" if as_mps else device
        self.device = device
        # as_mps: run on `device` but with MPS dtypes, DecorateInfos and expectations
        # (cpu-mps is a diagnostic stand-in: every expectation entry xpasses)
        self.device_type = "mps" if as_mps else device
        self.mps_expectations = as_mps or device == "mps"

    def unavailable_reason(self) -> str | None:
        import torch
        if self.device == "cuda" and not torch.cuda.is_available():
            return f"--device cuda: torch {torch.__version__} sees no CUDA device"
        if self.device == "mps" and not torch.backends.mps.is_available():
            return (f"--device mps: torch {torch.__version__} sees no MPS device (Apple silicon only; "
                    "elsewhere --device emulate runs the Metal kernels on this CPU)")
        return None

    def supported_dtypes(self, opinfo) -> set | None:
        return mps_dtypes() if self.device_type == "mps" else None

    def run(self, opinfo, sample, dtype):
        if getattr(sample, "keeps_layout", False):      # --shapes: the view, not a copy of it
            from porter.harness.shapes import to_device as keeping_layout
            s = keeping_layout(sample, self.device)
        else:
            s = to_device(sample, self.device)
        args = list(s.args)
        # tensor_split's indices tensor must stay on the CPU (as upstream)
        if opinfo.name == "tensor_split" and args and hasattr(args[0], "device"):
            args[0] = sample.args[0]
        out = opinfo(s.input, *args, **s.kwargs)
        if self.device == "cuda":
            import torch
            torch.cuda.synchronize()
        return to_cpu(out)


_FACTORIES: dict[str, Callable[[object], Backend]] = {}


def register_backend(name: str, factory: Callable[[object], Backend]) -> None:
    """`factory(root)` builds the backend; later registrations replace earlier ones."""
    _FACTORIES[name] = factory


def _emulate(root):
    if root is None:        # the other devices test the installed torch; this one the tree's kernels
        raise PorterError("--device emulate runs a checkout's Metal kernels, and none was found",
                          hint="run from a PyTorch checkout or pass --root DIR")
    try:
        from porter.emulate.emulator_device import EmulateBackend
    except ImportError:
        raise PorterError("emulate backend not available",
                          hint="porter.emulate.emulator_device.EmulateBackend is missing") from None
    return EmulateBackend(root)


def _mps_shader(root):
    if root is None:        # like emulate: it compiles a checkout's .metal files
        raise PorterError("--device mps-shader compiles a checkout's Metal kernels, and none was found",
                          hint="run from a PyTorch checkout or pass --root DIR")
    from porter.harness.mps_shader_device import MpsShaderBackend
    return MpsShaderBackend(root)


register_backend("cuda", lambda root: TorchDeviceBackend("cuda"))
register_backend("mps", lambda root: TorchDeviceBackend("mps"))
register_backend("cpu", lambda root: TorchDeviceBackend("cpu"))
register_backend("cpu-mps", lambda root: TorchDeviceBackend("cpu", as_mps=True))
register_backend("emulate", _emulate)
register_backend("mps-shader", _mps_shader)

# devices a user picks; `cpu` and `cpu-mps` are diagnostic (overhead measurement, audits
# without a Mac) and not advertised
PUBLIC_DEVICES = ("mps", "cuda", "emulate", "mps-shader")


def get_backend(name: str, root=None) -> Backend:
    factory = _FACTORIES.get(name)
    if factory is None:
        raise PorterError(f"unknown device {name!r}",
                          hint=f"choose one of auto (the default: mps on a Mac, else emulate), "
                               f"{', '.join(PUBLIC_DEVICES)}")
    backend = factory(root)
    for attr, default in (("device_type", "mps" if name in ("emulate", "mps-shader") else name),
                          ("mps_expectations", name in ("mps", "emulate", "mps-shader"))):
        if not hasattr(backend, attr):
            try:
                setattr(backend, attr, default)
            except AttributeError:
                pass
    return backend
