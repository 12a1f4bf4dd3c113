"""PostgreSQL sinks over the sink channel, under channel faults, a killed database and a driver kill."""

from __future__ import annotations

import pytest

from chaos.clusters.postgres import find_bindir
from tests.test_trials_spark import ids_of_batch, trial

pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(find_bindir() is None, reason="no PostgreSQL server binaries on this machine")]

FAULTS = ["--fault", "delay-sink@3:sink-write/latency=3000", "--fault", "kill-driver@3:sink-done"]
SCHEDULE = ["--events", "1000", *FAULTS]  # events enough for a batch after the last fault, no more


def test_pg_append_duplicates_the_replayed_batch(chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, "pg-append", *SCHEDULE, "--json")
    assert all(f["fired"] for f in r["faults"]), r["faults"]
    assert r["verdict"] == "at-least-once" and r["meets"] is True
    dup = {a["id"] for a in r["duplicated"]}
    assert r["anomaly_counts"]["duplicated"] == 200 and dup <= ids_of_batch(r, 3)
    assert {(a["batch"], a["fault"]) for a in r["duplicated"]} == {(3, "kill-driver@3:sink-done")}


def test_pg_upsert_by_batch_stays_exactly_once_through_every_fault_kind(chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, "pg-upsert-by-batch", "--events", "2600", *FAULTS,
              "--fault", "kill-sink-db@6:sink-write", "--fault", "cut-source@9:reading/3s",
              "--fault", "reset-sink@11:sink-write/2s", "--json")
    assert all(f["fired"] for f in r["faults"]), r["faults"]
    assert r["verdict"] == "exactly-once" and r["meets"] is True
    assert r["multiplicity"] == {"0": 0, "1": 2600, ">1": 0}
    assert {"batch": 3, "times": 2, "effective": "once"} in r["redelivered"]
    delay = next(f for f in r["faults"] if f["spec"].startswith("delay-sink"))
    assert delay["detail"]["latency"] == 3000 and delay["detail"]["channel"] == "sink"


def test_pg_two_phase_publishes_each_batch_once_even_when_commit_runs_twice(chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, "pg-two-phase", "--events", "1600", *FAULTS, "--fault",
              "kill-executor@6:sink-write", "--json")
    assert all(f["fired"] for f in r["faults"]), r["faults"]
    assert r["verdict"] == "exactly-once" and r["meets"] is True
    assert r["multiplicity"] == {"0": 0, "1": 1600, ">1": 0}
    # The driver died after commit() published batch 3; the replay called commit() again, which published nothing.
    assert {"batch": 3, "times": 2, "effective": "once"} in r["redelivered"]
