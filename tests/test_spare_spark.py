"""Spare drivers on a real cluster: each trial's first driver boots during the previous trial's tail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.machine.processes import tagged_processes
from chaos.run.harness import Harness
from chaos.run.judge import judge
from chaos.scenario.scenario import Scenario

# The long tier (pytest -m long): every trial on the session's harness (chaos_harness) starts on a spare or a
# recycled driver and takes over with a standby; these check each way in detail.
pytestmark = [pytest.mark.spark, pytest.mark.long]


def driver_starts(run_dir: Path) -> list[dict]:
    lines = (run_dir / "history.jsonl").read_text().splitlines()
    return [r["detail"] for r in map(json.loads, lines) if r["kind"] == "driver" and r["detail"]["event"] == "start"]


def test_a_spare_is_the_next_trials_first_driver(spark_cluster, tmp_path):
    """Without recycling: each trial's first driver is a spare booted in the previous trial's tail."""
    with Harness(cluster=spark_cluster.master_url, workdir=tmp_path / "harness", spare=True,
                 recycle=False) as harness:
        first = tmp_path / "first"
        harness.trial(Scenario(pipeline="passthrough-append", events=600, events_per_batch=200, seed=3,
                               faults=["kill-driver@1:sink-done"]), first)
        second = tmp_path / "second"
        harness.trial(Scenario(pipeline="passthrough-append", events=600, events_per_batch=200, seed=4), second,
                      last=True)
        tag = harness.owned.tag
        spares = sorted(p.name for p in (tmp_path / "harness" / "spares").iterdir())
    assert tagged_processes(tag) == [], "the harness left processes behind"

    # The first trial's driver 0 was the spare booted with the harness; the killed one restarted cold.
    starts = driver_starts(first)
    assert starts[0]["spare"] == "spare-1" and "spare" not in starts[1]
    # the replayed batch 1, as with a cold driver 0
    assert judge(first)["verdict"] == "at-least-once"
    # The second trial's driver 0 was booted during the first trial's tail, and ran it exactly once.
    assert driver_starts(second)[0]["spare"] == "spare-2"
    assert judge(second)["verdict"] == "exactly-once"
    # Its log is the run directory's own file, not a link into the harness's spares.
    log = second / "logs" / "driver-0.log"
    assert log.is_file() and not log.is_symlink()
    assert "spare driver runs" in log.read_text()
    # As the last trial, the second got no spare-3 (a pipeline with JVM hooks starting cold: the next test).
    assert spares == ["spare-1", "spare-2"]


def test_a_trials_last_driver_is_recycled_as_the_next_trials_first(spark_cluster, tmp_path):
    """The driver that ends a trial (a cold restart after a kill, here) runs the next trial's first
    incarnation in a fresh session of its application, with the same verdict a cold driver gives; a
    pipeline with JVM hooks cannot take it and starts cold; the last trial's driver is not kept."""
    with Harness(cluster=spark_cluster.master_url, workdir=tmp_path / "harness", spare=True) as harness:
        first, second, hooked = tmp_path / "first", tmp_path / "second", tmp_path / "hooked"
        harness.trial(Scenario(pipeline="passthrough-append", events=600, events_per_batch=200, seed=3,
                               faults=["kill-driver@1:sink-done"]), first)
        kept = harness.spares.driver
        assert kept is not None and kept.group.alive() and kept.folder.name.startswith("recycled-")
        # The killed driver's scratch files (its lz4 library, blockmgr-*) went with it; the kept one's stay.
        assert sorted(p.name for p in harness.tmp.iterdir()) == [f"driver-{kept.group.pid}"]
        harness.trial(Scenario(pipeline="passthrough-append", events=600, events_per_batch=200, seed=4), second)
        harness.trial(Scenario(pipeline="passthrough-file", events=400, events_per_batch=200, seed=5), hooked,
                      last=True)
        assert harness.spares.driver is None
        tag = harness.owned.tag
        spares = sorted(p.name for p in (tmp_path / "harness" / "spares").iterdir())
    assert tagged_processes(tag) == [], "the harness left processes behind"

    restarted = driver_starts(first)[1]
    assert "spare" not in restarted  # the cold restart after the kill
    assert judge(first)["verdict"] == "at-least-once"
    start = driver_starts(second)[0]
    assert start["spare"] == f"recycled-{restarted['pid']}" and start["pid"] == restarted["pid"]
    assert judge(second)["verdict"] == "exactly-once"
    # Each run directory keeps the part of the process's log written during its own trial.
    mine, before = (second / "logs" / "driver-0.log").read_text(), (first / "logs" / "driver-1.log").read_text()
    assert str(second) in mine and str(first) not in mine and "recycled as a spare" in before
    assert "spare driver runs" not in before
    # The file sink's JVM hooks need their own boot: the kept driver is dropped, the trial starts cold.
    assert "spare" not in driver_starts(hooked)[0]
    assert judge(hooked)["verdict"] == "exactly-once"
    assert spares == ["recycled-" + str(restarted["pid"]), "spare-1"]


def test_a_standby_spare_is_the_next_trials_first_standby(tmp_path):
    """With standby and spare on the harness's own cluster (two executor slots per worker), a second spare booted
    in the previous tail (or beside the harness's start) is each trial's first standby, and takes over."""
    kill = Scenario(pipeline="passthrough-append", events=600, events_per_batch=200, seed=3,
                    faults=["kill-driver@1:sink-done"])
    runs = [tmp_path / "first", tmp_path / "second"]
    with Harness(workdir=tmp_path / "harness", spare=True, standby=True) as harness:
        assert harness.worker_cores == 4 and harness.standby_spares
        for k, run in enumerate(runs):
            harness.trial(kill, run, last=k == len(runs) - 1)
        tag = harness.owned.tag
        spares = sorted(p.name for p in (tmp_path / "harness" / "spares").iterdir())
    assert tagged_processes(tag) == [], "the harness left processes behind"
    last_driver = None
    for k, run in enumerate(runs):
        lines = (run / "history.jsonl").read_text().splitlines()
        drivers = [r["detail"] for r in map(json.loads, lines) if r["kind"] == "driver"]
        standby = [d for d in drivers if d["event"] == "standby"]
        # The first trial's standby booted with the harness; the next one's at the first trial's (last) kill.
        assert standby[0]["spare"] == f"spare-{k + 2}", standby
        starts = [d for d in drivers if d["event"] == "start"]
        # The second trial's first driver is the first trial's last one, recycled.
        first_driver = "spare-1" if k == 0 else f"recycled-{last_driver}"
        assert starts[0]["spare"] == first_driver and starts[1].get("standby"), starts
        last_driver = starts[-1]["pid"]
        # The killed driver's exit is the kill's (not a clean exit reaped by someone else).
        assert [d["rc"] for d in drivers if d["event"] == "exit" and d.get("killed_by")] == [-9]
        assert judge(run)["verdict"] == "at-least-once"  # batch 1 replayed, as with a cold restart
        log = run / "logs" / "driver-1.log"
        assert log.is_file() and not log.is_symlink() and "standby of" in log.read_text()
    assert spares == [f"recycled-{driver_starts(runs[0])[-1]['pid']}", "spare-1", "spare-2", "spare-3"]
