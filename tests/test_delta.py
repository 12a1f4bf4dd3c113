"""Delta Lake as a sink, without a JVM: the artifact for a Spark version, the refusal's way out, the table read by
delta-rs and the write history read from the transaction log as Spark's Delta writes it."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from chaos.errors import UserError
from chaos.machine.maven import Coordinates
from chaos.run.admission import trial_scenario
from chaos.stream.sinks import delta
from pipelines_under_test import CATALOGUE
from pipelines_under_test.delta import BATCH_ROWS, DeltaBatches


def test_the_artifact_is_the_spark_minors_own_and_a_refusal_names_the_way_out():
    assert str(delta.artifact("4.2.1")) == f"io.delta:delta-spark_4.2_2.13:{delta.DELTA_VERSION}"
    said = delta._refusal(delta.artifact("4.3.0"), "[ERROR] Could not find artifact io.delta:delta-spark_4.3_2.13")
    assert "delta-spark_4.3_2.13" in said and "streamchaos spark add 4.2.0" in said and "\n" not in said


def test_a_spark_delta_does_not_support_is_one_line_before_any_cluster(monkeypatch):
    monkeypatch.setattr(delta, "available", lambda what, **_: delta._refusal(what, "Could not find artifact"))
    with pytest.raises(UserError, match=r"^delta-append: Delta Lake .* not served .* --spark 4\.2\.0"):
        trial_scenario("delta-append", 600, 1, ["kill-driver@1:sink-done"])


def commit(version: int, operation: str, *, rows: int | None = None, metadata: dict | None = None,
           epoch: int | None = None, txn: tuple[str, int] | None = None, files: tuple[int, ...] = ()) -> str:
    """One ``_delta_log/N.json`` as Spark's Delta 4.4 writes it (commitInfo first, then txn and add actions)."""
    params: dict = {"mode": "Append"}
    if epoch is not None:
        params = {"outputMode": "Append", "queryId": "q", "epochId": str(epoch)}
    info = {"timestamp": 1, "operation": operation, "operationParameters": params,
            "operationMetrics": {} if rows is None else {"numOutputRows": str(rows)},
            "engineInfo": "Apache-Spark/4.2.0 Delta-Lake/4.4.0"}
    if metadata is not None:
        info["userMetadata"] = json.dumps(metadata)
    lines = [{"commitInfo": info}]
    if txn:
        lines.append({"txn": {"appId": txn[0], "version": txn[1], "lastUpdated": 1}})
    lines += [{"add": {"path": f"part-{version}-{k}.parquet", "partitionValues": {}, "size": 1, "dataChange": True,
                       "stats": json.dumps({"numRecords": n})}} for k, n in enumerate(files)]
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def write_log(table: Path, commits: list[str]) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True)
    for version, text in enumerate(commits):
        (log / f"{version:020d}.json").write_text(text)


def test_the_write_history_names_each_batch_its_incarnation_and_a_replay(tmp_path):
    """A foreachBatch append whose batch 1 was written by incarnations 0 and 1 (the replay), after the table's
    creation (not a delivery); a MERGE's rows are its source rows, not the records of the files it rewrote."""
    write_log(tmp_path, [
        commit(0, "CREATE TABLE"),
        commit(1, "WRITE", rows=200, metadata={"batch": 0, "incarnation": 0}, files=(120, 80)),
        commit(2, "WRITE", rows=200, metadata={"batch": 1, "incarnation": 0}, files=(200,)),
        commit(3, "WRITE", rows=200, metadata={"batch": 1, "incarnation": 1}, files=(200,)),
    ])
    assert delta.deliveries(tmp_path).rows() == [(0, 0, 200), (1, 0, 200), (1, 1, 200)]
    assert delta.findings(tmp_path) == {"delta": {"version": 3, "commits": 4, "with_txn": 0,
                                                  "operations": ["CREATE TABLE", "WRITE"]}}


def test_a_streaming_write_gives_its_batch_from_the_epoch_and_its_txn(tmp_path):
    write_log(tmp_path, [
        commit(0, "STREAMING UPDATE", metadata={"incarnation": 0}, epoch=0, txn=("q", 0), files=(110, 90)),
        commit(1, "STREAMING UPDATE", metadata={"incarnation": 1}, epoch=1, txn=("q", 1), files=(200,)),
    ])
    assert delta.deliveries(tmp_path).rows() == [(0, 0, 200), (1, 1, 200)]  # rows from the files: no metrics
    [first, _] = delta.commits(tmp_path)
    assert first["txn"] == {"app": "q", "version": 0} and first["batch"] == 0
    assert delta.findings(tmp_path)["delta"]["with_txn"] == 2


def test_a_merge_counts_its_source_rows(tmp_path):
    text = commit(0, "MERGE", metadata={"batch": 2, "incarnation": 1}, files=(400, 200))
    text = text.replace('"operationMetrics": {}', '"operationMetrics": {"numSourceRows": "200"}')
    write_log(tmp_path, [text])
    assert delta.deliveries(tmp_path).rows() == [(2, 1, 200)]


def test_the_table_is_read_by_delta_rs_at_its_latest_version(tmp_path):
    from deltalake import write_deltalake

    table = tmp_path / "table"
    first = pa.table({"id": [1, 2], "key": ["a", "b"], "value": [10, 20], "batch_id": [0, 0]})
    write_deltalake(str(table), first)
    write_deltalake(str(table), pa.table({"id": [2], "key": ["b"], "value": [20], "batch_id": [1]}), mode="append")
    read = delta.read_table(table, BATCH_ROWS).sort("batch_id", "id")
    assert read.rows() == [(1, "a", 10, 0), (2, "b", 20, 0), (2, "b", 20, 1)]
    assert read.schema == pl.Schema(BATCH_ROWS)
    assert delta.read_table(tmp_path / "never-written", BATCH_ROWS).height == 0  # the query wrote nothing


def test_the_catalogue_has_the_four_delta_pipelines_with_their_guarantees_and_phases():
    declared = {name: CATALOGUE[name].guarantee for name in ("delta-stream", "delta-append", "delta-txn",
                                                            "delta-merge")}
    assert declared == {"delta-stream": "exactly-once", "delta-append": "at-least-once", "delta-txn": "exactly-once",
                        "delta-merge": "exactly-once"}
    assert "sink-write" in CATALOGUE["delta-stream"].phases  # its log's (DeltaLogBarrier), sink-done its checkpoint's
    assert CATALOGUE["delta-stream"].checkpoint_phases == ("sink-done",)
    assert isinstance(CATALOGUE["delta-txn"], DeltaBatches) and "sink-write" in CATALOGUE["delta-txn"].phases
    assert CATALOGUE["delta-append"].boot_conf()["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert isinstance(delta.artifact("4.2.0"), Coordinates)


def test_a_jobs_delta_paths_are_the_runs_the_one_under_test_first_written_when_none_was_named(monkeypatch, tmp_path):
    from chaos.jobs import delta_tables

    for var in (delta_tables.ROOT_VAR, delta_tables.TESTED_VAR):
        monkeypatch.delenv(var, raising=False)
    assert delta_tables.route("/lake/silver/orders", writing=True) == "/lake/silver/orders"  # no run: as given
    delta_tables.begin(tmp_path / "sink", "")
    assert delta_tables.route("/lake/bronze/orders") == str(tmp_path / "sink" / "delta-lake_bronze_orders")  # a read
    assert delta_tables.under_test("file:///lake/silver/orders/")  # the first written: under test
    assert delta_tables.route("/lake/silver/orders") == str(tmp_path / "sink" / "files")
    assert not delta_tables.under_test("/lake/audit")
    assert delta_tables.route(str(tmp_path / "sink" / "files")) == str(tmp_path / "sink" / "files")  # already ours
    sql = delta_tables.rewritten_sql("MERGE INTO delta.`/lake/silver/orders` t USING delta.`/lake/gold` g ON 1=1")
    assert sql == (f"MERGE INTO delta.`{tmp_path}/sink/files` t USING delta.`{tmp_path}/sink/delta-lake_gold` g "
                   "ON 1=1")
    delta_tables.begin(tmp_path / "oracle", "/lake/silver/orders")  # the oracle's run: its own folder, path named
    assert delta_tables.route("/lake/audit", writing=True) == str(tmp_path / "oracle" / "delta-lake_audit")
    assert delta_tables.route("/lake/silver/orders") == str(tmp_path / "oracle" / "files")
    delta_tables.begin(tmp_path / "pg", None)  # a job whose sink is a database: every Delta table is a side one
    assert delta_tables.route("/lake/silver/orders", writing=True) == str(tmp_path / "pg" / "delta-lake_silver_orders")
    delta_tables.end()
    assert delta_tables.route("/lake/x") == "/lake/x"


def test_a_delta_sink_is_a_job_sink_kind_with_or_without_its_path():
    from chaos.jobs.reference import JobSpec

    assert JobSpec("examples/orders_delta.py:run", sink="delta:/lake/silver/orders").validate().table == \
        "/lake/silver/orders"
    assert JobSpec("examples/orders_delta.py:run", sink="delta").validate().table == ""
    with pytest.raises(UserError, match=r"delta\[:PATH\]"):
        JobSpec("examples/orders_delta.py:run", sink="iceberg").validate()
