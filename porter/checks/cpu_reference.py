"""Whether the CPU reference porter compares with is this checkout's CPU kernel of an op.

porter's reference is the installed torch's CPU, built from the base a pull request forks from
at best. A pull request that changes the op's CPU kernel (hypot's lambda given `+ 1`) is then
compared with the old kernel, and a Metal port of the new one would be "red" or, worse, a port
that disagrees with the new CPU kernel "green". So CI's run (`porter test --changed-since REF`,
the workflow `porter ci init` writes) and `porter pr` ask, per op, what the change since REF did
to the CPU side:

- nothing on the CPU side changed: the reference stands (as far as the base is the wheel's);
- a changed line sits in the CPU kernel function registered for one of the op's stubs
  (`REGISTER_DISPATCH(hypot_stub, &hypot_kernel)` in native/cpu/*.cpp), at REF or now: the
  reference is not this checkout's;
- a changed line sits in another op's registered kernel function only: it does not reach this op;
- any other CPU-side change (a helper, a header, native/*.cpp, c10/util, any C++ source of
  ATen, c10 or torch/csrc outside the MPS backend, c10/metal and the CUDA/HIP folders): porter
  cannot tell whether the op's kernel calls it, so the reference is not proven to be this
  checkout's.

Either of the last two reds is "not proven" (exit 1), naming the line, never green.
"""

from __future__ import annotations

import re

from porter.source import checkout as co
from porter.source import native_yaml
from porter.source.cpp_scan import code_mask, line_of, matching_close
from porter.source.cpu_kernel import shared_function_stubs
from porter.source.native_definitions import impl_stubs

# the files a CPU kernel is built from: its kernel file, the shared functions of native/*.cpp,
# the headers they include, and c10's scalar math (c10::complex, BFloat16, Half); and every
# other C++ source of ATen, c10 and torch/csrc, which the build compiles into the library the
# CPU reference runs (review 26's CP2: a new aten/src/ATen/*.cpp was read by nothing), but the
# MPS backend's own (porter parses those as a Mac builds them), c10/metal (the Metal front end
# reads it) and the CUDA/HIP-only folders, which no Mac builds (a `cuda` folder elsewhere, such
# as torch/csrc/jit/codegen/cuda, holds CPU code: review 28's C03)
CPU_SIDE = re.compile(r"^(?:aten/src/ATen/native/(?:cpu/[^/]+|[^/]+\.(?:cpp|h))"
                      r"|aten/src/ATen/cpu/.+|c10/util/.+"
                      r"|(?!aten/src/ATen/(?:native/)?(?:mps|cuda|hip|miopen|cudnn)/|c10/(?:metal|cuda|hip)/"
                      r"|torch/csrc/cuda/)"
                      r"(?:aten/src/ATen|c10|torch/csrc)/.+\.(?:cpp|cc|c|h|hpp))$")
REGISTER_RE = re.compile(r"\b(?:ALSO_REGISTER_AVX512_|REGISTER_ARCH_|REGISTER_)DISPATCH\(\s*(\w+)\s*,"
                         r"\s*&?\s*([\w:]+)\s*\)")


def cpu_side(path: str) -> bool:
    return bool(CPU_SIDE.match(path))


def _aten(op: str) -> str:
    """`nn.functional.softplus` -> `softplus`, `special.erfcx` -> `special_erfcx`."""
    for prefix in ("nn.functional.",):
        if op.startswith(prefix):
            return op[len(prefix):].split(".")[0]
    if op.startswith(("special.", "linalg.")):
        return op.replace(".", "_", 1).split(".")[0]
    return op.split(".")[0]


def op_stubs(checkout: co.Checkout, op: str) -> set[str]:
    """The DispatchStubs whose CPU kernels compute `op`: `<op>_stub`, those its structured CPU
    kernel's TORCH_IMPL_FUNC calls, and those its shared function runs."""
    name = _aten(op)
    entries = native_yaml.entries_named(checkout.read(co.NATIVE_YAML), {name, f"{name}_"})
    kernels = {r.kernel for e in entries for r in e.dense_rows() if "CPU" in r.keys}
    stubs = {f"{name}_stub"}
    for rel in checkout.glob(co.NATIVE, "*.cpp"):
        text = checkout.read(rel)
        if any(k in text for k in kernels):
            for kernel, found in impl_stubs(text).items():
                if kernel in kernels:
                    stubs |= set(found)
    for e in entries:
        try:
            stubs |= set(shared_function_stubs(checkout, e))
        except Exception:       # noqa: BLE001 (a source porter cannot read: the stub name stands)
            pass
    return stubs


def kernel_spans(text: str) -> dict[str, list[tuple[int, int]]]:
    """stub -> (first line, last line) of each CPU kernel function a file registers for it."""
    mask = code_mask(text)
    spans: dict[str, list[tuple[int, int]]] = {}
    for m in REGISTER_RE.finditer(mask):
        fn = m.group(2).split("::")[-1]
        d = re.search(rf"^[ \t]*(?:static\s+)?(?:inline\s+)?void\s+{re.escape(fn)}\s*\([^)]*\)\s*\{{", mask, re.M)
        if d is None:
            continue
        close = matching_close(mask, d.end() - 1)
        spans.setdefault(m.group(1), []).append((line_of(text, d.start()), line_of(text, close)))
    return spans


def _code_changed(checkout: co.Checkout, old_text, rel: str) -> bool:
    """Whether the change of `rel` is more than comments and blank space (review 25's H9: a
    comment added to native/Gelu.h made every op's reference "not proven"); a side porter
    cannot read counts as changed."""
    from porter.source.cpp_scan import code_changed
    try:
        return code_changed(old_text(rel), checkout.read(rel))
    except Exception:       # noqa: BLE001 (added, deleted or unreadable: a change)
        return True


def not_this_checkouts(checkout: co.Checkout, changes, ops: list[str], old_text) -> dict[str, str]:
    """op -> why its CPU reference is not proven to be this checkout's, for the ops where it is
    not. `changes`: porter.checks.changed.Changes since REF; `old_text(rel)`: a file at REF."""
    sides = []          # (path, line, which side, text of that side)
    for rel, lines in changes.lines.items():
        if cpu_side(rel) and lines:
            sides.append((rel, sorted(lines), "now"))
    for rel, lines in changes.removed.items():
        if cpu_side(rel) and lines:
            sides.append((rel, sorted(lines), f"at {changes.ref}"))
    for rel in sorted(changes.deleted_files):
        if cpu_side(rel):
            sides.append((rel, [1], f"at {changes.ref}"))
    sides = [s for s in sides if s[0] in changes.deleted_files or _code_changed(checkout, old_text, s[0])]
    if not sides:
        return {}
    hits: list[tuple[str | None, str]] = []      # (stub or None: unattributed, where)
    for rel, lines, side in sorted(sides, key=lambda s: (s[2] != "now", s[0])):   # now first
        text = None
        if rel.startswith(f"{co.CPU_KERNELS}/") and rel.endswith(".cpp"):
            try:
                text = checkout.read(rel) if side == "now" else old_text(rel)
            except Exception:       # noqa: BLE001 (deleted, unreadable: unattributed)
                text = None
        spans = kernel_spans(text) if text else {}
        for line in lines:
            where = f"{rel}:{line} ({side})"
            owners = [stub for stub, found in spans.items() if any(a <= line <= b for a, b in found)]
            if owners:
                hits += [(stub, where) for stub in owners]
            else:
                hits.append((None, where))
    out = {}
    for op in ops:
        stubs = op_stubs(checkout, op)
        mine = [where for stub, where in hits if stub in stubs]
        loose = [where for stub, where in hits if stub is None]
        if mine:
            out[op] = (f"the CPU reference is not this checkout's: the change since {changes.ref} "
                       f"edits {op}'s CPU kernel ({mine[0]}), and porter compares with the "
                       "installed torch's CPU")
        elif loose:
            out[op] = (f"the CPU reference may not be this checkout's: the change since "
                       f"{changes.ref} edits CPU code porter cannot tie to one op's kernel "
                       f"({loose[0]}), and porter compares with the installed torch's CPU")
    return out
