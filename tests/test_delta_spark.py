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


def delta_campaign(tmp_path: Path, pipelines: list[str]) -> tuple[object, dict[str, tuple[dict, Path]]]:
    """One campaign of the given pipelines under ``kill-driver@1:sink-done`` and ``kill-driver@2:sink-write``;
    each pipeline's result and trial folder, by its name after the file's."""
    added_connector_spark(tmp_path)
    out = tmp_path / "campaign"
    run = cli("--spark", CONNECTOR_SPARK, "campaign", "run", *[a for p in pipelines for a in ("--pipeline", p)],
              "--schema", ORDER, "--sink", "delta:/lake/silver/orders", "--events", "800",
              "--kafka", "stand-in", "--example", "kill-driver@1:sink-done kill-driver@2:sink-write", "--trials", "1",
              "--no-shrink", "--out", str(out), cwd=tmp_path, timeout=1200)
    results = {Path(r["pipeline"].split("?")[0]).name.replace("orders_delta.py:", ""): (r, p.parent)
               for p in out.rglob("result.json") for r in [json.loads(p.read_text())]}
    return run, results


def test_a_lakehouse_jobs_streaming_sink_skips_the_replayed_batch(tmp_path):
    """examples/orders_delta.py as written, under ``kill-driver@1:sink-done`` and ``kill-driver@2:sink-write``: its
    Delta streaming sink (partitioned, at /lake/silver/orders) is exactly-once, Delta skipping the replayed batch
    by its txn id. The write history is read from ``_delta_log/``. Its Kafka source is the stand-in (Spark's
    connector reads the broker in tests/test_kafka_spark.py; here it would only add a broker's start and a
    minute)."""
    run, results = delta_campaign(tmp_path, [f"{REPO}/examples/orders_delta.py:run"])
    assert run.rc == 0, run.stderr[-3000:]
    [(result, folder)] = results.values()
    verdict = json.loads((folder / "verdict.json").read_text())
    assert verdict["verdict"] == "exactly-once" and all(f["fired"] for f in result["faults"])
    assert sorted(d["incarnation"] for d in result["deliveries"] if d["batch_id"] == 1) == [0]
    stream = verdict["sink"]["delta"]
    assert stream["operations"] == ["STREAMING UPDATE"] and stream["with_txn"] == stream["commits"] > 1
    assert sorted(p.name for p in (folder / "sink").iterdir()) == ["files"]
    assert any((folder / "sink" / "files").glob("customer=*"))  # partitioned as the job says
    # The streaming sink's sink-write is its log's: the driver killed there had written batch 2's files and no
    # _delta_log entry naming them; the replay wrote them again, and the first ones stay, named by no commit.
    history = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines()]
    write = next(h for h in history if h["kind"] == "phase" and h["phase"] == "sink-write" and h["batch"] == 2)
    assert write["detail"]["source"] == "delta" and write["detail"]["before"].startswith("_delta_log/"), write
    table = folder / "sink" / "files"
    named = {json.loads(line)["add"]["path"] for entry in (table / "_delta_log").glob("*.json")
             for line in entry.read_text().splitlines() if '"add"' in line}
    files = {str(p.relative_to(table)) for p in table.rglob("*.parquet")}
    assert named < files, (sorted(named), sorted(files))
    assert not Path("/lake/silver/orders").exists() and left_by(run.pid) == []


@pytest.mark.long
def test_a_foreach_append_repeats_the_replay_and_a_medallion_is_exactly_once(tmp_path):
    """examples/orders_delta.py's foreachBatch append (no txn ids) under the same two kills is at-least-once,
    batch 1 committed by both drivers, the audit table it also writes the trial's too; two queries, bronze to
    silver (examples/orders_medallion.py: the second reads the first one's table), exactly-once end to end."""
    medallion = (f"{REPO}/examples/orders_medallion.py:run?schema={ORDER}&kafka=stand-in"
                 "&sink=delta:/lake/bronze/orders,delta:/lake/silver/orders")
    run, results = delta_campaign(tmp_path, [f"{REPO}/examples/orders_delta.py:run_append", medallion])
    assert run.rc == 1, run.stderr[-3000:]  # the append is expected exactly-once as every job: it is not
    medallion_run, medallion_dir = results.pop("orders_medallion.py:run")
    assert set(results) == {"run_append"}, sorted(results)
    # Bronze to silver: the silver query's faults, its offsets counted in events through bronze's Delta log and
    # bronze's checkpoint beside the trial's; exactly-once end to end.
    assert json.loads((medallion_dir / "verdict.json").read_text())["verdict"] == "exactly-once"
    assert all(f["fired"] for f in medallion_run["faults"]) and medallion_run["restarts"] == 2
    ends = [sum(b["end"].values()) for b in medallion_run["offsets"] if b["committed"] and b["end"] is not None]
    assert ends == sorted(ends) and ends[-1] == medallion_run["events"] == 800, medallion_run["offsets"]
    assert sorted(p.name for p in (medallion_dir / "sink").iterdir()) == ["delta-lake_bronze_orders", "files"]
    assert (medallion_dir / "checkpoint-upstream" / "commits").is_dir()
    result, folder = results["run_append"]
    verdict = json.loads((folder / "verdict.json").read_text())
    assert verdict["verdict"] == "at-least-once" and all(f["fired"] for f in result["faults"])
    assert sorted(d["incarnation"] for d in result["deliveries"] if d["batch_id"] == 1) == [0, 1]
    counts = verdict["effect"]["counts"]
    assert counts["duplicated"] > 0 and counts["lost"] == 0, counts
    assert {(tuple(d["batches"]), tuple(d["faults"])) for d in verdict["duplicated"]} == {
        ((1,), ("kill-driver@1:sink-done",))}
    assert sorted(p.name for p in (folder / "sink").iterdir()) == ["delta-lake_audit_batches", "files"]
    assert left_by(run.pid) == []
