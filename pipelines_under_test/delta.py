"""Delta Lake sinks: the guarantees Delta documents for streaming writes, each one line apart.

* ``delta-stream``: ``writeStream.format("delta")``. Delta's streaming sink records ``SetTransaction(queryId,
  batchId)`` in the same commit as the batch's files and skips a batch it has already committed: a batch
  replayed after the driver died between the Delta commit and ``commits/N`` is written once (exactly-once).
* ``delta-append``: a foreachBatch that appends the batch (``batch.write.format("delta").mode("append")``) with
  no transaction id: the replayed batch is appended again (at-least-once, as any foreachBatch append).
* ``delta-txn``: the same append with ``txnAppId`` and ``txnVersion`` (the batch id), the idempotent write Delta's
  guide gives for foreachBatch: Delta skips a (txnAppId, txnVersion) it has committed (exactly-once).
* ``delta-merge``: a foreachBatch ``MERGE INTO`` keyed by the event id: a replay updates the rows it inserted
  (exactly-once per key).

The harness's event log is the source (``planned`` and ``reading`` as for every catalogue pipeline). The
foreachBatch writers report ``sink-write`` before the write and ``sink-done`` after it; Delta's streaming sink has
no Python in it: its ``sink-write`` comes from the table's log (``DeltaLogBarrier``: the batch's files written,
``_delta_log/N.json`` not yet) and its ``sink-done`` from the checkpoint (``CheckpointBarrier``: just before
``commits/N``).
The table is read by delta-rs, not by Spark (chaos/stream/sinks/delta.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from chaos.scenario.faults import PHASES
from pipelines_under_test.base import DriverContext
from pipelines_under_test.passthrough import RowPassthrough

TABLE = "table"  # the Delta table's folder in the trial's sink directory
ROWS = {"id": pl.Int64, "key": pl.Utf8, "value": pl.Int64}
BATCH_ROWS = {**ROWS, "batch_id": pl.Int64}


class DeltaSink(RowPassthrough):
    """Every event to a Delta table in the trial's sink directory; Delta's jars and SQL on every driver."""

    def unavailable(self) -> str | None:
        from chaos.stream.sinks.delta import delta_unavailable

        return delta_unavailable()

    def spark_jars(self, *, say=None) -> list[Path]:
        """Delta's jars, and the hooks its log writes go through (``DeltaLogBarrier``: SESSION_CONF names it)."""
        from chaos.stream.sinks.delta import delta_application_jars

        return delta_application_jars(say=say)

    def boot_conf(self) -> dict[str, str]:
        from chaos.stream.sinks.delta import SESSION_CONF

        return dict(SESSION_CONF)

    def table(self, sink_dir: Path) -> Path:
        return Path(sink_dir) / TABLE

    def prepare_sink(self, sink_dir: Path) -> None:
        Path(sink_dir).mkdir(parents=True, exist_ok=True)

    def read_deliveries(self, sink_dir: Path) -> pl.DataFrame:
        from chaos.stream.sinks import delta

        return delta.deliveries(self.table(sink_dir))

    def sink_findings(self, sink_dir: Path) -> dict | None:
        from chaos.stream.sinks import delta

        return delta.findings(self.table(sink_dir))


class DeltaStream(DeltaSink):
    """``writeStream.format("delta")`` on the trial's checkpoint: Delta's own streaming sink."""

    checkpoint_phases = ("sink-done",)
    phases = tuple(p for p in PHASES if p != "state-commit")
    # The standard mix's windows without its sink-write ones (measured so before the log's sink-write existed).
    conformance_mix = ("kill-driver@1:sink-done kill-driver@3:planned",
                       "kill-driver@1:planned kill-executor@2:reading kill-driver@3:committed",
                       "kill-driver@1:reading kill-driver@2:sink-done")

    def unavailable(self) -> str | None:
        from chaos.machine.jvm import checkpoint_barrier_unavailable

        return super().unavailable() or checkpoint_barrier_unavailable()

    def start(self, ctx: DriverContext):
        from chaos.stream.sinks.delta import USER_METADATA, log_barrier_conf

        ctx.spark.conf.set(USER_METADATA, json.dumps({"incarnation": ctx.incarnation}))
        if ctx.controller:  # sink-write: the batch's files written, its _delta_log/N.json not yet
            for key, value in log_barrier_conf(ctx.controller, ctx.incarnation, str(self.table(ctx.sink_dir))).items():
                ctx.spark.conf.set(key, value)
        return (self.transform(ctx.source).select(*ROWS).writeStream.format("delta")
                .option("checkpointLocation", ctx.checkpoint).queryName(self.query_name)
                .start(str(self.table(ctx.sink_dir))))

    def read_output(self, sink_dir: Path) -> pl.DataFrame:
        from chaos.stream.sinks.delta import read_table

        return read_table(self.table(sink_dir), ROWS)


class DeltaBatchWriter:
    """A foreachBatch function writing each batch (its rows and their batch id) to the Delta table at ``path``:
    ``append``, ``txn`` (append with txnAppId/txnVersion) or ``merge`` (MERGE INTO by id)."""

    def __init__(self, path: str, mode: str, phase, incarnation: int, app_id: str) -> None:
        if mode not in ("append", "txn", "merge"):
            raise ValueError(mode)
        self.path, self.mode, self.phase, self.incarnation, self.app_id = path, mode, phase, incarnation, app_id

    def __call__(self, batch_df, batch_id: int) -> None:
        from pyspark.sql import functions as F

        from chaos.stream.sinks.delta import USER_METADATA

        rows = batch_df.select(*ROWS).withColumn("batch_id", F.lit(batch_id).cast("long"))
        session = batch_df.sparkSession
        session.conf.set(USER_METADATA, json.dumps({"batch": batch_id, "incarnation": self.incarnation}))
        self.phase(batch_id, "sink-write", mode=self.mode)
        if self.mode == "merge":
            view = f"streamchaos_batch_{batch_id}"
            rows.createOrReplaceTempView(view)
            session.sql(f"MERGE INTO delta.`{self.path}` AS t USING {view} AS s ON t.id = s.id "
                        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
        else:
            writer = rows.write.format("delta").mode("append")
            if self.mode == "txn":  # Delta's idempotent writes: it skips an (appId, version) it has committed
                writer = writer.option("txnAppId", self.app_id).option("txnVersion", str(batch_id))
            writer.save(self.path)
        self.phase(batch_id, "sink-done", mode=self.mode)


class DeltaBatches(DeltaSink):
    """A foreachBatch writing Delta (``mode``: append, txn or merge); the table is made before the query starts."""

    def start(self, ctx: DriverContext):
        path = str(self.table(ctx.sink_dir))
        ctx.spark.sql(f"CREATE TABLE IF NOT EXISTS delta.`{path}` (id BIGINT, key STRING, value BIGINT, "
                      "batch_id BIGINT) USING delta")
        sink = DeltaBatchWriter(path, self.mode, ctx.phase, ctx.incarnation, self.query_name)
        return self.start_foreach_batch(ctx, self.transform(ctx.source), sink)

    def read_output(self, sink_dir: Path) -> pl.DataFrame:
        from chaos.stream.sinks.delta import read_table

        return read_table(self.table(sink_dir), BATCH_ROWS)


DELTA_STREAM = DeltaStream(
    "delta-stream", "delta", "exactly-once",
    "writeStream.format('delta'): Delta's streaming sink commits each batch with its (query id, batch id) and "
    "skips a batch it has committed, so a replay after the driver died before commits/N writes nothing again.",
)
DELTA_APPEND = DeltaBatches(
    "delta-append", "append", "at-least-once",
    "foreachBatch appending each batch to a Delta table without a transaction id: a batch replayed after its "
    "commit is appended twice.",
)
DELTA_TXN = DeltaBatches(
    "delta-txn", "txn", "exactly-once",
    "foreachBatch appending each batch with txnAppId and txnVersion=batch id (Delta's idempotent writes): Delta "
    "skips a batch it has committed.",
)
DELTA_MERGE = DeltaBatches(
    "delta-merge", "merge", "exactly-once",
    "foreachBatch MERGE INTO the Delta table by event id: a replayed batch updates the rows it inserted.",
)
