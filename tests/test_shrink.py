"""The search-and-shrink loop on a rule-based verdict (the Spark version is in test_shrink_spark.py).

Here the "trial" is a rule about which schedules duplicate (a kill after the sink wrote, before the
commit), so the search logic, the budget and the cache are checked in milliseconds.
"""

from __future__ import annotations

from chaos.scenario.scenario import Scenario
from pipelines_under_test import resolve
from properties.shrink import search_violation
from properties.strategies import StreamSpec

STREAM = StreamSpec(events=1000, seed=1, events_per_batch=200)


def duplicates_after_sink_write(scenario: Scenario) -> dict:
    dup = any(f.action == "kill-driver" and f.phase == "sink-done" for f in scenario.faults)
    return {"verdict": "at-least-once" if dup else "exactly-once"}


def test_search_shrinks_to_one_kill_after_the_sink_wrote_and_prints_a_replay_command():
    calls: list[list[str]] = []

    def run(scenario):
        calls.append(scenario.specs)
        return duplicates_after_sink_write(scenario)

    found = search_violation(resolve("passthrough-append"), "exactly-once", STREAM, run, max_trials=60, seed=3)
    assert found.minimal is not None and found.minimal.specs == ["kill-driver@0:sink-done"]
    assert found.verdict == "at-least-once"
    assert found.command == "streamchaos trial passthrough-append --events 1000 --seed 1 " \
                            "--fault kill-driver@0:sink-done"
    assert len(calls) == len({tuple(c) for c in calls}), "a schedule ran twice: the cache failed"
    assert len(found.trials) == len(calls)


def test_budget_bounds_the_trials_and_keeps_the_best_violation_so_far():
    found = search_violation(resolve("passthrough-append"), "exactly-once", STREAM, duplicates_after_sink_write,
                             max_trials=4, seed=3)
    assert len(found.trials) <= 4
    if found.minimal is not None:
        assert any(t["violates"] for t in found.trials)


def test_no_violation_is_reported_as_such():
    found = search_violation(resolve("passthrough-idempotent"), "exactly-once", STREAM,
                             lambda s: {"verdict": "exactly-once"}, max_trials=5)
    assert found.minimal is None and found.command is None
    assert "no schedule of 5 trial(s) violated" in found.describe()
