"""Campaign plans and the greedy shrinker: deterministic, coverage-first, Hypothesis' order. No Spark."""

from __future__ import annotations

import pytest

from chaos.errors import UserError
from chaos.spec import parse_fault
from properties.planning import applicable_actions, coverage, parse_kinds, plan_schedules, stable_seed
from properties.shrink import shrink_schedule

KILLS = applicable_actions(["kill"], sink_channel=False, database=False, owns_workers=True)


def test_kinds_parse_and_reject_unknown():
    assert parse_kinds("kill,channel") == ("kill", "channel")
    assert parse_kinds(None) == ("kill",)
    with pytest.raises(UserError, match="bogus.*kill, pause, channel, checkpoint, db"):
        parse_kinds("kill,bogus")


def test_actions_follow_pipeline_and_cluster():
    assert KILLS == ("kill-driver", "kill-executor", "kill-worker")
    assert applicable_actions(["kill", "db"], sink_channel=False, database=False, owns_workers=False) == (
        "kill-driver", "kill-executor")
    channel = applicable_actions(["channel"], sink_channel=False, database=False, owns_workers=True)
    assert channel and all(a.endswith("-source") for a in channel)
    assert applicable_actions(["channel", "kill"], sink_channel=False, database=False, owns_workers=True,
                              source_channel=False) == KILLS  # a source of its own: no source channel
    assert "kill-sink-db" in applicable_actions(["db"], sink_channel=True, database=True, owns_workers=True)


def test_plan_is_deterministic_coverage_first_and_starts_with_examples():
    a = plan_schedules(10, KILLS, 5, seed=7, examples=["kill-driver@3:sink-done"])
    assert a == plan_schedules(10, KILLS, 5, seed=7, examples=["kill-driver@3:sink-done"])
    assert a[0] == ["kill-driver@3:sink-done"] and len(a) == 5
    assert a != plan_schedules(10, KILLS, 5, seed=8, examples=["kill-driver@3:sink-done"])
    for schedule in a:
        for spec in schedule:
            assert parse_fault(spec).batch < 10
    # Coverage first: no two planned schedules repeat an (action, phase) pair while new ones remain.
    pairs = [coverage([s]) for s in a]
    assert sum(len(p) for p in pairs) == len(coverage(a))


def test_campaign_example_of_issue_covers_the_duplicating_kill():
    """``campaign run --pipeline passthrough-append --trials 5 --seed 1``: its plan kills the driver at sink-done."""
    plan = plan_schedules(10, KILLS, 5, seed=stable_seed(1, "passthrough-append"))
    assert ("kill-driver", "sink-done") in coverage(plan)


def test_shrink_finds_minimal_in_hypothesis_order_within_budget():
    tried: list[list[str]] = []

    def violates(faults: list[str]) -> bool:
        tried.append(faults)
        return any(f.startswith("kill-driver@") and f.endswith(":sink-done") for f in faults)

    start = ["kill-executor@2:reading", "kill-driver@7:sink-done"]
    assert shrink_schedule(start, violates, budget=20) == ["kill-driver@0:sink-done"]
    assert tried[0] == ["kill-driver@7:sink-done"]  # dropping a fault comes first
    assert len(tried) == len({tuple(t) for t in tried})  # no candidate twice
    first = list(tried)
    again: list[list[str]] = []
    shrink_schedule(start, lambda f: again.append(f) or violates(f), budget=20)
    assert again == first  # the same path every time: a resumed shrink finds its candidates in the cache
    small: list[list[str]] = []
    shrink_schedule(start, lambda f: small.append(f) or violates(f), budget=2)
    assert len(small) == 2


def test_shrink_simplifies_action_within_its_kind():
    def violates(faults: list[str]) -> bool:
        return any(f.startswith("kill-") for f in faults)

    assert shrink_schedule(["kill-worker@4:committed"], violates, actions=KILLS, budget=30) == [
        "kill-driver@0:planned"]
