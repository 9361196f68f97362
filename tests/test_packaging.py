"""The installed porter finds its templates, whichever way it was installed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_installed_package_finds_every_template(tmp_path):
    # Run outside the repository so that the installed porter is imported, not ./porter.
    code = ("import json, porter, porter.port.templates as t; "
            "print(json.dumps([porter.__file__, str(t.template_dir()), "
            "sorted(p.name for p in t.template_dir().glob('*.j2'))]))")
    done = subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    package_file, template_dir, names = json.loads(done.stdout)
    assert names == sorted(p.name for p in (REPO / "templates").glob("*.j2"))
    package_dir = Path(package_file).parent
    if package_dir != REPO / "porter":       # a normal (wheel) install: templates inside the package
        assert Path(template_dir) == package_dir / "templates"
