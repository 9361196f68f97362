"""`porter emulate check`: build the Unary/Binary/Activation kernel files and compare every
registered (op, dtype) kernel with the torch op on CPU.

Statuses: matched, mismatched (max error shown), crashed (signal), build-error (the file
does not compile on a Mac either: a syntax error, a failed static_assert, a registration whose
output type is not the functor's result, a c10::metal function the checkout's own c10/metal
lacks), old-headers (a c10::metal function the installed torch's headers lack, used where the
checkout has no c10/metal: the file needs newer ones), unsupported (the compiler rejected a
construct the emulator lacks; the registration was quarantined), no-reference (no CPU op
of that name), error (the kernel ran but its inputs could not be prepared).
Matches use tolerances; bit-exactness is reported separately, since the host math library
is not Metal's.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from porter.source.checkout import KERNELS
from porter.emulate.build import BUILD_ERROR_PREFIXES, OLD_HEADERS, Library, Registration, build_file
from porter.emulate.client import KernelCrashed, KernelError, WorkerClient
from porter.emulate.references import alpha_for, reference
from porter.dispatch.kernel_choice import torch_dtype
from porter.emulate.torch_run import pack_alpha, run_registration

KERNEL_FILES = ("UnaryKernel.metal", "BinaryKernel.metal", "ActivationKernel.metal")

# (atol, rtol) per output dtype: torch.testing's defaults, loosened for GPU-vs-CPU libm
# differences in transcendental functions.
TOLERANCES = {"float": (1e-5, 1e-5), "half": (1e-3, 1e-3), "bfloat": (1e-2, 1.6e-2),
              "float2": (1e-5, 1e-5), "half2": (1e-3, 1e-3)}
# Kernels whose integer inputs must avoid 0 in the second operand (0 divisor: SIGFPE on
# the host, an error on CPU torch).
DIVISORS = {"div_floor", "div_trunc", "div_true", "remainder", "fmod"}
# Complex kernels whose result the host reads as real (abs of complex is a real tensor).
REAL_PART_KERNELS = {"abs"}


@dataclass
class Result:
    file: str
    kernel: str
    kind: str
    in_type: str
    out_type: str
    line: int
    status: str
    max_error: float | None = None
    bit_exact: bool | None = None
    reason: str = ""


def kernel_files(root: Path) -> list[Path]:
    return [root / KERNELS / name for name in KERNEL_FILES if (root / KERNELS / name).is_file()]


def check_tree(root: Path, files: list[Path] | None = None) -> tuple[list[Result], list[str]]:
    """Results per registration, and file-level notes (dropped constructs)."""
    results: list[Result] = []
    notes: list[str] = []
    client = WorkerClient()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)    # ComplexHalf is "experimental"
        return _check(root, files, client, results, notes)


def _check(root, files, client, results, notes):
    try:
        for path in files or kernel_files(root):
            lib = build_file(path, root, strict=False)
            notes += [f"dropped {d}" for d in lib.dropped]
            mine = [check_registration(client, lib, reg) for reg in lib.registrations]
            # kernels whose tokens differ under another __METAL_VERSION__ run as that version
            # builds them too (a row each, the version named in its file)
            for version in lib.other_versions:
                other = build_file(path, root, strict=False, version=version)
                rows = [check_registration(client, other, reg) for reg in other.registrations]
                for row in rows:
                    row.file = f"{row.file} (__METAL_VERSION__ {version})"
                mine += rows
            results += mine
            rel = str(path).replace(str(root).rstrip("/") + "/", "")
            broken = next((r for r in mine if r.status == "build-error"), None)
            errors = lib.build_errors()
            if broken is None and errors:
                # a Metal-language error outside any functor: no row carries it, the file does
                mine = [_file_broken(r, errors[0]) for r in mine]
                results[len(results) - len(mine):] = mine
                broken = mine[0] if mine else None
            if broken is not None or (errors and not mine):
                # the emulation quarantines the failing functor; a Mac's compiler stops at it,
                # and the file's library, every kernel of it, is not there at all
                matched = sum(r.status == "matched" for r in mine)
                why = broken.reason if broken is not None else errors[0]
                notes.append(f"{rel} does not build on a Mac ({why}): none of its "
                             f"{len(mine)} kernels runs there"
                             + (f"; its {matched} 'matched' kernels match only apart from that "
                                "error" if matched else ""))
    finally:
        client.close()
    return results, notes


def _file_broken(row: "Result", error: str) -> "Result":
    """A row of a file whose error lies outside every functor (an `#include <vector>`, a
    `double` helper): a Mac builds none of its kernels, so no row of it is a match."""
    if row.status == "build-error":
        return row
    return Result(row.file, row.kernel, row.kind, row.in_type, row.out_type, row.line,
                  "build-error", reason=error)


_EDGES = [0.0, 1.0, -1.0, 0.5, 2.0, -0.0, -0.5, 3.0, -3.0, 6.0, -6.0]


def sample_inputs(reg: Registration, n: int = 64, seed: int = 0) -> list:
    import torch
    gen = torch.Generator().manual_seed(seed)
    arity = {"unary": 1, "unary_alpha": 1, "binary": 2, "binary_alpha": 2, "ternary": 3,
             "ternary_alpha": 3}[reg.kind]
    dtype = torch_dtype(reg.in_type)
    out = []
    for k in range(arity):
        if dtype.is_complex:
            t = torch.complex(torch.randn(n, generator=gen), torch.randn(n, generator=gen)) * 2
            with warnings.catch_warnings():   # complex32 is "experimental" in torch
                warnings.simplefilter("ignore")
                out.append(t.to(dtype))
        elif dtype.is_floating_point:
            t = torch.rand(n, generator=gen) * 8 - 4
            # exact values where kernels branch (0 and -0, the thresholds of hardswish,
            # hardsigmoid, hardtanh and relu6, shrink's default lambda): random values never
            # land on them, and a `<` written for `<=` is wrong only there. Not NaN or the
            # infinities: upstream's kernels answer them unlike the CPU in 60 of 993 rows
            # (hypot, lgamma, remainder, the Chebyshev polynomials...), which a Mac's
            # test_output_match samples never send; a port's reference inputs do
            t[:len(_EDGES)] = torch.tensor(_EDGES)
            if k == 1:
                t = t.roll(2)
            if reg.name.startswith(("igamma", "polygamma")) or reg.name in ("zeta",):
                t = t.abs() + 0.25
            out.append(t.to(dtype))
        elif dtype == torch.bool:
            out.append(torch.rand(n, generator=gen) > 0.5)
        else:
            lo = 0 if dtype == torch.uint8 else -9
            t = torch.randint(lo, 10, (n,), generator=gen, dtype=torch.int64)
            if reg.name.startswith("bitwise_") and "shift" in reg.name and k == 1:
                t = t.abs() % 7
            if k == 1 and reg.name in DIVISORS:
                t[t == 0] = 3
            out.append(t.to(dtype))
        if dtype == torch.bool and k == 1 and reg.name in DIVISORS:
            out[-1] = torch.ones(n, dtype=torch.bool)
    return [t.reshape(8, n // 8) for t in out]


def _reference(reg: Registration, inputs: list, alpha):
    """CPU result in reg.out_type, or None when torch has no such op."""
    import torch
    fn = reference(reg.name)
    if fn is None:
        return None
    out_dtype = torch_dtype(reg.out_type)
    args = list(inputs) + ([alpha] if reg.kind.endswith("alpha") else [])
    try:
        return fn(*args).to(out_dtype)
    except (RuntimeError, TypeError, NotImplementedError):
        pass
    # CPU lacks the op for this dtype (half special functions, complex32): compute wider.
    def widen(t):
        if t.dtype in (torch.float16, torch.bfloat16):
            return t.float()
        if t.dtype == torch.complex32:
            return t.to(torch.complex64)
        if not t.dtype.is_floating_point and not t.dtype.is_complex and out_dtype.is_floating_point:
            return t.float()
        return t
    try:
        return fn(*[widen(t) for t in inputs], *args[len(inputs):]).to(out_dtype)
    except (RuntimeError, TypeError, NotImplementedError):
        return None


def compare(got, want, out_type: str) -> tuple[bool, float, bool, str]:
    """(matches within tolerance, max abs error, bit-exact, worst element described)."""
    import torch
    base = {"float2": "float", "half2": "half"}.get(out_type, out_type)
    if got.dtype.is_complex:
        # torch.isclose semantics: |got - want| <= atol + rtol * |want|, complex magnitudes
        g, w = got.to(torch.complex128), want.to(torch.complex128)
        g_nan, w_nan = g.isnan(), w.isnan()
        same = (g == w) | (g_nan & w_nan)
        diff = torch.where(same, torch.zeros(g.shape, dtype=torch.float64),
                           (g - w).abs().nan_to_num(nan=float("inf"), posinf=float("inf")))
        atol, rtol = TOLERANCES.get(base, (1e-5, 1e-5))
        bound = atol + rtol * w.abs().nan_to_num(nan=0.0, posinf=0.0)
        ok, exact = bool((diff <= bound).all()), bool(same.all())
        if diff.numel() == 0:
            return ok, 0.0, exact, ""
        i = int(diff.flatten().argmax())
        return ok, float(diff.flatten()[i]), exact, \
            f"(got {got.flatten()[i].item():.6g}, expected {want.flatten()[i].item():.6g})"
    if not got.dtype.is_floating_point:
        diff = (got.to(torch.int64) - want.to(torch.int64)).abs().double() if got.dtype != torch.bool \
            else (got != want).double()
        ok = exact = bool((diff == 0).all())
    else:
        g, w = got.double(), want.double()
        both_nan = g.isnan() & w.isnan()
        same = (g == w) | both_nan
        diff = torch.where(same, torch.zeros_like(g), (g - w).abs().nan_to_num(nan=float("inf"), posinf=float("inf")))
        atol, rtol = TOLERANCES.get(base, (1e-5, 1e-5))
        bound = atol + rtol * w.abs().nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)
        ok = bool((diff <= bound).all())
        exact = bool(same.all())
    if diff.numel() == 0:
        return ok, 0.0, exact, ""
    i = int(diff.flatten().argmax())
    err = float(diff.flatten()[i])
    worst = f"(got {got.flatten()[i].item():.6g}, expected {want.flatten()[i].item():.6g})"
    return ok, err, exact, worst


def check_registration(client: WorkerClient, lib: Library, reg: Registration) -> Result:
    res = Result(str(lib.source), reg.name, reg.kind, reg.in_type, reg.out_type, reg.line, "")
    functor_error = lib.functor_error(reg)
    if functor_error is not None:
        # g++ built it, a Metal compiler does not (`double`, `std::`, a 4.0-only branch)
        res.status, res.reason = "build-error", functor_error
        return res
    if not reg.built:
        reason = lib.reason(reg) or "not built"
        # a wrong output type or a syntax error stops the file compiling on a Mac as well;
        # "unsupported" is left for constructs beyond the emulator
        res.status = "build-error" if reason.startswith(BUILD_ERROR_PREFIXES) else \
            "old-headers" if reason.startswith(OLD_HEADERS) else "unsupported"
        res.reason = reason
        return res
    if torch_dtype(reg.in_type) is None or torch_dtype(reg.out_type) is None:
        res.status, res.reason = "no-reference", f"no torch dtype for {reg.in_type}->{reg.out_type}"
        return res
    inputs = sample_inputs(reg)
    alpha_value = alpha_for(reg.name, reg.alpha_type) if reg.kind.endswith("alpha") else None
    if "Params_" in (reg.alpha_type or "") and not isinstance(alpha_value, tuple):
        # a params struct porter has no field values for: nothing to run it with
        res.status, res.reason = "no-reference", (f"no values for the fields of {reg.alpha_type} "
                                                  f"(kernel {reg.name!r})")
        return res
    try:
        alpha = pack_alpha(reg.alpha_type, alpha_value) if alpha_value is not None else None
        got = run_registration(client, lib, reg, inputs, alpha)
        # the strided entry point on transposed views must agree with the dense one
        strided = run_registration(client, lib, reg, [t.t().contiguous().t() for t in inputs],
                                   alpha, force_strided=True)
    except KernelCrashed as err:
        res.status, res.reason = "crashed", str(err)
        return res
    except (KernelError, ValueError) as err:
        res.status, res.reason = "error", str(err)
        return res
    want = _reference(reg, inputs, alpha_value)
    if want is None:
        res.status, res.reason = "no-reference", f"no CPU torch op for kernel {reg.name!r} on {reg.in_type}"
        return res
    s_ok, _, s_exact, _ = compare(strided, got, reg.out_type)
    out_type = reg.out_type
    if reg.name in REAL_PART_KERNELS and got.dtype.is_complex:
        # the functor broadcasts |z| into both lanes; the host reads the real part only
        got, want = got.real.clone(), want.real.clone()
        out_type = {"float2": "float", "half2": "half"}[reg.out_type]
    ok, err, exact, worst = compare(got, want, out_type)
    res.max_error, res.bit_exact = err, exact
    if not (s_ok and s_exact):
        res.status, res.reason = "mismatched", "strided entry point differs from dense"
    elif ok:
        res.status = "matched"
    else:
        res.status = "mismatched"
        res.reason = f"max error {err:.3g} {worst}"
    return res


def summary(results: list[Result]) -> dict:
    total = len(results)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    matched = counts.get("matched", 0)
    exact = sum(1 for r in results if r.status == "matched" and r.bit_exact)
    # a kernel of a file that does not build on a Mac does not "build and match" there
    broken = {r.file for r in results if r.status == "build-error"}
    usable = sum(1 for r in results if r.status == "matched" and r.file not in broken)
    return {"registered": total, "counts": counts, "matched": matched,
            "matched_fraction": usable / total if total else 1.0, "bit_exact": exact,
            "matched_in_files_that_do_not_build": matched - usable}


def as_json(results: list[Result]) -> list[dict]:
    return [asdict(r) for r in results]
