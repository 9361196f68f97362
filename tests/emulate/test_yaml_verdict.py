"""torchgen's verdict on the checkout's native_functions.yaml (porter.emulate.yaml_verdict):
what a Mac's build runs before anything else, asked once per content."""

from __future__ import annotations

import pytest

pytest.importorskip("torchgen")

from porter.checks import torchgen_child  # noqa: E402
from porter.emulate import yaml_verdict  # noqa: E402
from porter.source.checkout import NATIVE_YAML  # noqa: E402


def test_torchgen_is_asked_once_per_content(mini_root, monkeypatch, tmp_path):
    monkeypatch.setenv("PORTER_CACHE_DIR", str(tmp_path / "cache"))
    asked = []
    parse = torchgen_child.parse_raw
    monkeypatch.setattr(torchgen_child, "parse_raw", lambda root: asked.append(root) or parse(root))
    assert yaml_verdict.rejection(mini_root) is None
    assert yaml_verdict.rejection(mini_root) is None
    assert len(asked) == 1                   # the second run read the recorded verdict

    yaml = mini_root / NATIVE_YAML
    text = yaml.read_text()
    row = next(line for line in text.splitlines() if line.startswith("    CPU, CUDA, MPS: "))
    yaml.write_text(text.replace(row, row.replace(": ", " ", 1), 1))
    said = yaml_verdict.rejection(mini_root)
    assert len(asked) == 2 and said is not None
    assert said.startswith(f"{NATIVE_YAML} does not build: torchgen rejects it ({NATIVE_YAML}:")
    assert "dispatch is not a dict" in said

    yaml.write_text(text)                    # back as it was: the first verdict, not asked again
    assert yaml_verdict.rejection(mini_root) is None and len(asked) == 2
