"""Stateful and stateless counters on the real cluster: consistent cut, per-key inference."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import cli
from tests.test_trials_spark import trial

pytestmark = pytest.mark.spark

KILL = ["--events", "1200", "--seed", "5", "--fault", "kill-driver@3:sink-done", "--json"]


def test_key_count_keeps_a_consistent_cut_through_a_driver_kill_and_a_corrupted_value_breaks_it(
        chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, "key-count", *KILL)
    assert r["faults"][0]["fired"] and r["restarts"] == 1
    assert r["verdict"] == "exactly-once" and r["meets"] is True
    assert r["multiplicity"] == {"0": 0, "1": 1200, ">1": 0}
    assert r["redelivered"] == [{"batch": 3, "times": 2, "effective": "once"}]
    cut = r["consistent_cut"]
    assert cut["ok"] is True and cut["batches_checked"] == list(range(6)) and cut["committed_batches"] == 6

    # Corrupt one state value of batch 5 as the state store handed it back: the check names batch and key.
    run_dir = Path(r["run_dir"])
    dump = run_dir / "state" / "5.parquet"
    state = pl.read_parquet(dump)
    key = state.sort("key")["key"][0]
    state.with_columns(pl.when(pl.col("key") == key).then(pl.col("total") + 7).otherwise(pl.col("total"))
                       .alias("total")).write_parquet(dump)
    again = cli("check", str(run_dir), "--json", cwd=tmp_path)
    assert again.rc == 1, again.stderr
    broken = again.json["consistent_cut"]
    assert broken["ok"] is False
    assert [(m["batch"], m["key"]) for m in broken["mismatches"]] == [(5, key)]
    assert broken["mismatches"][0]["actual"]["total"] == broken["mismatches"][0]["expected"]["total"] + 7


def test_incrementing_counter_is_at_least_once_inferred_from_per_key_counts(chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, "api-count-increment", *KILL)
    assert r["inferred"] is True and r["verdict"] == "at-least-once" and r["meets"] is True
    assert r["anomaly_counts"]["duplicated"] == 200  # exactly batch 3's events, counted twice
    assert r["anomaly_counts"]["lost"] == 0
    assert all(d["batches"] == [3] and d["faults"] == ["kill-driver@3:sink-done"] for d in r["duplicated"])
    assert r["redelivered"] == [{"batch": 3, "times": 2, "effective": "more than once"}]
    assert r["consistent_cut"] is None  # no streaming state


def test_api_count_without_faults_is_exactly_once_inferred(chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, "api-count", "--events", "1000", "--json")
    assert r["inferred"] is True and r["verdict"] == "exactly-once"
    assert r["keys"]["over"] == 0 and r["keys"]["under"] == 0 and r["keys"]["exact"] == 20
    assert r["consistent_cut"]["ok"] is True


def test_api_count_two_phase_publishes_each_batch_once_through_kills_between_and_after_its_phases(
        chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, "api-count-two-phase", "--events", "1000", "--seed", "5",
              "--fault", "kill-driver@1:sink-write", "--fault", "kill-driver@3:sink-done", "--json")
    assert [f["fired"] for f in r["faults"]] == [True, True] and r["restarts"] == 2
    assert r["inferred"] is True and r["verdict"] == "exactly-once" and r["meets"] is True, r
    assert r["keys"]["over"] == 0 and r["keys"]["under"] == 0
    # Batch 1 was staged and not published when its driver died: one delivery, by the replay. Batch 3 was
    # published before the kill: the replay is recorded and publishes nothing.
    assert r["redelivered"] == [{"batch": 3, "times": 2, "effective": "once"}]
    assert r["consistent_cut"]["ok"] is True
    with sqlite3.connect(Path(r["run_dir"]) / "sink" / "counts.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM staging").fetchone()[0] == 0
        assert [b for (b,) in db.execute("SELECT batch_id FROM sink_batches ORDER BY 1")] == list(range(5))
