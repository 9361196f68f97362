"""What a check reports: a `Finding` with a stable id, a location, one line of message and a hint.

Ids never change meaning once released (users put them in `--skip` lists and CI configs);
a retired check keeps its number unused.
"""

from __future__ import annotations

from dataclasses import dataclass

ERROR, WARNING = "error", "warning"

# id -> (name, severity, one-line description for `porter check --list`)
CHECKS: dict[str, tuple[str, str, str]] = {
    "PORTER001": ("duplicate-mps-key", ERROR,
                  "a yaml entry names MPS in two dispatch rows (torchgen keeps the last silently)"),
    "PORTER002": ("undefined-mps-function", ERROR,
                  "an `MPS: x_mps` row names a function no mps/ source defines"),
    "PORTER003": ("orphan-mps-function", ERROR,
                  "an MPSGraph TORCH_IMPL_FUNC or `<op>_mps` function that no yaml row names any more"),
    "PORTER010": ("unregistered-kernel", ERROR,
                  "a host file runs a Metal kernel its paired .metal file does not register"),
    "PORTER011": ("kernel-missing-dtypes", ERROR,
                  "a Metal kernel is registered for fewer dtypes than its op's MPS OpInfo sends"),
    "PORTER012": ("duplicate-kernel-name", ERROR,
                  "two registrations instantiate the same Metal host_name"),
    "PORTER013": ("unreachable-functor", ERROR,
                  "a functor sits in a .metal file that no host file can load (JIT pairing)"),
    "PORTER014": ("skeleton-functor", ERROR,
                  "porter's failing skeleton functor is still in place"),
    "PORTER020": ("undeclared-stub", ERROR,
                  "REGISTER_DISPATCH names a stub no DECLARE_DISPATCH declares"),
    "PORTER021": ("stub-registered-twice", ERROR,
                  "one DispatchStub is registered by two MPS host registrations"),
    "PORTER022": ("stub-signature-mismatch", ERROR,
                  "the registered kernel's parameters differ from the stub's function type"),
    "PORTER023": ("unregistered-mps-stub", ERROR,
                  "the yaml sends MPS to a shared kernel whose DispatchStub no MPS host file registers"),
    "PORTER024": ("host-kernel-runs-nothing", ERROR,
                  "a registered MPS host function reaches no exec_*_kernel call (commented out, "
                  "compiled out, after its return)"),
    "PORTER030": ("unknown-expectation-key", ERROR,
                  "a common_mps.py key names no OpInfo (name + variant_test_name)"),
    "PORTER031": ("stale-unimplemented-xfail", WARNING,
                  "an UNIMPLEMENTED_XFAILLIST entry for an op that now has an MPS kernel"),
    "PORTER032": ("fallback-example-has-kernel", ERROR,
                  "test_mps.py's TestFallbackWarning names, as its op without an MPS kernel, an op "
                  "that now has one"),
    "PORTER040": ("torchgen-rejects-yaml", ERROR,
                  "torchgen's parse_native_yaml rejects native_functions.yaml"),
    "PORTER050": ("fast-math-in-functor", ERROR,
                  "a functor calls `fast::`/`metal::fast::` math, less accurate than the CPU reference"),
    "PORTER051": ("nan-dropping-min-max", ERROR,
                  "a functor calls Metal's min/max/clamp on floats, which drop a NaN the CPU propagates"),
    "PORTER052": ("duplicate-c10-metal-helper", WARNING,
                  "a kernel file defines a helper c10/metal already has (same name and signature)"),
    "PORTER053": ("bfloat-outside-version-guard", ERROR,
                  "a bfloat registration outside the file's `#if __METAL_VERSION__` guard"),
}


@dataclass(frozen=True)
class Finding:
    id: str                  # "PORTER001"
    path: str                # relative to the checkout root
    line: int | None
    message: str
    hint: str
    op: str | None = None    # the aten op (or kernel) it concerns, for --changed-since

    @property
    def name(self) -> str:
        return CHECKS[self.id][0]

    @property
    def severity(self) -> str:
        return CHECKS[self.id][1]

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.line or 0, self.id, self.message)

    def human(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        text = f"{where}: {self.id} {self.name}: {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text.replace("\n", " ")

    def to_json(self) -> dict:
        return {"id": self.id, "name": self.name, "severity": self.severity, "path": self.path,
                "line": self.line, "message": self.message, "hint": self.hint, "op": self.op}

    def lint_message(self) -> dict:
        """lintrunner's LintMessage (one JSON object per line on stdout)."""
        description = f"[{self.id}] {self.message}" + (f" ({self.hint})" if self.hint else "")
        return {"path": self.path, "line": self.line, "char": None, "code": "PORTER",
                "severity": self.severity, "name": self.name,
                "original": None, "replacement": None, "description": description}


def resolve_ids(values: list[str] | None, option: str) -> set[str]:
    """Check ids from `PORTER001`, `duplicate-mps-key` or a comma-separated mix of both."""
    from porter.errors import PorterError

    by_name = {name: cid for cid, (name, _, _) in CHECKS.items()}
    out: set[str] = set()
    for value in values or []:
        for item in filter(None, (v.strip() for v in value.split(","))):
            cid = item.upper() if item.upper() in CHECKS else by_name.get(item)
            if cid is None:
                raise PorterError(f"{option} {item}: no such check",
                                  hint="porter check --list shows the ids and names")
            out.add(cid)
    return out
