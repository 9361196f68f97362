"""The scenarios the reliability suite runs: every editing command on every op of its state,
on each tree. A clean run that fails is an error of the fixture (harness.discover), so a
scenario cannot quietly drop out; a tree that cannot be built is a skip that says why."""

from __future__ import annotations

import pytest

from tests.reliability import harness


@pytest.mark.parametrize("tree", ["mini", "real"])
@pytest.mark.slow      # every editing command on every op of a tree
def test_every_scenario_runs_on_each_tree(tree, request):
    found = request.getfixturevalue(f"{tree}_scenarios")
    assert sorted((sc.command, sc.op) for sc in found) == sorted(
        (command, op) for command, ops in harness.OPS_FOR.items() for op in ops)
    assert len(found) == harness.expected_scenarios() == 9
    assert {sc.label for sc in found} == {tree}


def test_every_editing_command_has_scenarios_or_a_reason():
    assert set(harness.editing_commands()) == set(harness.OPS_FOR) | harness.NOT_SCENARIOS
