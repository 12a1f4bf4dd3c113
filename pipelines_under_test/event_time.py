"""Event-time pipelines: a windowed count on three state stores, and deduplication within the watermark.

``windowed-count`` (and ``-rocksdb``, ``-changelog``, their ``-v2``) counts events per key in tumbling 10 s
event-time windows with a 5 s watermark, in append mode: a window is written once, when the
watermark passes its end, and upserted by ``key@window`` with the ids it counted. The window state
and the watermark live in the checkpoint (state store version N+1, offsets/N) and are restored
together, so a replayed batch emits the same windows again and the upsert absorbs it: exactly-once,
with provenance, and a consistent cut at every batch. The three variants mirror Flink's heap,
RocksDB and incremental (changelog) backends: the HDFS-backed provider, RocksDB snapshots per
version, and RocksDB with changelog checkpointing; the two RocksDB ones also on Spark 4's state checkpoint
format v2, where the commit log names each batch's state files by id.

``dedup-within-watermark`` runs ``dropDuplicatesWithinWatermark`` on the payload (key, value, event
time) of a stream the producer partly re-sent under new ids, and writes the survivors idempotently
by batch id. The dedup state is checkpointed with the offsets, so a replay drops the same copies:
exactly-once per payload segment (see ``properties.watermark.dedup_segments``).

Both turn off no-data micro-batches so that every batch carries input and the watermark of batch M
is a function of the events alone (``properties/watermark.py``).
"""

from __future__ import annotations

import polars as pl

from pipelines_under_test.base import DriverContext
from pipelines_under_test.counts import StatefulCounter
from pipelines_under_test.passthrough import SqlitePassthrough
from properties import oracle, watermark

WINDOW_MS = 10_000
DELAY_MS = 5_000
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
STATE_STORES: dict[str, dict[str, str]] = {
    "hdfs": {},
    "rocksdb": {PROVIDER: ROCKSDB},
    "changelog": {PROVIDER: ROCKSDB, CHANGELOG: "true"},
}
# Checkpoint format v2: each commits/N names the state files of its batch by unique id (``stateUniqueIds``)
# instead of the reader taking version N's files; RocksDB only (HDFS-backed state refuses it, docs/spark-notes.md).
CHECKPOINT_V2 = {"spark.sql.streaming.stateStore.checkpointFormatVersion": "2"}
STATE_STORES["rocksdb-v2"] = {**STATE_STORES["rocksdb"], **CHECKPOINT_V2}
STATE_STORES["changelog-v2"] = {**STATE_STORES["changelog"], **CHECKPOINT_V2}


def event_time_conf(ctx: DriverContext, store: str = "hdfs") -> None:
    """Session settings of an event-time query, made before it starts (offsets/0 pins the provider)."""
    ctx.spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    for key, value in STATE_STORES[store].items():
        ctx.spark.conf.set(key, value)


def window_counts(frame):
    """Count, sum and ids per key and 10 s tumbling window of a watermarked ``frame``, keyed ``key@start``."""
    from pyspark.sql import functions as F

    counted = (frame.groupBy(F.window("event_time", f"{WINDOW_MS // 1000} seconds"), "key")
               .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"), F.collect_list("id").alias("ids")))
    return counted.select(
        F.concat("key", F.lit("@"), F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss")).alias("key"),
        "n", "total", "ids")


class WindowedCount(StatefulCounter):
    """Tumbling-window count per key, append mode, upserted by ``key@window start``."""

    state_columns = ("concat(key.key, '@', date_format(key.window.start, \"yyyy-MM-dd'T'HH:mm:ss\")) AS key",
                     "value.count AS n", "value.sum AS total")

    def __init__(self, name: str, store: str, description: str) -> None:
        super().__init__(name, True, description)
        self.store = store
        conf = STATE_STORES[store]  # RocksDB replays changes only with changelog checkpointing
        self.state_change_feed = conf.get(PROVIDER) != ROCKSDB or conf.get(CHANGELOG) == "true"

    def transform(self, source):
        return window_counts(source.withWatermark("event_time", f"{DELAY_MS // 1000} seconds"))

    def start(self, ctx: DriverContext):
        event_time_conf(ctx, self.store)
        return self.start_foreach_batch(ctx, self.transform(ctx.source), self._sink(ctx), output_mode="append")

    def oracle(self, events: pl.DataFrame) -> pl.DataFrame:
        return watermark.window_expected(events, WINDOW_MS, DELAY_MS)

    def unexplained(self, output: pl.DataFrame, events: pl.DataFrame) -> list[dict]:
        return watermark.window_unexplained(output, events, WINDOW_MS)

    def expected_counts(self, events: pl.DataFrame) -> pl.DataFrame:
        raise NotImplementedError("windowed-count has provenance")

    def expected_state(self, events: pl.DataFrame) -> pl.DataFrame:
        return watermark.window_state(events, WINDOW_MS, DELAY_MS)


DEDUP_COLUMNS = ("key", "value", "event_time")


class DedupWithinWatermark(SqlitePassthrough):
    """``dropDuplicatesWithinWatermark`` on the payload, written idempotently by batch id."""

    stream_defaults = {"resent_fraction": 0.1}  # noqa: RUF012
    state_store = True  # the dedup operator's, not checked by the consistent cut

    def __init__(self) -> None:
        super().__init__(
            "dedup-within-watermark", "idempotent", "exactly-once",
            "dropDuplicatesWithinWatermark(key, value, event_time) over re-sent records, idempotent sink.")

    def transform(self, source):
        if not source.isStreaming:  # Spark refuses the operator in batch; there it is dropDuplicates
            return source.dropDuplicates(list(DEDUP_COLUMNS))
        return (source.withWatermark("event_time", f"{DELAY_MS // 1000} seconds")
                .dropDuplicatesWithinWatermark(list(DEDUP_COLUMNS)))

    def start(self, ctx: DriverContext):
        event_time_conf(ctx)
        return super().start(ctx)

    def oracle(self, events: pl.DataFrame) -> pl.DataFrame:
        kept = watermark.dedup_segments(events, DELAY_MS, DEDUP_COLUMNS)["kept"]
        return events.select("id").sort("id").with_columns(required=kept, multiplicity=kept.cast(pl.Int64))

    def effect_ids(self, output: pl.DataFrame, events: pl.DataFrame) -> pl.Series:
        """Each surviving row counts for its segment's root: which copy Spark keeps in a batch is not ours to say."""
        return watermark.segment_roots(output["id"], events, DELAY_MS, DEDUP_COLUMNS)

    def unexplained(self, output: pl.DataFrame, events: pl.DataFrame) -> list[dict]:
        return oracle.passthrough_unexplained(output, events)


class DedupWindowCount(WindowedCount):
    """Two stateful operators chained in one query: ``dropDuplicatesWithinWatermark`` on the payload, then the
    windowed count of what survives (Spark 3.5+ runs several stateful operators in append mode, each with its
    own state store and the watermark passed down between them). The producer re-sent part of the stream
    under new ids; the dedup drops the copies and the count sees each payload once. Both states are
    versioned with the offsets, so a replay drops the same copies and emits the same windows, which the
    upsert absorbs: exactly-once, counted per payload segment (the id of the copy Spark kept stands for its
    segment's first). The consistent cut reads one operator's state; with two it is not checked."""

    stream_defaults = {"resent_fraction": 0.1}  # noqa: RUF012
    state = False
    state_store = True

    def __init__(self) -> None:
        super().__init__("dedup-window-count", "hdfs",
                         "dropDuplicatesWithinWatermark(key, value, event_time), then the 10 s windowed count: two "
                         "chained stateful operators, append mode, upserted by window: exactly-once.")

    def transform(self, source):
        marked = source.withWatermark("event_time", f"{DELAY_MS // 1000} seconds")
        if source.isStreaming:
            return window_counts(marked.dropDuplicatesWithinWatermark(list(DEDUP_COLUMNS)))
        return window_counts(marked.dropDuplicates(list(DEDUP_COLUMNS)))  # batch: the oracle test's query

    def oracle(self, events: pl.DataFrame) -> pl.DataFrame:
        windows = watermark.window_expected(events, WINDOW_MS, DELAY_MS)
        first = watermark.dedup_segments(events, DELAY_MS, DEDUP_COLUMNS).select("id", "kept")
        owed = windows.join(first, on="id", how="left").with_columns(pl.col("required") & pl.col("kept"))
        return owed.select("id", "required", multiplicity=pl.col("required").cast(pl.Int64)).sort("id")

    def effect_ids(self, output: pl.DataFrame, events: pl.DataFrame) -> pl.Series:
        """The copy Spark kept in a batch counts for its segment's first (same key, value and event time)."""
        return watermark.segment_roots(self.observed_ids(output), events, DELAY_MS, DEDUP_COLUMNS)

    def expected_state(self, events: pl.DataFrame) -> pl.DataFrame:
        raise NotImplementedError("dedup-window-count keeps two operators' state: the cut is not checked")


WINDOWED_COUNT = WindowedCount(
    "windowed-count", "hdfs",
    "10 s tumbling-window count per key, 5 s watermark, append mode, HDFS-backed state: exactly-once.")
WINDOWED_COUNT_ROCKSDB = WindowedCount(
    "windowed-count-rocksdb", "rocksdb",
    "the windowed count on the RocksDB state store (snapshot per version): exactly-once.")
WINDOWED_COUNT_CHANGELOG = WindowedCount(
    "windowed-count-changelog", "changelog",
    "the windowed count on RocksDB with changelog checkpointing (incremental): exactly-once.")
WINDOWED_COUNT_ROCKSDB_V2 = WindowedCount(
    "windowed-count-rocksdb-v2", "rocksdb-v2",
    "the windowed count on RocksDB, state checkpoint format v2 (state files named by id in commits/N): "
    "exactly-once.")
WINDOWED_COUNT_CHANGELOG_V2 = WindowedCount(
    "windowed-count-changelog-v2", "changelog-v2",
    "the windowed count on RocksDB with changelog checkpointing, state checkpoint format v2: exactly-once.")
DEDUP_WITHIN_WATERMARK = DedupWithinWatermark()
DEDUP_WINDOW_COUNT = DedupWindowCount()
