"""porter as a wheel carries every module, header and template, and finds its templates installed.

An editable install (the usual development setup) imports porter from the repository, where
`templates/` sits beside the package: it cannot show that a wheel carries them. So the wheel
is built here, with porter's own build backend (hatchling, in the `test` extra), and checked
file by file, then imported from its unpacked contents.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
IGNORED_SUFFIXES = (".pyc", ".porter-tmp", ".bak")


def _source_files(top: Path) -> dict[str, bytes]:
    """Files under `top` a checkout ships (relative path -> bytes), without .gitignore'd litter."""
    return {p.relative_to(top).as_posix(): p.read_bytes() for p in sorted(top.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(IGNORED_SUFFIXES)}


def _build_wheel(out: Path) -> Path:
    """The wheel, built by the PEP 517 hook pip would call (no network, well under a second)."""
    done = subprocess.run([sys.executable, "-c",
                           "import sys; from hatchling.build import build_wheel; "
                           "print(build_wheel(sys.argv[1]))", str(out)],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, ("building the wheel needs hatchling, porter's build backend "
                                  "(pip install -e '.[test]'):\n" + done.stderr)
    return out / done.stdout.strip().splitlines()[-1]


def test_wheel_carries_the_package_and_its_templates(tmp_path):
    wheel = _build_wheel(tmp_path / "dist")
    with zipfile.ZipFile(wheel) as z:
        files = {name: z.read(name) for name in z.namelist() if not name.endswith("/")}
        z.extractall(tmp_path / "site")
    shipped = {name[len("porter/"):]: data for name, data in files.items() if name.startswith("porter/")}
    templates = _source_files(REPO / "templates")
    assert templates and {f"templates/{name}" for name in templates} <= set(shipped)
    assert shipped == {**_source_files(REPO / "porter"),
                       **{f"templates/{name}": data for name, data in templates.items()}}
    entry_points = next(data for name, data in files.items() if name.endswith(".dist-info/entry_points.txt"))
    assert "porter = porter.cli:main" in entry_points.decode()

    # imported from the unpacked wheel, outside the repository: templates come from the package
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
            "import porter, porter.port.templates as t; "
            "text = t.render('skeleton_functor.metal.j2', op='x', reason='r', signature='const T a', out='T'); "
            "print(json.dumps([porter.__file__, str(t.template_dir()), 'x_functor' in text]))")
    done = subprocess.run([sys.executable, "-I", "-c", code, str(tmp_path / "site")], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    package_file, template_dir, rendered = json.loads(done.stdout)
    assert Path(package_file) == tmp_path / "site" / "porter" / "__init__.py"
    assert Path(template_dir) == tmp_path / "site" / "porter" / "templates"
    assert rendered


def test_installed_package_finds_every_template(tmp_path):
    # The porter this environment installed, whichever way (CI installs the wheel: `.ci/run`).
    # Run outside the repository so that the installed porter is imported, not ./porter.
    code = ("import json, porter, porter.port.templates as t; "
            "print(json.dumps([porter.__file__, str(t.template_dir()), "
            "sorted(p.name for p in t.template_dir().glob('*.j2'))]))")
    done = subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    package_file, template_dir, names = json.loads(done.stdout)
    package_dir = Path(package_file).parent
    editable = (package_dir.parent / "pyproject.toml").is_file()    # of this or another checkout
    source = package_dir.parent if editable else REPO
    assert names == sorted(p.name for p in (source / "templates").glob("*.j2"))
    if not editable:                    # a wheel install: templates inside the package
        assert Path(template_dir) == package_dir / "templates"
