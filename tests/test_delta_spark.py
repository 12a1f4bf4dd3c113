"""Delta Lake on the real path: Delta's jars from Maven in every application, its session extension, the table read
back by delta-rs. Delta 4.4 supports Spark up to 4.2, so these run on the added 4.2.0 (as the Kafka tests do)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cli, left_by
from tests.test_kafka_spark import CONNECTOR_SPARK, added_connector_spark

pytestmark = pytest.mark.spark


def test_delta_conformance_tells_the_sink_that_skips_a_replay_from_the_append_that_repeats_it(tmp_path):
    """One harness, two rows under ``kill-driver@1:sink-done kill-driver@3:...``: Delta's streaming sink commits
    batch 1 once (the replay finds its (query id, batch id) in the log), a foreachBatch append without a txn id
    commits it twice; the write history read from ``_delta_log/`` says which incarnation wrote each commit."""
    added_connector_spark(tmp_path)
    out = tmp_path / "conf"
    run = cli("--spark", CONNECTOR_SPARK, "conformance", "--trials", "1", "--events", "800", "--only", "delta-stream",
              "--only", "delta-append", "--out", str(out), cwd=tmp_path, timeout=1200)
    assert run.rc == 0, run.stderr[-3000:]
    rows = {r["pipeline"]: r for r in json.loads((out / "conformance.json").read_text())["rows"]}
    assert {name: (row["measured"], row["agrees"]) for name, row in rows.items()} == {
        "delta-stream": ("exactly-once", True), "delta-append": ("at-least-once", True)}, rows
    trials = {p.name.rsplit("-", 1)[0]: p for p in (out / "trials").iterdir()}
    results = {name: json.loads((path / "result.json").read_text()) for name, path in trials.items()}
    verdicts = {name: json.loads((path / "verdict.json").read_text()) for name, path in trials.items()}
    batch_one = {name: sorted(d["incarnation"] for d in r["deliveries"] if d["batch_id"] == 1)
                 for name, r in results.items()}
    assert batch_one == {"delta-stream": [0], "delta-append": [0, 1]}, batch_one
    assert {(d["batch"], d["fault"]) for d in verdicts["delta-append"]["duplicated"]} == {
        (1, "kill-driver@1:sink-done")}
    stream = verdicts["delta-stream"]["sink"]["delta"]
    assert stream["operations"] == ["STREAMING UPDATE"] and stream["with_txn"] == stream["commits"] == 4
    assert verdicts["delta-append"]["effect"]["multiplicity"] == {"0": 0, "1": 600, ">1": 200}
    assert left_by(run.pid) == []
