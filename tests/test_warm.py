"""Warm children answer like the parent would, and their failure costs only time."""

from __future__ import annotations

import os

import pytest

from porter import cli, templates, warm
from porter.torchgen_check import EntryValidator
from porter.warm import ChildUnavailable, WarmChild

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="warm children need fork")


@pytest.fixture(autouse=True)
def forking_allowed(monkeypatch):
    # Other suites switch forking off for their whole session (tests/reliability/conftest.py).
    monkeypatch.delenv("PORTER_NO_FORK", raising=False)


def test_child_answers_each_request_in_turn():
    with WarmChild(lambda: None, lambda r: r["x"] * 2) as child:
        assert [child.ask({"x": n}) for n in (1, 2, 3)] == [2, 4, 6]


def test_a_failing_request_or_dead_child_is_unavailable_not_an_error():
    with WarmChild(lambda: None, lambda r: 1 / r["x"]) as child:
        with pytest.raises(ChildUnavailable):
            child.ask({"x": 0})
        with pytest.raises(ChildUnavailable):      # closed after a failure: the caller works alone
            child.ask({"x": 1})
    with WarmChild(lambda: os._exit(3), lambda r: r) as child:
        with pytest.raises(ChildUnavailable):
            child.ask({})


def test_rendering_in_the_warm_child_gives_the_same_text():
    values = dict(op="foo", params=("a", "b"), float_body="return a;", int_body=None,
                  float_out="T", int_out="T")
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


def _doubler() -> WarmChild:
    return WarmChild(lambda: None, lambda r: r["x"] * 2)


def test_a_child_forked_early_is_the_one_adopted_and_the_rest_are_stopped():
    with warm.forked_early([_doubler, templates.warm_child]):
        early = warm._early[_doubler]
        unadopted = warm._early[templates.warm_child]
        child = warm.adopt(_doubler)
        assert child is early and child.ask({"x": 4}) == 8
        assert warm.adopt(_doubler) is not early          # taken once; a later ask starts anew
    assert unadopted._pid is None, "a child no command adopted outlived the command"
    child.close()


def test_an_editing_command_adopts_the_children_the_command_line_forked(monkeypatch, mini_root, capsys):
    starts = []
    real_start = WarmChild._start
    monkeypatch.setattr(WarmChild, "_start", lambda self, *a: (starts.append(a), real_start(self, *a)))
    assert cli.main(["new-op", "heaviside", "--dry-run", "--root", str(mini_root)]) == 0
    assert len(starts) == 2, "the validator and the renderer each forked a second child"
    assert not warm._early
