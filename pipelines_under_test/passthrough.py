"""Stateless passthrough pipelines into SQLite through foreachBatch.

``passthrough-append`` inserts each batch as it comes: when the driver dies after the sink wrote
batch N but before commits/N, Spark replays batch N with the same offsets and the rows land twice.
At-least-once, as Spark documents for foreachBatch.

``foreach-writer`` inserts row by row from a Python ``ForeachWriter`` on the executors: a replayed
epoch is written again, partition by partition (at-least-once, the docs' foreach row).

``passthrough-idempotent`` replaces the rows of batch N in one transaction, keyed by the batch id
Spark passes to foreachBatch: the replay overwrites its own earlier write. Exactly-once, the
documented way to make foreachBatch idempotent.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from chaos.stream.sinks import sqlite
from pipelines_under_test.base import DriverContext, Pipeline
from properties import oracle


def rows_output(result) -> pl.DataFrame:
    """A row sink's contents after writing the Spark DataFrame ``result`` once (as batch 0)."""
    rows = result.select("id", "key", "value").collect()
    return pl.DataFrame([tuple(r) for r in rows], schema={"id": pl.Int64, "key": pl.Utf8, "value": pl.Int64},
                        orient="row").with_columns(batch_id=pl.lit(0, dtype=pl.Int64))


class RowPassthrough(Pipeline):
    """Every event to the sink unchanged, one row each; subclasses say where the rows go (``mode``: how)."""

    def __init__(self, name: str, mode: str, guarantee: str, description: str) -> None:
        self.name = name
        self.mode = mode
        self.guarantee = guarantee
        self.description = description

    def batch_output(self, result) -> pl.DataFrame:
        return rows_output(result)

    def oracle(self, events: pl.DataFrame) -> pl.DataFrame:
        return oracle.passthrough_expected(events)

    def unexplained(self, output: pl.DataFrame, events: pl.DataFrame) -> list[dict]:
        return oracle.passthrough_unexplained(output, events)


class SqlitePassthrough(RowPassthrough):

    def _db(self, sink_dir: Path) -> Path:
        return Path(sink_dir) / "sink.sqlite"

    def prepare_sink(self, sink_dir: Path) -> None:
        sqlite.create(self._db(sink_dir))

    def start(self, ctx: DriverContext):
        sink = sqlite.SqliteBatchSink(self._db(ctx.sink_dir), self.mode, ctx.phase, ctx.incarnation)
        return self.start_foreach_batch(ctx, self.transform(ctx.source), sink)

    def read_output(self, sink_dir: Path) -> pl.DataFrame:
        return sqlite.read_output(self._db(sink_dir))

    def read_deliveries(self, sink_dir: Path) -> pl.DataFrame:
        return sqlite.read_deliveries(self._db(sink_dir))


class SqliteRows(SqlitePassthrough):
    """Rows of the pipeline's own columns, not the event's, written by batch id into the SQLite sink: ``schema``
    names them with their polars types (the order the sink writes), ``table`` declares them in SQL."""

    schema: dict[str, pl.DataType] = {}  # noqa: RUF012 (read-only class default)
    table: tuple[str, ...] = ()

    def prepare_sink(self, sink_dir: Path) -> None:
        sqlite.create(self._db(sink_dir), self.table)

    def rows_sink(self, ctx: DriverContext) -> sqlite.SqliteBatchSink:
        """The foreachBatch function that writes the rows (``start`` adds what its query needs around it)."""
        return sqlite.SqliteBatchSink(self._db(ctx.sink_dir), self.mode, ctx.phase, ctx.incarnation,
                                      tuple(self.schema))

    def read_output(self, sink_dir: Path) -> pl.DataFrame:
        return sqlite.read_table(self._db(sink_dir), self.schema)

    def batch_output(self, result) -> pl.DataFrame:
        rows = [tuple(r) for r in result.select(*self.schema).collect()]
        return pl.DataFrame(rows, schema=self.schema, orient="row")


class ForeachPassthrough(SqlitePassthrough):
    """Every event inserted by a Python ``ForeachWriter``, one transaction per partition and epoch."""

    def start(self, ctx: DriverContext):
        from chaos.stream.sinks.sqlite_foreach import SqliteForeachWriter

        writer = SqliteForeachWriter(str(self._db(ctx.sink_dir)), ctx.controller, ctx.incarnation)
        return (
            self.transform(ctx.source).writeStream.foreach(writer)
            .option("checkpointLocation", ctx.checkpoint)
            .queryName(self.query_name)
            .start()
        )

    def read_deliveries(self, sink_dir: Path) -> None:
        return None  # per-task writes: the batch-level deliveries view does not apply


PASSTHROUGH_APPEND = SqlitePassthrough(
    "passthrough-append", "append", "at-least-once",
    "foreachBatch plain INSERT into SQLite: a replayed batch is written again.",
)
FOREACH_WRITER = ForeachPassthrough(
    "foreach-writer", "foreach", "at-least-once",
    "Python ForeachWriter inserting rows into SQLite, committed per partition: replayed epochs insert again.",
)
PASSTHROUGH_IDEMPOTENT = SqlitePassthrough(
    "passthrough-idempotent", "idempotent", "exactly-once",
    "foreachBatch DELETE+INSERT keyed by batch id in one transaction: replays overwrite.",
)
QUERY_BATCH_DEDUP = SqlitePassthrough(
    "query-batch-dedup", "query-batch", "exactly-once",
    "foreachBatch skipping a (query id, batch id) it already wrote, in the same transaction: exactly-once "
    "while the checkpoint keeps the query id (SPARK-55058: a lost metadata file gave a new one up to 4.1).",
)
