"""Delta Lake on the real path: Delta's jars from Maven in every application, its session extension, the table read
back by delta-rs. Delta 4.4 supports Spark up to 4.2, so these run on the added 4.2.0 (as the Kafka tests do)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, cli, left_by
from tests.test_kafka_spark import CONNECTOR_SPARK, added_connector_spark

pytestmark = pytest.mark.spark


ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def test_a_lakehouse_jobs_streaming_sink_skips_the_replay_its_foreach_append_repeats(tmp_path):
    """examples/orders_delta.py as written, on one harness, under ``kill-driver@1:sink-done`` and
    ``kill-driver@2:sink-write``: its Delta streaming sink (partitioned, at /lake/silver/orders) is exactly-once,
    Delta skipping the replayed batch; its foreachBatch
    append is at-least-once, batch 1 committed by both drivers; the audit table it also writes is the trial's too.
    The write history is read from ``_delta_log/``. Its Kafka source is the stand-in (Spark's connector reads the
    broker in tests/test_kafka_spark.py; here it would only add a broker's start and a minute)."""
    added_connector_spark(tmp_path)
    out = tmp_path / "campaign"
    job = f"{REPO}/examples/orders_delta.py"
    # Two queries, bronze to silver (examples/orders_medallion.py): the second reads the first one's table.
    medallion = (f"{REPO}/examples/orders_medallion.py:run?schema={ORDER}&kafka=stand-in"
                 "&sink=delta:/lake/bronze/orders,delta:/lake/silver/orders")
    run = cli("--spark", CONNECTOR_SPARK, "campaign", "run", "--pipeline", f"{job}:run", "--pipeline",
              f"{job}:run_append", "--pipeline", medallion, "--schema", ORDER, "--sink", "delta:/lake/silver/orders",
              "--events", "800",
              "--kafka", "stand-in", "--example", "kill-driver@1:sink-done kill-driver@2:sink-write", "--trials", "1",
              "--no-shrink",
              "--out", str(out),
              cwd=tmp_path, timeout=1200)
    assert run.rc == 1, run.stderr[-3000:]  # the append is expected exactly-once as every job: it is not
    results = {Path(r["pipeline"].split("?")[0]).name.replace("orders_delta.py:", ""): (r, p.parent)
               for p in out.rglob("result.json") for r in [json.loads(p.read_text())]}
    medallion_run, medallion_dir = results.pop("orders_medallion.py:run")
    assert set(results) == {"run", "run_append"}, sorted(results)
    # Bronze to silver: the silver query's faults, its offsets counted in events through bronze's Delta log and
    # bronze's checkpoint beside the trial's; exactly-once end to end.
    assert json.loads((medallion_dir / "verdict.json").read_text())["verdict"] == "exactly-once"
    assert all(f["fired"] for f in medallion_run["faults"]) and medallion_run["restarts"] == 2
    ends = [sum(b["end"].values()) for b in medallion_run["offsets"] if b["committed"] and b["end"] is not None]
    assert ends == sorted(ends) and ends[-1] == medallion_run["events"] == 800, medallion_run["offsets"]
    assert sorted(p.name for p in (medallion_dir / "sink").iterdir()) == ["delta-lake_bronze_orders", "files"]
    assert (medallion_dir / "checkpoint-upstream" / "commits").is_dir()
    verdicts = {name: json.loads((folder / "verdict.json").read_text()) for name, (_, folder) in results.items()}
    assert {name: v["verdict"] for name, v in verdicts.items()} == {"run": "exactly-once",
                                                                    "run_append": "at-least-once"}
    assert all(f["fired"] for r, _ in results.values() for f in r["faults"])
    batch_one = {name: sorted(d["incarnation"] for d in r["deliveries"] if d["batch_id"] == 1)
                 for name, (r, _) in results.items()}
    assert batch_one == {"run": [0], "run_append": [0, 1]}, batch_one
    stream = verdicts["run"]["sink"]["delta"]
    assert stream["operations"] == ["STREAMING UPDATE"] and stream["with_txn"] == stream["commits"] > 1
    counts = verdicts["run_append"]["effect"]["counts"]
    assert counts["duplicated"] > 0 and counts["lost"] == 0, counts
    assert {(tuple(d["batches"]), tuple(d["faults"])) for d in verdicts["run_append"]["duplicated"]} == {
        ((1,), ("kill-driver@1:sink-done",))}
    sinks = {name: sorted(p.name for p in (folder / "sink").iterdir()) for name, (_, folder) in results.items()}
    assert sinks == {"run": ["files"], "run_append": ["delta-lake_audit_batches", "files"]}, sinks
    assert any((results["run"][1] / "sink" / "files").glob("customer=*"))  # partitioned as the job says
    # The streaming sink's sink-write is its log's: the driver killed there had written batch 2's files and no
    # _delta_log entry naming them; the replay wrote them again, and the first ones stay, named by no commit.
    history = [json.loads(line) for line in (results["run"][1] / "history.jsonl").read_text().splitlines()]
    write = next(h for h in history if h["kind"] == "phase" and h["phase"] == "sink-write" and h["batch"] == 2)
    assert write["detail"]["source"] == "delta" and write["detail"]["before"].startswith("_delta_log/"), write
    table = results["run"][1] / "sink" / "files"
    named = {json.loads(line)["add"]["path"] for entry in (table / "_delta_log").glob("*.json")
             for line in entry.read_text().splitlines() if '"add"' in line}
    files = {str(p.relative_to(table)) for p in table.rglob("*.parquet")}
    assert named < files, (sorted(named), sorted(files))
    assert not Path("/lake/silver/orders").exists() and left_by(run.pid) == []
