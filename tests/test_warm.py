"""Warm children answer like the parent would, and their failure costs only time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from porter import cli

from porter.port import templates

from porter.runtime import warm
from porter.port.torchgen_check import EntryValidator
from porter.runtime.warm import ChildUnavailable, Service, WarmChild

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="warm children need fork")


@pytest.fixture(autouse=True)
def forking_allowed(monkeypatch):
    # Other suites switch forking off for their whole session (tests/reliability/conftest.py).
    monkeypatch.delenv("PORTER_NO_FORK", raising=False)


def test_child_answers_each_request_in_turn():
    with WarmChild(Service("double", lambda: None, lambda r: r["x"] * 2)) as child:
        assert [child.ask("double", {"x": n}) for n in (1, 2, 3)] == [2, 4, 6]


def test_a_failing_request_or_dead_child_is_unavailable_not_an_error():
    with WarmChild(Service("invert", lambda: None, lambda r: 1 / r["x"])) as child:
        with pytest.raises(ChildUnavailable):
            child.ask("invert", {"x": 0})
        with pytest.raises(ChildUnavailable):      # closed after a failure: the caller works alone
            child.ask("invert", {"x": 1})
    with WarmChild(Service("echo", lambda: os._exit(3), lambda r: r)) as child:
        with pytest.raises(ChildUnavailable):
            child.ask("echo", {})
    with WarmChild(Service("echo", lambda: None, lambda r: r)) as child:
        with pytest.raises(ChildUnavailable):       # a service it was not started with
            child.ask("double", {})


def test_a_warm_service_answers_while_a_later_one_is_still_warming_up(tmp_path):
    gate = tmp_path / "slow-may-finish"

    def slow_warm_up():
        while not gate.exists():      # warms up until the parent has had its fast answer
            time.sleep(0.01)

    with WarmChild(Service("fast", lambda: None, lambda r: "fast"),
                   Service("slow", slow_warm_up, lambda r: "slow"),
                   Service("broken", lambda: 1 / 0, lambda r: "never")) as child:
        assert child.ask("fast", {}) == "fast"
        gate.touch()
        assert child.ask("slow", {}) == "slow"
        with pytest.raises(ChildUnavailable):        # its warm-up failed: the caller does it
            child.ask("broken", {})


def test_rendering_in_the_warm_child_gives_the_same_text():
    values = dict(op="foo", params=("a", "b"), one_body=None, float_body="return a;",
                  int_body=None, float_out="T", int_out="T", complex_body=None, complex_out="T")
    here = templates.render("binary_functor.metal.j2", **values)
    with templates.rendered_in_warm_child():
        assert templates.render("binary_functor.metal.j2", **values) == here


def test_validator_child_and_in_process_agree(monkeypatch):
    bad = [{"name": "x.out", "line": 1, "path": "native_functions.yaml",
            "text": "- func: x.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n  dispatch:\n    Mps: x_out\n"}]
    with EntryValidator() as warm:
        forked = warm.check(bad, None)
    monkeypatch.setenv("PORTER_NO_FORK", "1")
    with EntryValidator() as alone:
        assert alone.check(bad, None) == forked
    assert len(forked) == 1 and "torchgen rejects 'x.out'" in forked[0]["error"]


DOUBLE = Service("double", lambda: None, lambda r: r["x"] * 2)


def test_the_early_child_is_shared_by_the_services_it_runs_and_stopped_after():
    with warm.forked_early([DOUBLE, templates.RENDERING]):
        early = warm._early
        child, owned = warm.child_for(DOUBLE)
        assert child is early and not owned and child.ask("double", {"x": 4}) == 8
        assert warm.child_for(templates.RENDERING)[0] is early
        other, owned = warm.child_for(Service("triple", lambda: None, lambda r: 3 * r["x"]))
        assert other is not early and owned
        other.close()
    assert early._pid is None, "the early child outlived the command"


def _dry_run(root, capsys) -> str:
    capsys.readouterr()
    assert cli.main(["new-op", "heaviside", "--dry-run", "--root", str(root)]) == 0
    return capsys.readouterr().out


@pytest.fixture
def dry_run_alone(monkeypatch, mini_root, capsys) -> str:
    """`new-op heaviside --dry-run` output with forking off: what a warm child must not change."""
    monkeypatch.setenv("PORTER_NO_FORK", "1")
    out = _dry_run(mini_root, capsys)
    monkeypatch.delenv("PORTER_NO_FORK")
    assert "+++ b/aten/src/ATen/native/native_functions.yaml" in out and "MPS: heaviside_out" in out
    return out


def test_an_editing_command_forks_one_child_for_everything(monkeypatch, mini_root, capsys, dry_run_alone):
    starts = []
    real_start = WarmChild._start
    monkeypatch.setattr(WarmChild, "_start", lambda self, *a: (starts.append(a), real_start(self, *a)))
    assert _dry_run(mini_root, capsys) == dry_run_alone
    assert [[s.name for s in services] for services, in starts] == [["render", "validate"]]
    assert warm._early is None


LAZY_PROBE = r"""
import json, sys
from porter.port import torchgen_check
if sys.argv[1] == "eager":
    import torchgen.api.cpp
shared = "- func: sign.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n  structured: True\n  structured_inherits: TensorIteratorBase\n  dispatch:\n    CPU, CUDA, MPS: sign_out\n"
composite = "- func: foo(Tensor self) -> Tensor\n  dispatch:\n    CompositeImplicitAutograd: foo\n"
verdicts = [torchgen_check._validate([{"name": "e", "line": 1, "path": "y", "text": shared}], None)]
loaded = "torchgen.api.types" in sys.modules
verdicts.append(torchgen_check._validate([{"name": "e", "line": 1, "path": "y", "text": composite}], None))
print(json.dumps({"verdicts": verdicts, "types_loaded_for_shared": loaded}))
"""


def test_torchgens_cpp_api_loads_only_for_entries_that_need_it_with_the_same_verdicts():
    runs = {mode: json.loads(subprocess.run([sys.executable, "-c", LAZY_PROBE, mode], capture_output=True,
                                            text=True, check=True).stdout)
            for mode in ("eager", "lazy")}
    assert runs["lazy"]["verdicts"] == runs["eager"]["verdicts"]
    assert runs["lazy"]["verdicts"][0] == []
    assert "unnecessary dispatch table" in runs["lazy"]["verdicts"][1][0]["error"]
    assert runs["lazy"]["types_loaded_for_shared"] is False


def test_a_fork_that_fails_leaves_the_work_to_the_parent(monkeypatch, mini_root, capsys):
    forked = _dry_run(mini_root, capsys)       # rendered and validated in the warm child

    def no_fork():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    with WarmChild(DOUBLE) as child:
        with pytest.raises(ChildUnavailable):
            child.ask("double", {"x": 1})
    assert _dry_run(mini_root, capsys) == forked
    assert "+++ b/aten/src/ATen/native/native_functions.yaml" in forked and "MPS: heaviside_out" in forked
