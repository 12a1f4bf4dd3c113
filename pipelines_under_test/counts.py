"""Seed 003's access counter: events per key (the "API path"), four ways.

``key-count`` is a streaming aggregation (``groupBy(key)`` with count, sum of values and the list of
event ids) in update mode, upserted by key through foreachBatch. The state store and the offsets
log are checkpointed together, so a replayed batch recomputes the same totals and the upsert writes
them again: exactly-once, with provenance (the ids list), and a consistent cut to check at every
batch.

``api-count`` is the same counter without provenance (``groupBy(key).count()`` plus a sum): what a
real dashboard stores. Loss or duplication can only be inferred from per-key deltas, and the
verdict says so. Exactly-once for the same reason as ``key-count``.

``api-count-two-phase`` writes the same totals through a two-phase sink (staged by batch id, then
published once per batch id, ``chaos/stream/sinks/sqlite_keyed.py``): exactly-once, and a replay after the
publish is skipped rather than rewritten.

``api-count-increment`` has no streaming state: each batch is counted inside foreachBatch and added
to the table (``n = n + delta``). A batch replayed after the sink wrote it is added twice:
at-least-once (inferred), the everyday bug of counters fed from a stream.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from chaos.stream.sinks import sqlite_keyed
from pipelines_under_test.base import DriverContext, Pipeline
from properties import oracle


class _SqliteCounter(Pipeline):
    mode = "upsert"

    def _db(self, sink_dir: Path) -> Path:
        return Path(sink_dir) / "counts.sqlite"

    def prepare_sink(self, sink_dir: Path) -> None:
        sqlite_keyed.create(self._db(sink_dir))

    def _sink(self, ctx: DriverContext):
        return sqlite_keyed.SqliteKeyedSink(self._db(ctx.sink_dir), self.mode, ctx.phase, ctx.incarnation,
                                            with_ids=self.provenance)

    def read_output(self, sink_dir: Path) -> pl.DataFrame:
        return sqlite_keyed.read_counts(self._db(sink_dir))

    def read_deliveries(self, sink_dir: Path) -> pl.DataFrame:
        return sqlite_keyed.read_deliveries(self._db(sink_dir))

    def batch_output(self, result) -> pl.DataFrame:
        columns = ["key", "n", "total"] + (["ids"] if self.provenance else [])
        rows = [tuple(r) for r in result.select(*columns).collect()]
        frame = pl.DataFrame(rows, schema={"key": pl.Utf8, "n": pl.Int64, "total": pl.Int64,
                                           **({"ids": pl.List(pl.Int64)} if self.provenance else {})}, orient="row")
        return frame if self.provenance else frame.with_columns(ids=pl.lit(None, dtype=pl.List(pl.Int64)))

    def oracle(self, events: pl.DataFrame) -> pl.DataFrame:
        return oracle.passthrough_expected(events)

    def expected_counts(self, events: pl.DataFrame) -> pl.DataFrame:
        return oracle.key_counts(events)

    def observed_counts(self, output: pl.DataFrame) -> pl.DataFrame:
        return output.select("key", "n", "total")


class StatefulCounter(_SqliteCounter):
    """Streaming aggregation in update mode, upserted by key."""

    state = True
    # The aggregation buffer: count and sum are plain columns; collect_list's buffer is binary.
    state_columns = ("key.key AS key", "value.count AS n", "value.sum AS total")
    state_change_feed = True  # the default HDFS state store

    def __init__(self, name: str, provenance: bool, description: str, mode: str = "upsert") -> None:
        self.name = name
        self.provenance = provenance
        self.mode = mode
        self.guarantee = "exactly-once"
        self.description = description

    def transform(self, source):
        from pyspark.sql import functions as F

        aggs = [F.count(F.lit(1)).alias("n"), F.sum("value").alias("total")]
        if self.provenance:
            aggs.append(F.collect_list("id").alias("ids"))
        return source.groupBy("key").agg(*aggs)

    def start(self, ctx: DriverContext):
        return self.start_foreach_batch(ctx, self.transform(ctx.source), self._sink(ctx), output_mode="update")

    def observed_ids(self, output: pl.DataFrame) -> pl.Series:
        return output.select(pl.col("ids").explode().drop_nulls().alias("id"))["id"]

    def unexplained(self, output: pl.DataFrame, events: pl.DataFrame) -> list[dict]:
        return oracle.key_count_unexplained(output, events) if self.provenance else []

    def expected_state(self, events: pl.DataFrame) -> pl.DataFrame:
        return oracle.key_counts(events)


class IncrementingCounter(_SqliteCounter):
    """Stateless: each batch's per-key counts are added to the table."""

    name = "api-count-increment"
    guarantee = "at-least-once"
    provenance = False
    mode = "increment"
    description = "per-batch groupBy count added to a SQLite counter (n = n + delta): replays add twice."

    def transform(self, source):
        from pyspark.sql import functions as F

        return source.groupBy("key").agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"))

    def start(self, ctx: DriverContext):
        sink = self._sink(ctx)
        return self.start_foreach_batch(ctx, ctx.source, lambda df, batch_id: sink(self.transform(df), batch_id))


class RescaledCounter(StatefulCounter):
    """``key-count`` whose code changes after the first incarnation: an added filter that keeps every
    event (allowed: a stateless filter before the aggregation leaves the state schema alone). Run it
    with ``stop-driver@N:committed/C``: a clean stop and a restart on C executor cores, from the same
    checkpoint — Flink's stop-with-savepoint and rescale. The state and offsets carry over, so the
    result must stay exactly-once, with a consistent cut across the change."""

    def start(self, ctx: DriverContext):
        from pyspark.sql import functions as F

        if ctx.incarnation > 0:
            ctx.source = ctx.source.filter(F.col("id") >= 0)
        return super().start(ctx)


KEY_COUNT = StatefulCounter(
    "key-count", True,
    "streaming groupBy(key) count/sum/ids in update mode, upserted by key: exactly-once with provenance.",
)
API_COUNT = StatefulCounter(
    "api-count", False,
    "streaming groupBy(key).count() in update mode, upserted by key: exactly-once, judged by per-key counts.",
)
API_COUNT_TWO_PHASE = StatefulCounter(
    "api-count-two-phase", False,
    "api-count into a two-phase sink: totals staged by batch id, then published once per batch id: exactly-once.",
    mode="two-phase",
)
API_COUNT_INCREMENT = IncrementingCounter()
RESCALE = RescaledCounter(
    "rescale", True,
    "key-count stopped cleanly and restarted on other executor cores with an added filter: exactly-once across.",
)
