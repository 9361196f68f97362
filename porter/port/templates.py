"""Jinja2 templates of generated Metal and host code.

The templates live in the repository's top-level `templates/`; a wheel carries them as
`porter/templates/` (see pyproject.toml). Both places are searched.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from porter.runtime import warm
from porter.runtime.warm import ChildUnavailable, Service, WarmChild


def template_dir() -> Path:
    package = Path(__file__).resolve().parent.parent          # porter/
    for candidate in (package / "templates", package.parent / "templates"):
        if candidate.is_dir():
            return candidate
    raise RuntimeError("porter's templates are missing from the installation")


@lru_cache(maxsize=None)
def _environment():
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(template_dir())),
                              keep_trailing_newline=True, undefined=jinja2.StrictUndefined,
                              autoescape=False, bytecode_cache=_bytecode_cache(jinja2))


def _bytecode_cache(jinja2):
    """Compiled templates cached on disk: compiling costs ~10 ms a template, loading ~0.1 ms."""
    from porter.runtime.cache_dir import cache_dir

    directory = cache_dir("templates")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None          # a read-only home: compile every time
    return jinja2.FileSystemBytecodeCache(str(directory))


def render(name: str, **values) -> str:
    if _warm_renderer is not None:
        try:
            return _warm_renderer.ask(RENDERING.name, {"template": name, "values": values})
        except ChildUnavailable:
            pass
    return _render_here(name, values)


def _render_here(name: str, values: dict) -> str:
    return _environment().get_template(name).render(**values)


_warm_renderer: WarmChild | None = None


RENDERING = Service("render", _environment, lambda r: _render_here(r["template"], r["values"]))


def warm_services() -> list[Service]:
    return [RENDERING]


@contextmanager
def rendered_in_warm_child():
    """Within this block, templates render in a child that imported Jinja2 while the parent
    worked (porter.runtime.warm); the output is the same as rendering here."""
    global _warm_renderer
    child, owned = warm.child_for(RENDERING)
    _warm_renderer = child
    try:
        yield
    finally:
        _warm_renderer = None
        if owned:
            child.close()
