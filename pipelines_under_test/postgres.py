"""Passthrough pipelines into PostgreSQL through foreachBatch, over the sink channel.

``pg-append`` inserts each batch: a driver killed after the sink's transaction committed and before
commits/N makes Spark replay batch N, and its rows land twice (at-least-once).

``pg-upsert-by-batch`` records the batch id in the same transaction as the rows and skips a batch id
it has already recorded: the replay writes nothing (exactly-once) — the idempotent, transactional
sink the docs recommend, and the one that survives channel faults and a killed database too.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from chaos.stream.sinks import postgres
from pipelines_under_test.base import DriverContext
from pipelines_under_test.passthrough import RowPassthrough


class PgPassthrough(RowPassthrough):
    database = True
    sink_channel = True

    def prepare_database(self, dsn: str) -> None:
        postgres.create(dsn)

    def export_database(self, dsn: str, sink_dir: Path) -> None:
        postgres.export(dsn, sink_dir)

    def start(self, ctx: DriverContext):
        sink = postgres.PgBatchSink(ctx.sink_dsn, self.mode, ctx.phase, ctx.incarnation)
        return self.start_foreach_batch(ctx, self.transform(ctx.source), sink)

    def read_output(self, sink_dir: Path) -> pl.DataFrame:
        return pl.read_parquet(Path(sink_dir) / "output.parquet")

    def read_deliveries(self, sink_dir: Path) -> pl.DataFrame:
        return pl.read_parquet(Path(sink_dir) / "deliveries.parquet")


class PgTwoPhase(PgPassthrough):
    """Rows staged by every task, published by the driver's commit with the batch id (two-phase commit)."""

    def start(self, ctx: DriverContext):
        from chaos.stream.sinks.pg_two_phase import SINK_NAME, PgTwoPhaseSink

        ctx.spark.dataSource.register(PgTwoPhaseSink)
        return (
            self.transform(ctx.source).writeStream.format(SINK_NAME)
            .option("dsn", ctx.sink_dsn)
            .option("controller", ctx.controller or "")
            .option("incarnation", str(ctx.incarnation))
            .option("checkpointLocation", ctx.checkpoint)
            .queryName(self.query_name)
            .start()
        )


PG_APPEND = PgPassthrough("pg-append", "append", "at-least-once",
                          "foreachBatch plain INSERT into PostgreSQL: a replayed batch is written again.")
PG_UPSERT_BY_BATCH = PgPassthrough(
    "pg-upsert-by-batch", "upsert-by-batch", "exactly-once",
    "foreachBatch rows + batch id in one PostgreSQL transaction, skipping recorded batch ids: replays write nothing.",
)
PG_TWO_PHASE = PgTwoPhase(
    "pg-two-phase", "two-phase", "exactly-once",
    "Python DataSourceStreamWriter: tasks stage rows, the driver's commit publishes them with the batch id.",
)
