"""Validate planned texts before anything is written.

- Each changed `native_functions.yaml` entry goes through torchgen's own model
  (`NativeFunction.from_yaml`, ~1 ms an entry, see torchgen_check.py); the whole-file parse
  is `porter check`'s job.
- Cross-row facts torchgen does not check: one MPS key per entry, the MPS kernel is the
  shared CPU/CUDA kernel, no MPS on a structured delegate.
- Edited Python parses (the OpInfo slice only, for the 1.3 MB op database).
- The kernel the host stub runs is registered in the paired `.metal` file, and the stub is
  registered once across the host files.
"""

from __future__ import annotations

import ast

from porter.source import checkout as co
from porter.source import native_yaml
from porter.errors import PorterError
from porter.source.host_scan import HostFile
from porter.source.metal_scan import MetalFile
from porter.port.torchgen_check import EntryValidator


def yaml_entries(new_text: str, changed_names: set[str], tags_text: str | None,
                 validator: EntryValidator | None = None) -> None:
    bases = {name.split(".")[0] for name in changed_names}
    entries = {e.full_name: e for e in native_yaml.entries_named(new_text, bases)
               if e.full_name in changed_names}
    for entry in entries.values():
        mps = [r for r in entry.dispatch for k in r.keys if k == "MPS"]
        if len(mps) > 1:
            raise PorterError(f"'{entry.full_name}' would name MPS {len(mps)} times",
                              path=co.NATIVE_YAML, line=mps[1].lineno)
        if entry.structured_delegate and mps:
            raise PorterError(f"'{entry.full_name}' is a structured delegate and cannot carry MPS",
                              path=co.NATIVE_YAML, line=mps[0].lineno)
        dense = {r.kernel for r in entry.dense_rows()}
        if mps and dense and mps[0].kernel not in dense:
            raise PorterError(f"'{entry.full_name}': MPS runs {mps[0].kernel}, CPU/CUDA run "
                              f"{', '.join(sorted(dense))}", path=co.NATIVE_YAML, line=mps[0].lineno)
    requests = [{"name": e.full_name, "line": e.lineno, "path": co.NATIVE_YAML,
                 "text": "".join(e.lines)} for e in entries.values()]
    rejected = (validator or EntryValidator()).check(requests, tags_text)
    if rejected:
        first = rejected[0]
        raise PorterError(first["error"], path=first.get("path") or co.NATIVE_YAML,
                          line=first["line"])


def python_slice(text: str, start: int, end: int, path: str) -> None:
    try:
        ast.parse("(" + text[start:end] + "\n)", mode="eval")
    except SyntaxError as err:
        raise PorterError(f"edit would break the Python syntax: {err.msg}", path=path,
                          line=text.count("\n", 0, start) + (err.lineno or 1)) from None


def python_file(text: str, path: str) -> None:
    try:
        ast.parse(text)
    except SyntaxError as err:
        raise PorterError(f"edit would break the Python syntax: {err.msg}", path=path,
                          line=err.lineno) from None


def kernel_registered(metal_text: str, metal_path: str, kernel: str) -> None:
    if not any(r.kernel == kernel for r in MetalFile(metal_text).registrations):
        raise PorterError(f"the host stub runs kernel '{kernel}', which {metal_path} does not register",
                          path=metal_path)


def stub_registered_once(host_texts: dict[str, str], stub: str) -> None:
    places = [(path, r.line) for path, text in host_texts.items()
              for r in HostFile(text).dispatch_registrations if r.stub == stub]
    if len(places) > 1:
        (p1, l1), (p2, l2) = places[:2]
        raise PorterError(f"{stub} would be registered twice ({p1}:{l1} and {p2}:{l2})",
                          path=p2, line=l2, hint="remove one registration")
