"""Spark's graceful decommission as faults, on the harness's own standalone cluster.

A decommissioned executor finishes its task, hands its blocks to its peer and takes no new task; a
decommissioned worker does that for every executor it runs and is replaced once they are gone. Neither may
do worse than a kill: key-count keeps exactly-once and a consistent cut through both.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.test_trials_spark import trial

pytestmark = [pytest.mark.spark, pytest.mark.long]  # the long tier: pytest -m long


def test_a_decommissioned_executor_and_worker_hand_over_and_key_count_stays_exactly_once(chaos_harness, tmp_path):
    master_log = chaos_harness.cluster.workdir / "master.log"
    before = master_log.read_text().count("Decommissioning worker")
    r = trial(chaos_harness, tmp_path, "key-count", "--seed", "4", "--events", "1000", "--json",
              "--fault", "decommission-executor@1:reading", "--fault", "decommission-worker@3:reading")
    assert [f["fired"] for f in r["faults"]] == [True, True] and r["restarts"] == 0, r["faults"]
    assert r["verdict"] == "exactly-once" and r["multiplicity"] == {"0": 0, "1": 1000, ">1": 0}, r
    assert r["consistent_cut"]["ok"] is True
    run = Path(r["run_dir"])
    conf = json.loads((run / "driver.json").read_text())["spark_conf"]
    assert conf["spark.decommission.enabled"] == "true" and conf["spark.executor.cores"] == "1"
    app = next(json.loads(line)["detail"]["app_id"] for line in (run / "history.jsonl").read_text().splitlines()
               if '"booted"' in line)
    launched = master_log.read_text()
    assert f"Launching executor {app}/0 " in launched and f"Launching executor {app}/1 " in launched  # a peer
    assert re.search(r"Received executor \d+ decommissioned message", (run / "logs" / "driver-0.log").read_text())
    assert "recycled as a spare" not in (run / "logs" / "driver-0.log").read_text()  # its settings are its own
    assert launched.count("Decommissioning worker") == before + 1
    assert chaos_harness.cluster.healthy()  # the decommissioned worker was replaced before the trial ended
