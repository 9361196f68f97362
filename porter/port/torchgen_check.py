"""torchgen's validation of single `native_functions.yaml` entries, warmed up in parallel.

Importing torchgen's model and PyYAML costs ~0.07 s, as much as half of porter's planning:
the import happens in a warm child (porter.runtime.warm) while the parent resolves and plans; the
parent then sends the changed entries and reads back the verdicts, or validates in-process
when no child is available.

`NativeFunction.from_yaml` imports `torchgen.api.cpp` (and with it torchgen's C++ type model,
another ~0.04 s) on every call, but uses it only for entries without a backend dispatch row
or with a CompositeImplicitAutograd one. porter registers that module as a lazy one
(`importlib.util.LazyLoader`): it loads on first use, so an entry that needs it gets exactly
the verdict of an eager import, and the usual CPU/CUDA/MPS entry never pays for it.
"""

from __future__ import annotations

import importlib.util
import sys

from porter.runtime import warm
from porter.runtime.warm import ChildUnavailable, Service
from porter.source.checkout import TAGS_YAML




def _validate(requests: list[dict], tags_text: str | None) -> list[dict]:
    """Verdicts for entries: {"name", "line", "error"} for each rejected one (with "path"
    when the fault lies in another file than native_functions.yaml)."""
    _load_on_first_use("torchgen.api.cpp")
    import yaml
    from torchgen.model import Location, NativeFunction

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    tags = set()
    if tags_text:
        try:
            listed = yaml.load(tags_text, Loader=loader) or []
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            return [{"name": "", "path": TAGS_YAML, "line": mark.line + 1 if mark else None,
                     "error": f"not valid YAML: {getattr(err, 'problem', None) or err}"}]
        if not isinstance(listed, list):
            return [{"name": "", "path": TAGS_YAML, "line": None,
                     "error": "not a list of `- tag:` entries"}]
        tags = {t["tag"] for t in listed if isinstance(t, dict) and isinstance(t.get("tag"), str)}
    verdicts = []
    for req in requests:
        try:
            loaded = yaml.load(req["text"], Loader=loader)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            verdicts.append({"name": req["name"], "line": req["line"] + (mark.line if mark else 0),
                             "error": f"edited entry is not valid YAML: {getattr(err, 'problem', err)}"})
            continue
        if not (isinstance(loaded, list) and loaded and isinstance(loaded[0], dict)):
            verdicts.append({"name": req["name"], "line": req["line"],
                             "error": "edited entry is not a YAML mapping"})
            continue
        try:
            NativeFunction.from_yaml(dict(loaded[0]), Location(req["path"], req["line"]), tags)
        except Exception as err:        # torchgen reports problems as AssertionError
            message = " ".join(str(err).split()) or type(err).__name__
            verdicts.append({"name": req["name"], "line": req["line"],
                             "error": f"torchgen rejects '{req['name']}': {message}"})
    return verdicts


def _warm_up() -> None:
    _load_on_first_use("torchgen.api.cpp")
    import torchgen.model  # noqa: F401
    import yaml  # noqa: F401


def _load_on_first_use(name: str) -> None:
    """Register module `name` so that importing it costs nothing until an attribute is used."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, module)


VALIDATION = Service("validate", _warm_up, lambda r: _validate(r["entries"], r["tags"]))


def warm_services() -> list[Service]:
    """What a warm child needs to validate entries (nothing without torchgen)."""
    return [VALIDATION] if importlib.util.find_spec("torchgen") is not None else []


class EntryValidator:
    """Start early with `EntryValidator()`; `check(...)` as often as needed; `close()`."""

    def __init__(self) -> None:
        self.available = importlib.util.find_spec("torchgen") is not None
        self._child, self._owned = warm.child_for(VALIDATION) if self.available else (None, False)

    def check(self, entries: list[dict], tags_text: str | None) -> list[dict]:
        """entries: {"name", "line", "path", "text"}. Returns the rejected ones."""
        if not self.available:
            return []
        try:
            return self._child.ask(VALIDATION.name, {"entries": entries, "tags": tags_text})
        except ChildUnavailable:
            return _validate(entries, tags_text)

    def close(self) -> None:
        if self._owned:
            self._child.close()

    def __enter__(self) -> "EntryValidator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
