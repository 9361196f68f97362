"""Validate planned texts before anything is written.

- Each changed `native_functions.yaml` entry goes through torchgen's own model
  (`NativeFunction.from_yaml`, ~1 ms an entry); the whole-file parse is `porter check`'s job.
- Cross-row facts torchgen does not check: one MPS key per entry, the MPS kernel is the
  shared CPU/CUDA kernel, no MPS on a structured delegate.
- Edited Python parses (the OpInfo slice only, for the 1.3 MB op database).
- The kernel the host stub runs is registered in the paired `.metal` file, and the stub is
  registered once across the host files.
"""

from __future__ import annotations

import ast
import functools

from porter import checkout as co
from porter import native_yaml
from porter.errors import PorterError
from porter.host_scan import HostFile
from porter.metal_scan import MetalFile


def yaml_entries(new_text: str, changed_names: set[str], tags_text: str | None) -> None:
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
        _torchgen_entry(entry, tags_text)


def _torchgen_entry(entry: native_yaml.Entry, tags_text: str | None) -> None:
    try:
        from torchgen.model import Location, NativeFunction
    except ImportError:
        return      # torchgen ships with torch; without it `porter check` says so
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        loaded = yaml.load("".join(entry.lines), Loader=loader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = entry.lineno + (mark.line if mark else 0)
        raise PorterError(f"edited entry is not valid YAML: {getattr(err, 'problem', err)}",
                          path=co.NATIVE_YAML, line=line) from None
    if not isinstance(loaded, list) or not isinstance(loaded[0], dict):
        raise PorterError("edited entry is not a YAML mapping", path=co.NATIVE_YAML, line=entry.lineno)
    try:
        NativeFunction.from_yaml(dict(loaded[0]), Location(co.NATIVE_YAML, entry.lineno),
                                 _valid_tags(tags_text))
    except (AssertionError, Exception) as err:      # torchgen reports by AssertionError
        message = " ".join(str(err).split()) or type(err).__name__
        raise PorterError(f"torchgen rejects '{entry.full_name}': {message}",
                          path=co.NATIVE_YAML, line=entry.lineno) from None


@functools.lru_cache(maxsize=4)
def _valid_tags(tags_text: str | None) -> set[str]:
    if not tags_text:
        return set()
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return {t["tag"] for t in yaml.load(tags_text, Loader=loader) or [] if "tag" in t}


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
