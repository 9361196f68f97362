"""A re-run completes a half-applied edit: the reason porter needs no journal (porter/changes.py).

A SIGKILL between two replaces leaves a prefix of the apply order new and the rest old (and
the restore after a failed replace walks back down the same order, so it leaves prefixes
too). For every prefix of every editing scenario, re-running the command must produce
exactly the tree of a clean run, and one more run must say "nothing to do".
"""

from __future__ import annotations

import pytest

from tests.reliability import harness


def _prefixes(sc: harness.Scenario) -> list[list[str]]:
    order = [path for _, step, path in sc.steps if step == "replace"]
    return [order[:k] for k in range(1, len(order))]


@pytest.mark.slow      # every editing command's scenario (~15 s to learn them)
def test_every_prefix_of_the_apply_order_replans_to_the_same_tree(mini_scenarios, request):
    scenarios = list(mini_scenarios)
    if harness.SOAK:         # the soak asked for the real-size tree: skipped, saying why, without it
        scenarios += request.getfixturevalue("real_scenarios")
    failures, checked = [], 0
    for sc in scenarios:
        for prefix in _prefixes(sc):
            sc.reset()
            for rel in prefix:
                (sc.tree / rel).write_bytes(sc.new[rel])
            problems = harness.rerun_completes(sc)
            checked += 1
            if problems:
                failures.append(f"{sc.name} with {', '.join(p.rsplit('/', 1)[-1] for p in prefix)} "
                                f"already written: {'; '.join(problems)}")
        sc.reset()
    harness.report("replan", {"scenarios": len(scenarios), "prefixes": checked,
                              "failures": len(failures)})
    assert checked, "no scenario has two files to write"
    assert not failures, "\n".join(failures)


def test_apply_order_puts_marked_files_last(tmp_path):
    from porter.apply.changes import ChangeSet

    cs = ChangeSet(tmp_path)
    for name in ("a", "b", "c", "d"):
        cs.set(name, None, name)
    cs.apply_last("b")
    cs.apply_last("a")
    assert [c.path for c in cs._in_apply_order()] == ["c", "d", "b", "a"]
    assert [line.split()[-1] for line in cs.status_lines()] == ["a", "b", "c", "d"]
    assert cs.apply() == ["c", "d", "b", "a"]
    assert (tmp_path / "a").read_text() == "a"
