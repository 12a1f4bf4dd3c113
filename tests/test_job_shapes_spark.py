"""Jobs in their own shapes on a real cluster: a nested payload whose schema the job declares, timed in epoch
milliseconds; a script that parses its time from a string in its own pattern. Both window by event time with a
watermark, and their late records are the ones Spark's watermark drops."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from chaos.jobs.reference import parse_ref
from pipelines_under_test import resolve
from tests.conftest import REPO
from tests.test_trials_spark import trial

pytestmark = pytest.mark.spark

TEXT_JOB = '''import argparse

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

parser = argparse.ArgumentParser()
parser.add_argument("--input", required=True)
parser.add_argument("--output", required=True)
opts = parser.parse_args()

spark = SparkSession.builder.appName("trades-text").getOrCreate()
trades = (spark.readStream.schema("trade_id STRING, symbol STRING, qty LONG, traded STRING").json(opts.input)
          .withColumn("at", F.to_timestamp("traded", "yyyy-MM-dd HH:mm:ss")))
query = (trades.withWatermark("at", "30 seconds").groupBy(F.window("at", "1 minute"), "symbol").count()
         .select(F.col("window.start").alias("minute"), "symbol", "count")
         .writeStream.format("parquet").outputMode("append").option("path", opts.output)
         .option("checkpointLocation", opts.output + "/_checkpoint").start())
query.awaitTermination()
'''


def judged_counts(r: dict, column: str, unit_ms: int) -> tuple[int, int]:
    """Records counted in the sink's windows, and the count Spark's watermark predicts: a record is dropped when
    its one-minute window ended at or before the watermark of the batch before the one that read it (a window
    aggregation's late rule: the window's end, not the record's time, on the time as the job reads it, against
    the previous batch's watermark), and a window is written once the final watermark passes its end (append
    mode)."""
    from chaos.jobs.as_written import batch_watermarks

    job, run = resolve(r["pipeline"]), Path(r["run_dir"])
    sink = job.read_output(run / "sink")
    assert sink.height > 0
    years = {m.year for m in sink["minute"]}
    assert years <= {2025, 2026}, years  # the job's windows hold the stream's times, not 1970's
    marks = batch_watermarks(str(run / "checkpoint"))
    final = max(wm for _, wm in marks)
    events = pl.read_parquet(run / "events.parquet")
    kept = 0
    for ms, part, offset in zip(events["event_time"].dt.epoch("ms"), events["partition"], events["offset"],
                                strict=True):
        reader = next(i for i, (ends, _) in enumerate(marks) if int(ends.get(str(part), 0)) > offset)
        mark = marks[reader - 1][1] if reader else 0
        end = (ms // unit_ms * unit_ms) // 60_000 * 60_000 + 60_000
        kept += end > mark and end <= final
    return int(sink[column].sum()), kept


@pytest.mark.parametrize("case", ["nested-epoch-ms", pytest.param("script-pattern", marks=pytest.mark.long)])
def test_event_times_in_the_jobs_form_fill_its_windows_and_late_records_are_sparks(chaos_harness, tmp_path, case):
    kill = ["--late-fraction", "0.05", "--events", "1000", "--fault", "kill-driver@3:sink-done"]
    if case == "nested-epoch-ms":
        # No --schema: the job's StructType (nested, with `IP Address`) is read from its code.
        r = trial(chaos_harness, tmp_path, f"{REPO}/examples/trades_nested.py:run", "--sink", "parquet",
                  "--time", "trade.trade_time:epoch-ms", *kill)
        assert parse_ref(r["pipeline"]).schema == ("trade STRUCT<tradeId: STRING, symbol: STRING, qty: BIGINT, "
                                                   "trade_time: BIGINT>, `IP Address` STRING")
        column = "trades"
    else:
        script = tmp_path / "trades_text.py"
        script.write_text(TEXT_JOB)
        r = trial(chaos_harness, tmp_path, str(script), "--sink", "parquet", "--time", "traded:yyyy-MM-dd HH:mm:ss",
                  *kill, "--", "--input", "/data/trades", "--output", "/data/trades_per_minute")
        column = "count"
    assert all(f["fired"] for f in r["faults"]) and r["recoveries"], r["faults"]
    assert r["verdict"] == "exactly-once" and r["meets"] is True, r
    assert r["keys"]["optional"] > 0 and r["keys"]["exact"] > 0, r["keys"]
    # The windows count exactly the records Spark's watermark keeps, from offsets/N's batchWatermarkMs on the time
    # as the job reads it (whole seconds for the pattern), and late records were there to drop.
    in_sink, predicted = judged_counts(r, column, 1 if case == "nested-epoch-ms" else 1000)
    assert in_sink == predicted, (in_sink, predicted)
    answer = resolve(r["pipeline"]).expected_output(Path(r["run_dir"]))
    assert answer.on_time is not None and answer.rows[column].sum() > answer.on_time[column].sum()


UPDATES_JOB = '''import os
import sqlite3

from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def append_updates(batch, batch_id):
    rows = [tuple(r) for r in batch.collect()]
    with sqlite3.connect(os.environ["DATABASE_URL"].removeprefix("sqlite:///")) as db:
        db.executemany("INSERT INTO customer_updates (customer, orders) VALUES (?, ?)", rows)


def run(spark):
    with sqlite3.connect(os.environ["DATABASE_URL"].removeprefix("sqlite:///")) as db:
        db.execute("CREATE TABLE IF NOT EXISTS customer_updates (customer TEXT, orders INTEGER)")
    counts = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*")
              .groupBy("customer").agg(F.count("*").alias("orders")))
    return counts.writeStream.outputMode("update").foreachBatch(append_updates).start()
'''


def test_output_that_depends_on_batching_is_named_without_blaming_a_fault(chaos_harness, tmp_path):
    """Each batch appends its updated counts with no key: Spark's one-batch answer holds one row per customer, the
    stream one per customer and batch. With no fault at all, that is the job's, not a fault's."""
    job = tmp_path / "customer_updates.py"
    job.write_text(UPDATES_JOB)
    r = trial(chaos_harness, tmp_path, f"{job}:run", "--sink", "sqlite:customer_updates", "--events", "400",
              code=3)
    assert r["verdict"] == "batch-dependent" and r["meets"] is None, r
    assert "depends on how the stream is cut into micro-batches" in r["note"]
    assert r["anomaly_counts"]["unexpected"] + r["anomaly_counts"]["duplicated"] > 0


CSV_JOB = '''from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, paid BOOLEAN, ts TIMESTAMP"


def run(spark):
    orders = (spark.readStream.format("kafka").option("subscribe", "orders-csv").load()
              .select(F.from_csv(F.col("value").cast("string"), ORDER).alias("o")).select("o.*")
              .where("paid"))
    return orders.writeStream.format("parquet").option("path", "/data/paid").start()
'''


def test_a_job_parsing_csv_kafka_values_reads_the_payload_as_it_expects(chaos_harness, tmp_path):
    """--kafka-value csv: each record's value one CSV line of the payload's fields (its schema from the code),
    which from_csv parses back: every paid order reaches the sink, none with a null field."""
    job = tmp_path / "orders_csv.py"
    job.write_text(CSV_JOB)
    r = trial(chaos_harness, tmp_path, f"{job}:run", "--sink", "parquet", "--kafka-value", "csv", "--events", "400",
              "--fault", "kill-driver@1:sink-done")
    assert r["verdict"] == "exactly-once" and r["meets"] is True, r
    written = resolve(r["pipeline"]).read_output(Path(r["run_dir"]) / "sink")
    assert written.height == 200 and written.null_count().sum_horizontal().item() == 0  # paid: even ids
    assert written["order_id"].str.starts_with("order_id-").all() and written["customer"].str.starts_with("k").all()


def test_a_silver_query_reading_the_bronze_directory_another_query_writes_is_judged(chaos_harness, tmp_path):
    """examples/orders_medallion.py:run_files as written: a bronze query lands the stream as JSON files, a silver
    query reads that directory as a stream and writes Parquet. Named with ``--sink parquet:BRONZE,parquet``, the
    silver query is the one under test: the fault lands at its own batch 1's sink-write (the bronze file sink
    reports none; how many files each silver batch finds depends on the two queries' pace: its batch 1, which
    every pace gives, not a later one), its offsets (the file source's log entries) count the stream's events
    through bronze's ``_spark_metadata`` and checkpoint, and its output is judged exactly-once against Spark's
    answer."""
    r = trial(chaos_harness, tmp_path, f"{REPO}/examples/orders_medallion.py:run_files",
              "--schema", "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP",
              "--sink", "parquet:/lake/bronze/orders-json,parquet", "--events", "600",
              "--fault", "kill-driver@1:sink-write")
    assert r["verdict"] == "exactly-once" and r["meets"] is True and r["faults"][0]["fired"], r
    run = Path(r["run_dir"])
    ends = [sum(b["end"].values()) for b in r["offsets"] if b["committed"]]
    assert ends == sorted(ends) and ends[-1] == 600, r["offsets"]
    history = [h for line in (run / "history.jsonl").read_text().splitlines() for h in [json.loads(line)]
               if h["kind"] == "phase" and h["phase"] == "sink-write"]
    # One sink-write per silver batch, batch 1's twice (the replay): bronze's sink reports none.
    assert len(history) == len(ends) + 1, history
    assert (run / "sink" / "files-upstream" / "_spark_metadata").is_dir() and (run / "checkpoint-upstream").is_dir()
    written = resolve(r["pipeline"]).read_output(run / "sink")
    assert written.height > 0 and "received_at" in written.columns and not Path("/lake").exists()
