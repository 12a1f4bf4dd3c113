"""Kafka in, Kafka out: the pipeline most streaming jobs are, through Spark's own Kafka source and sink.

``kafka-passthrough`` reads the trial's topic on the harness's broker with Spark's Kafka connector and writes
every record, re-encoded as JSON, to the trial's output topic with Spark's Kafka sink. The sink's producers are
not transactional: when the driver dies after a batch's records reached the output topic but before
``commits/N``, the restarted query writes batch N again from the same offsets and the topic holds it twice.
At-least-once, as Spark's Kafka integration guide says of its sink (Kafka only supports at-least-once writes:
some records may be duplicated).

``kafka-windowed-count`` is ``windowed-count`` reading the same topic: Kafka's offsets are saved in ``offsets/N``
with the window state, and the foreachBatch upsert by window makes a replay overwrite itself: exactly-once.

No Python code runs in either: the batch's phases come from the checkpoint (``chaos/machine/jvm``'s
``CheckpointBarrier``): ``planned`` once ``offsets/N`` is written, ``sink-done`` just before ``commits/N``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from chaos.clusters.kafka.broker import OUTPUT_RECORDS
from chaos.clusters.kafka.login import of as login_of
from chaos.clusters.kafka.login import spark_options
from chaos.scenario.faults import PHASES
from pipelines_under_test.base import DriverContext
from pipelines_under_test.event_time import WindowedCount, event_time_conf
from pipelines_under_test.passthrough import RowPassthrough

EVENT_DDL = "id BIGINT, key STRING, value BIGINT, event_time TIMESTAMP"


def event_records(events: pl.DataFrame) -> Iterator[tuple[int, bytes, bytes, int]]:
    """The trial's events as Kafka records (partition, key, JSON value, timestamp ms), per partition in id order."""
    frame = events.sort("partition", "offset")
    for id_, key, value, ms, part in zip(frame["id"], frame["key"], frame["value"],
                                         frame["event_time"].dt.epoch("ms"), frame["partition"], strict=True):
        at = datetime.fromtimestamp(int(ms) / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        payload = {"id": int(id_), "key": key, "value": int(value), "event_time": at}
        yield int(part), key.encode(), json.dumps(payload, separators=(",", ":")).encode(), int(ms)


def read_topic_rows(sink_dir: Path, committed_only: bool = False) -> pl.DataFrame:
    """The output topic's JSON values as ``id, key, value`` rows (every record, or the committed ones)."""
    path = Path(sink_dir) / OUTPUT_RECORDS
    schema = {"id": pl.Int64, "key": pl.Utf8, "value": pl.Int64}
    if not path.exists():
        return pl.DataFrame(schema=schema)
    records = pl.read_parquet(path)
    if committed_only:
        records = records.filter(pl.col("committed"))
    rows = [json.loads(v) for v in records["value"]]
    return pl.DataFrame([(r["id"], r["key"], r["value"]) for r in rows], schema=schema, orient="row")


def topic_findings(sink_dir: Path) -> dict | None:
    """The output topic beyond the judged rows: how many records it holds, how many a read_committed consumer sees
    (the rest are aborted or open transactions' records, which a read_uncommitted consumer counts too)."""
    path = Path(sink_dir) / OUTPUT_RECORDS
    if not path.exists():
        return None
    committed = pl.read_parquet(path, columns=["committed"])["committed"]
    return {"output_topic": {"records": committed.len(), "committed": int(committed.sum()),
                             "not_committed": int((~committed).sum())}}


class KafkaSourced:
    """A pipeline that reads the trial's topic through Spark's Kafka connector (mixed in ahead of its base): the
    trial produces its events there, ``planned`` comes from the checkpoint, no ``reading`` is reported."""

    kafka = True
    source_frame = False
    own_source = True  # Spark's connector reads: the harness's source reports nothing
    checkpoint_phases: tuple[str, ...] = ("planned",)
    task_phases: tuple[str, ...] = ("reading",)
    fail_on_data_loss: bool | None = None  # the source's failOnDataLoss; None: Spark's default (true)

    def unavailable(self) -> str | None:
        from chaos.clusters.kafka.jars import connector_available
        from chaos.machine.jvm import checkpoint_barrier_unavailable

        return connector_available() or checkpoint_barrier_unavailable()

    def kafka_records(self, events: pl.DataFrame):
        return event_records(events)

    def read_kafka(self, ctx: DriverContext, *, max_offsets: bool = True):
        """The trial's topic through Spark's Kafka connector, as the events' columns (batches of
        ``--events-per-batch`` records, unless ``max_offsets`` is false: real-time mode refuses the option)."""
        from pyspark.sql import functions as F

        k = ctx.kafka or {}
        raw = (ctx.spark.readStream.format("kafka").option("kafka.bootstrap.servers", k["bootstrap"])
               .options(**spark_options(login_of(k)))
               .option("subscribe", k["topic"]).option("startingOffsets", "earliest"))
        if max_offsets:
            raw = raw.option("maxOffsetsPerTrigger", str(k["max_offsets"]))
        if self.fail_on_data_loss is not None:
            raw = raw.option("failOnDataLoss", str(self.fail_on_data_loss).lower())
        return raw.load().select(F.from_json(F.col("value").cast("string"), EVENT_DDL).alias("e")).select("e.*")


class KafkaPassthrough(KafkaSourced, RowPassthrough):
    """Every record of the trial's topic to its output topic, through Spark's Kafka source and sink."""

    kafka_sink = True
    sink_channel = True  # Spark's producers reach the broker through the sink channel's proxy
    checkpoint_phases = ("planned", "sink-done")
    phases = ("planned", "reading", "sink-done", "committed")
    # The standard mix's windows at the phases it has (chaos/campaign/conformance.py), the broker's kill too.
    conformance_mix = ("kill-driver@1:sink-done kill-driver@3:planned",
                       "kill-driver@1:planned kill-executor@2:sink-done kill-driver@3:committed",
                       "kill-broker@1:planned/2s kill-driver@2:sink-done")

    def start(self, ctx: DriverContext):
        from pyspark.sql import functions as F

        k = ctx.kafka or {}
        rows = self.transform(self.read_kafka(ctx))
        out = rows.select(F.col("key"), F.to_json(F.struct("id", "key", "value")).alias("value"))
        bootstrap = k.get("sink_bootstrap") or k["bootstrap"]
        return (out.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                .options(**spark_options(login_of(k)))
                .option("topic", k["output"]).option("checkpointLocation", ctx.checkpoint)
                .queryName(self.query_name).start())

    def prepare_sink(self, sink_dir: Path) -> None:
        """The output topic is made with the trial's topic (chaos/run/trial.py), its records read at the end."""

    def read_output(self, sink_dir: Path) -> pl.DataFrame:
        return read_topic_rows(sink_dir)

    def sink_findings(self, sink_dir: Path) -> dict | None:
        return topic_findings(sink_dir)

    def read_deliveries(self, sink_dir: Path) -> None:
        return None  # Spark's sink writes per task: no batch-level deliveries view


REAL_TIME_SPARK = (4, 1)
REAL_TIME_BATCH_MS = 4000  # a batch's duration: Spark's checkpoint interval in real-time mode


class KafkaRealTime(KafkaPassthrough):
    """``kafka-passthrough`` under real-time mode (``trigger(realTime=...)``, Spark 4.1+): long-running tasks read
    each partition until the batch's duration ends, writing every record to the output topic as it comes; the
    driver writes ``offsets/N`` (the offsets the tasks reached) and ``commits/N`` only then, one after the other.
    So ``planned`` and ``sink-done`` both come after the batch's records reached the output topic, ``reading`` is
    its tasks' start. A restart purges an ``offsets/N`` without ``commits/N`` and reads batch N again from
    ``offsets/N-1``: Spark's real-time guide promises at-least-once delivery to the Kafka sink. The topic is fed a
    batch of records per commit (``kafka_fed``): written ahead, batch 0 would read it whole."""

    kafka_fed = True
    phases = ("reading", "planned", "sink-done", "committed")
    # From batch 2: a run's first batches are near empty (its tasks' consumers start after the deadline is set).
    conformance_mix = ("kill-driver@2:sink-done kill-driver@4:reading",
                       "kill-driver@2:planned kill-executor@3:reading kill-driver@4:committed",
                       "kill-broker@2:reading/2s kill-driver@3:sink-done")

    def unavailable(self) -> str | None:
        import pyspark

        if tuple(int(p) for p in pyspark.__version__.split(".")[:2]) < REAL_TIME_SPARK:
            return (f"real-time mode needs Spark 4.1 or later, this is {pyspark.__version__}: streamchaos spark add "
                    "4.2.0, then streamchaos --spark 4.2.0 ...")
        return super().unavailable()

    def start(self, ctx: DriverContext):
        from pyspark.sql import functions as F

        k = ctx.kafka or {}
        # Spark's floor is 5 s (spark.sql.streaming.realTimeMode.minBatchDuration): lowered so a trial has batches.
        ctx.spark.conf.set("spark.sql.streaming.realTimeMode.minBatchDuration", str(REAL_TIME_BATCH_MS))
        rows = self.transform(self.read_kafka(ctx, max_offsets=False))
        out = rows.select(F.col("key"), F.to_json(F.struct("id", "key", "value")).alias("value"))
        bootstrap = k.get("sink_bootstrap") or k["bootstrap"]
        return (out.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                .options(**spark_options(login_of(k)))
                .option("topic", k["output"]).option("checkpointLocation", ctx.checkpoint).outputMode("update")
                .trigger(realTime=f"{REAL_TIME_BATCH_MS} milliseconds")
                .queryName(self.query_name).start())


KAFKA_PASSTHROUGH = KafkaPassthrough(
    "kafka-passthrough", "kafka", "at-least-once",
    "Spark's Kafka source to Spark's Kafka sink: a batch replayed after its records reached the topic is "
    "written again (Spark documents its Kafka sink as at-least-once).",
)

KAFKA_REAL_TIME = KafkaRealTime(
    "kafka-real-time", "kafka", "at-least-once",
    "Spark's Kafka source to its Kafka sink in real-time mode (4 s batches): records reach the output topic while "
    "the batch runs, its offsets and commit are written at its end; a replay writes them again (at-least-once, as "
    "Spark's real-time guide says of the Kafka sink).",
)


class KafkaWindowedCount(KafkaSourced, WindowedCount):
    """``windowed-count`` on Spark's Kafka source: the watermark, the window state and the upsert by window are
    the same; the offsets in the checkpoint are Kafka's."""

    phases = PHASES
    conformance_mix = ("kill-driver@1:sink-done kill-driver@3:sink-write",
                       "kill-driver@1:state-commit kill-executor@2:sink-write kill-driver@3:committed",
                       "kill-broker@1:planned/2s kill-driver@2:planned kill-driver@4:sink-done")

    def start(self, ctx: DriverContext):
        event_time_conf(ctx, self.store)
        return self.start_foreach_batch(ctx, self.transform(self.read_kafka(ctx)), self._sink(ctx),
                                        output_mode="append")


KAFKA_WINDOWED_COUNT = KafkaWindowedCount(
    "kafka-windowed-count", "hdfs",
    "windowed-count on Spark's Kafka source: 10 s windows per key, 5 s watermark, append mode, upserted by window "
    "into SQLite (exactly-once: Kafka's offsets are replayed with the state).",
)


class KafkaTransactional(KafkaSourced, RowPassthrough):
    """Every record of the trial's topic to its output topic from a foreachBatch, one Kafka transaction per batch
    (chaos/stream/sinks/kafka_transactional.py), judged on what a read_committed consumer sees."""

    kafka_sink = True
    sink_channel = True
    phases = ("planned", "reading", "sink-write", "sink-done", "committed")  # its foreachBatch: the sink phases

    def start(self, ctx: DriverContext):
        from chaos.stream.sinks.kafka_transactional import TransactionalKafkaSink

        k = ctx.kafka or {}
        sink = TransactionalKafkaSink(k.get("sink_bootstrap") or k["bootstrap"], k["output"],
                                      f"{k['topic']}-{self.query_name}", self.mode, ctx.phase, login_of(k))
        return self.start_foreach_batch(ctx, self.transform(self.read_kafka(ctx)), sink)

    def read_output(self, sink_dir: Path) -> pl.DataFrame:
        return read_topic_rows(sink_dir, committed_only=True)

    def sink_findings(self, sink_dir: Path) -> dict | None:
        return topic_findings(sink_dir)


KAFKA_TRANSACTIONAL = KafkaTransactional(
    "kafka-transactional", "marker", "exactly-once",
    "foreachBatch writing each batch in one Kafka transaction (transactional id: query and batch id) that also "
    "commits the batch id as a consumer group's offset; a batch whose offset is there is skipped. Judged on "
    "committed reads.",
)
KAFKA_TRANSACTIONAL_ID = KafkaTransactional(
    "kafka-transactional-id", "batch-id", "at-least-once",
    "the same transaction per batch without the marker: a replay fences and aborts an open transaction, but a "
    "batch committed before the driver died is committed again. Judged on committed reads.",
)
