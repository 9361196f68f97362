"""A contributor's first hour (issue 23): what the README promises holds as written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.porter_run import fallback_example_is, porter

REPO = Path(__file__).resolve().parents[1]

# Runs porter's CLI with one top-level module made unimportable, as in an environment that lacks it.
BLOCKER = textwrap.dedent("""
    import sys
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == sys.argv[1] or name.startswith(sys.argv[1] + "."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, Block())
    from porter.cli import main
    sys.exit(main(sys.argv[2:]))
""")


def _porter_without(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PORTER_CACHE_DIR": str(cwd / ".cache")}
    return subprocess.run([sys.executable, "-c", BLOCKER, module, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


# (expecttest is not here: the harness has a stand-in for it, tests/test_backward.py)
@pytest.mark.parametrize("module, package", [("numpy", "numpy")])
def test_a_missing_dependency_is_one_line_naming_the_install_exit_2(mini_root, module, package):
    done = _porter_without(module, "test", "neg", "--device", "emulate", "--no-cache", cwd=mini_root)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "internal error" not in done.stderr, done.stderr
    assert done.stderr.startswith("porter: error:") and f"(pip install {package})" in done.stderr
    assert done.stdout == ""


def test_a_missing_porter_module_is_still_an_internal_error(mini_root):
    # only third-party modules are an environment to fix; a missing module of porter's own is a bug
    done = _porter_without("porter.harness.session", "test", "neg", "--device", "emulate", cwd=mini_root)
    assert done.returncode == 70 and "internal error" in done.stderr, done.stderr


def test_the_dependencies_cover_what_test_and_formatting_import():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {d.split(">")[0].split("=")[0].strip() for d in project["dependencies"]}
    assert {"numpy", "expecttest", "clang-format", "PyYAML", "Jinja2"} <= names
    assert "torch" not in names       # the user's own install (README, "Set up")


@pytest.mark.slow
def test_device_auto_is_the_default_and_means_emulate_off_a_mac(mini_root, monkeypatch):
    from porter.commands import common

    monkeypatch.setattr(sys, "platform", "linux")
    assert common.resolve_device("auto") == "emulate" == common.resolve_device(None)
    assert common.resolve_device("cuda") == "cuda"
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr("platform.machine", lambda: "arm64")
    assert common.resolve_device("auto") == "mps"
    monkeypatch.undo()
    result = porter("test", "neg", "--dtype", "float32", root=mini_root)
    assert result.code == 0, result.err
    assert "device emulate" in result.out


def test_readme_links_only_to_files_that_exist():
    import re

    for doc in [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:]+)\)", doc.read_text()):
            assert (doc.parent / target).exists(), f"{doc.name} links to missing {target}"


def test_readme_reaches_a_green_test_within_120_lines():
    lines = (REPO / "README.md").read_text().splitlines()
    green = next(i for i, line in enumerate(lines) if line.startswith("summary:") and " 0 fail" in line)
    assert green < 120


@pytest.mark.parametrize("command", [["status"], ["new-op", "--dry-run"], ["migrate-from-mpsgraph", "--dry-run"]])
def test_dotted_opinfo_names_are_accepted_by_every_command(mini_root, command):
    # issue 23: `new-op nn.functional.threshold` said it "names one overload of 'nn'"
    dotted = porter(command[0], "nn.functional.threshold", *command[1:], root=mini_root)
    plain = porter(command[0], "threshold", *command[1:], root=mini_root)
    assert "overload" not in dotted.err
    assert (dotted.code, dotted.out, dotted.err) == (plain.code, plain.out, plain.err)
    dotted = porter(command[0], "special.log_ndtr", *command[1:], root=mini_root)
    plain = porter(command[0], "special_log_ndtr", *command[1:], root=mini_root)
    assert (dotted.code, dotted.out, dotted.err) == (plain.code, plain.out, plain.err)


def test_an_overload_is_still_refused_with_the_op_to_pass(mini_root):
    result = porter("new-op", "heaviside.out", "--dry-run", root=mini_root)
    assert result.code == 2 and "pass the op name, 'heaviside'" in result.err


# --- one CLI: formats, stderr, -q/-v, colour, width, progress ------------------------------------

def _name_mps_twice(root: Path) -> None:
    """One PORTER001 finding: sign.out names MPS twice."""
    yaml = root / "aten/src/ATen/native/native_functions.yaml"
    yaml.write_text(yaml.read_text().replace("    CPU, CUDA: sign_out\n", "    CPU, CUDA, MPS: sign_out\n", 1))


@pytest.mark.parametrize("args", [
    ("check", "--json", "--format", "markdown"),
    ("test", "neg", "--json", "--format", "junit"),
    ("status", "heaviside", "--format", "junit"),        # a format status does not write
    ("candidates", "--format", "yaml"),                   # no such format
    ("status", "heaviside", "-q", "-v"),
])
def test_conflicting_or_unknown_output_flags_are_bad_input(mini_root, args):
    result = porter(*args, root=mini_root)
    assert result.code == 2 and result.out == "" and result.err.startswith("porter: error:"), result
    assert result.err.count("\n") == 1


def test_json_is_an_alias_of_format_json_on_every_command(mini_root):
    for args in (("status", "heaviside"), ("candidates",), ("check",), ("new-op", "heaviside", "--dry-run")):
        alias, spelled = porter(*args, "--json", root=mini_root), porter(*args, "--format", "json", root=mini_root)
        assert (alias.code, alias.out) == (spelled.code, spelled.out), args
        json.loads(alias.out)
    human, text = porter("check", "--format", "human", root=mini_root), porter("check", root=mini_root)
    assert (human.code, human.out, human.err) == (text.code, text.out, text.err)


def test_notes_go_to_stderr_and_q_silences_them(mini_root):
    fallback_example_is(mini_root, "heaviside")
    result = porter("new-op", "heaviside", "--dry-run", root=mini_root)
    assert result.code == 0 and "note: test/test_mps.py:18:" in result.err and "note:" not in result.out
    quiet = porter("new-op", "heaviside", "--dry-run", "-q", root=mini_root)
    assert quiet.code == 0 and quiet.err == "" and quiet.out == result.out


def test_a_refused_run_prints_no_notes_about_the_plan_it_did_not_apply(mini_root):
    # special_ndtri needs --body: refused as incomplete, nothing written
    result = porter("new-op", "special_ndtri", root=mini_root)
    assert result.code == 1 and "note:" not in result.out + result.err
    assert result.err.startswith("porter: error: incomplete port of special_ndtri")


def test_colour_only_on_request_or_a_terminal(mini_root, monkeypatch):
    _name_mps_twice(mini_root)
    plain = porter("check", "--select", "PORTER001", root=mini_root)
    assert plain.code == 1 and "\x1b[" not in plain.out + plain.err      # not a terminal
    forced = porter("check", "--select", "PORTER001", "--color", "always", root=mini_root)
    assert "\x1b[31mPORTER001\x1b[0m" in forced.out
    assert "\x1b[" in porter("status", "nope", "--color", "always", root=mini_root).err
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in porter("check", "--select", "PORTER001", root=mini_root).out
    never = porter("check", "--select", "PORTER001", "--color", "never", root=mini_root)
    assert "\x1b[" not in never.out + never.err


def test_candidates_fit_columns(mini_root, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)     # pytest-xdist's workers may carry one
    wide = porter("candidates", root=mini_root).out
    assert max(map(len, wide.splitlines())) > 200          # piped without COLUMNS: never cut
    monkeypatch.setenv("COLUMNS", "80")
    narrow = porter("candidates", root=mini_root).out
    assert max(map(len, narrow.splitlines())) <= 80
    assert "FILES A PORT TOUCHES left out to fit 80 columns" in narrow
    # every op and its whole reason are still there
    assert " ".join(narrow.split()).count("whose str argument picks its kernel") == 2
    assert porter("candidates", "-v", root=mini_root).out == wide


def test_candidates_verify_shows_progress(mini_root, monkeypatch):
    from porter.harness import measure_port as verify_module

    class Verdict:
        status, detail, failed_dtype = "verified", "1/1 dtypes", None

        def to_json(self):
            return {"status": self.status}

    monkeypatch.setattr(verify_module, "verify", lambda *a, **k: Verdict())
    result = porter("candidates", "--verify", "-v", root=mini_root)
    assert result.code == 0
    steps = [line for line in result.err.splitlines() if line.startswith("porter candidates --verify")]
    table = [line for line in result.out.splitlines() if line.split()[1:2] in (["mpsgraph"], ["no-mps"])]
    assert len(steps) == len(table) > 10
    assert steps[-1].startswith(f"porter candidates --verify: planning, building and testing [{len(steps)}/{len(steps)}]")
    assert porter("candidates", "--verify", root=mini_root).err == ""      # not a terminal, no -v


def test_check_github_annotations(mini_root):
    _name_mps_twice(mini_root)
    result = porter("check", "--select", "PORTER001", "--format", "github", root=mini_root)
    assert result.code == 1
    line, = result.out.splitlines()
    assert line.startswith("::error file=aten/src/ATen/native/native_functions.yaml,line=")
    assert ",title=PORTER001 " in line


# --- failures you can read --------------------------------------------------------------------

@pytest.fixture
def wrong_heaviside(mini_root):
    """heaviside ported, then its functor planted wrong: a zero input answers `a`, not `b`."""
    assert porter("new-op", "heaviside", "--allow-dirty", root=mini_root).code == 0
    metal = mini_root / "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"
    text = metal.read_text()
    assert "return a == 0 ? b : static_cast<T>(a > 0);" in text
    metal.write_text(text.replace("return a == 0 ? b : static_cast<T>(a > 0);",
                                  "return a == 0 ? a : static_cast<T>(a > 0);"))
    return mini_root


@pytest.mark.slow
def test_a_wrong_functor_shows_the_inputs_and_values_of_its_first_mismatches(wrong_heaviside, tmp_path):
    result = porter("test", "heaviside", "--device", "emulate", "--dtype", "int32", root=wrong_heaviside)
    assert result.code == 1
    lines = result.out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split() == [
        "index", "input", "args[0]", "cpu", "device", "cpu", "bits", "device", "bits"])
    # heaviside(0, b) is b: the rows show a zero input, the expected b and the wrong 0
    first = lines[head + 1].split()
    assert first[1] == "0" and first[3] == first[2] and first[4] == "0", lines[head:head + 3]
    assert first[5] == "0x" + format(int(first[2]) & 0xFFFFFFFF, "08x") and first[6] == "0x00000000"
    assert "repro: porter test heaviside --device emulate --dtype int32 --sample" in lines[head + 2] + lines[head + 3]
    # the same rows in --json and JUnit, and from the cached and the ordinary run
    data = json.loads(porter("test", "heaviside", "--device", "emulate", "--dtype", "int32", "--json",
                             root=wrong_heaviside).out)
    rows = data["ops"][0]["dtypes"][0]["mismatches"]
    assert rows and rows[0]["inputs"]["input"] == "0" and rows[0]["device"] == "0"
    uncached = json.loads(porter("test", "heaviside", "--device", "emulate", "--dtype", "int32", "--json",
                                 "--no-cache", root=wrong_heaviside).out)
    assert uncached["ops"][0]["dtypes"][0]["mismatches"] == rows
    junit = porter("test", "heaviside", "--device", "emulate", "--dtype", "int32", "--format", "junit",
                   root=wrong_heaviside)
    assert junit.code == 1 and junit.out.startswith("<?xml") and "index  input  args[0]  cpu  device" in junit.out
    github = porter("test", "heaviside", "--device", "emulate", "--dtype", "int32", "--format", "github",
                    root=wrong_heaviside)
    assert github.code == 1 and github.out.startswith("::error title=porter test heaviside int32%3A fail::")


@pytest.mark.slow
def test_sample_n_prints_that_samples_shapes_and_arguments(wrong_heaviside):
    result = porter("test", "heaviside", "--device", "emulate", "--dtype", "int32", "--sample", "1",
                    root=wrong_heaviside)
    line = next(line for line in result.out.splitlines() if line.startswith("  sample 1 (int32): "))
    assert "input int32 (" in line and "args[0] int32 (" in line and "[" in line


@pytest.mark.slow
def test_a_right_functor_shows_no_mismatch_table(mini_root):
    assert porter("new-op", "heaviside", "--allow-dirty", root=mini_root).code == 0
    result = porter("test", "heaviside", "--device", "emulate", "--dtype", "int32", root=mini_root)
    assert result.code == 0 and "cpu bits" not in result.out
    data = json.loads(porter("test", "heaviside", "--device", "emulate", "--dtype", "int32", "--json",
                             root=mini_root).out)
    assert data["ops"][0]["dtypes"][0]["mismatches"] == []


@pytest.mark.slow
def test_test_says_it_is_running_with_v_off_a_terminal_and_nothing_otherwise(mini_root):
    loud = porter("test", "neg", "--device", "emulate", "--dtype", "float32", "-v", root=mini_root)
    assert loud.code == 0 and "porter test neg: running on emulate ...\n" in loud.err
    plain = porter("test", "neg", "--device", "emulate", "--dtype", "float32", root=mini_root)
    assert plain.code == 0 and "running on" not in plain.err


@pytest.mark.slow
def test_test_colours_its_verdicts_only_when_asked_off_a_terminal(mini_root):
    painted = porter("test", "neg", "--device", "emulate", "--dtype", "float32", "--color", "always",
                     root=mini_root)
    assert painted.code == 0 and "  float32  \x1b[32mpass\x1b[0m" in painted.out
    plain = porter("test", "neg", "--device", "emulate", "--dtype", "float32", root=mini_root)
    assert "\x1b[" not in plain.out and "  float32  pass" in plain.out


def test_mismatch_rows_name_cpu_and_device_and_show_the_samples_scalars():
    # torch's message calls the device's value "Expected": rows keyed expected/actual said the
    # opposite of it. A threshold sample's threshold and value decide the row: they are shown
    import torch

    from porter.harness.mismatches import rows, text

    x = torch.tensor([0.25, 2.0, 0.5], dtype=torch.float16)
    cpu, device = torch.tensor([-9.0, 2.0, -9.0], dtype=torch.float16), torch.tensor(
        [-9.0, 2.0, 0.5], dtype=torch.float16)
    found = rows([("input", x), ("threshold", 0.5), ("value", -9)], cpu, device, 0.0, 0.0)
    assert found == [{"index": [2], "inputs": {"input": "0.5", "threshold": "0.5", "value": "-9"},
                      "cpu": "-9.0", "device": "0.5", "cpu_bits": "0xc880", "device_bits": "0x3800"}]
    assert text(found)[0].split() == ["index", "input", "threshold", "value", "cpu", "device", "cpu",
                                      "bits", "device", "bits"]


def test_the_repro_of_a_reference_input_sample_runs_that_sample(mini_root):
    # the repro `--reference-inputs --sample 4` was refused: the plain run, which has 4
    # samples for float16, ran first and counted the index among its own
    result = porter("test", "nn.functional.threshold", "--device", "cpu", "--dtype", "float16",
                    "--reference-inputs", "--sample", "4", root=mini_root)
    assert result.code == 0, result.err
    assert "sample 4 (float16): input float16" in result.out and "threshold " in result.out
    assert "pass     1 " in result.out


def test_what_the_readme_says_of_a_port_without_torch_and_of_checks_summary(mini_root, tmp_path):
    # the README said "writing a port never imports torch", yet new-op on the miniature needs
    # the wheel's c10/metal headers; and showed `porter check: clean` as stdout (it is stderr)
    import subprocess
    import sys

    readme = (REPO / "README.md").read_text()
    assert "never imports torch" not in readme and "no c10/metal headers" in readme
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None\n")
    env = {"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "porter", "new-op", "heaviside", "--root", str(mini_root)],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "no c10/metal headers" in done.stderr
    clean = porter("check", root=mini_root)
    assert clean.out == "" and clean.err.startswith("porter check: clean (")
    assert "$ porter check                   # findings on stdout; this summary line on stderr" in readme


@pytest.mark.slow
def test_a_reference_input_failure_shows_the_float64_value_and_stays_red(wrong_heaviside):
    # porter's own reference inputs: the table adds the op's float64 value and which side is
    # within tolerance of it; the planted functor (heaviside(0, b) answers 0) is the side off
    result = porter("test", "heaviside", "--device", "emulate", "--dtype", "float32",
                    "--reference-inputs", root=wrong_heaviside)
    assert result.code == 1
    lines = result.out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:6] == [
        "index", "input", "args[0]", "cpu", "device", "float64"])
    first = lines[head + 1].split()
    # heaviside(0, b) is b: the CPU's b is the float64 value's (ten digits), the device's 0 not
    assert first[1] in ("0.0", "-0.0") and first[4] == first[1] != first[3]
    assert float(first[5]) == pytest.approx(float(first[3]), rel=1e-7)
    reading = next(line for line in lines[head:] if line.strip().startswith("float64 ("))
    assert "the CPU reference is within tolerance of it, the device is not: the kernel's" in reading
    assert "FAIL float32" in result.out
