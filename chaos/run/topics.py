"""The trial's topics on the harness's broker: made and written before the first driver, exported and deleted after.

The input topic gets one topic of its own per trial (partitions = ``--partitions``), written whole before the
first driver starts: Kafka's offsets are then the events' offsets in their partition, and batch N the same records
in every replay (chaos.jobs.as_written.kafka_options). A pipeline that cuts batches by time (``kafka_fed``, real-time
mode) gets its first batch of records there and the rest as batches commit (chaos/stream/kafkafeed.py). A pipeline
with a Kafka sink gets an output topic, made ahead with the same partitions, read into the run directory at the end.
A topic an ``add-partitions`` fault grows holds back the records keyed to its new partitions (``grown_layout``) and
produces them when the fault adds them (``TrialTopics.grow``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from chaos.errors import HarnessError
from chaos.stream.kafkafeed import KafkaFeed

OUTPUT_TOPIC = "-out"  # the trial's output topic: its topic's name and this (a pipeline with a Kafka sink)


def _grows(partitions: int, faults: Sequence) -> list[tuple[object, int]]:
    """Each ``add-partitions`` fault in the schedule's order, with the partitions the topic has once it fired."""
    total, out = partitions, []
    for fault in sorted((f for f in faults if f.action == "add-partitions"), key=lambda f: f.point):
        total += fault.count or 1
        out.append((fault, total))
    return out


def grown_layout(events: pl.DataFrame, partitions: int, faults: Sequence, events_per_batch: int) -> pl.DataFrame:
    """The events as the topic holds them when ``add-partitions`` faults grow it: from the first id after a
    fault's batch (``(B + 1) * events_per_batch``) on, a record's partition is its key's among the partitions the
    topic has by then, as a producer's default partitioner places keyed records after a resize (a key's later
    records may land in another partition than its earlier ones: Kafka's own warning about adding partitions).
    Offsets are recounted per partition in id order; without such a fault the events are left as they are."""
    grows = _grows(partitions, faults)
    if not grows:
        return events
    ordered = events.sort("id").with_columns(_key=pl.col("key").cast(pl.Utf8).rank("dense").cast(pl.Int64) - 1)
    for fault, total in grows:
        cut = (fault.batch + 1) * events_per_batch
        ordered = ordered.with_columns(partition=pl.when(pl.col("id") >= cut)
                                       .then((pl.col("_key") % total).cast(pl.Int32))
                                       .otherwise(pl.col("partition")))
    return ordered.drop("_key").with_columns(offset=pl.int_range(pl.len()).over("partition").cast(pl.Int64))


def grown_partitions(partitions: int, faults: Sequence) -> int:
    """The partitions the topic has once every ``add-partitions`` fault fired."""
    grows = _grows(partitions, faults)
    return grows[-1][1] if grows else partitions


def grow_targets(partitions: int, faults: Sequence) -> dict[str, int]:
    """Each ``add-partitions`` fault's partition count once it fired, in the schedule's order: one that fires after
    an earlier one missed still reaches its own count."""
    return {fault.spec: total for fault, total in _grows(partitions, faults)}


class TrialTopics:
    """One trial's input topic (and output topic), named after its run directory so a leftover is recognisable."""

    def __init__(self, broker, run_dir: Path, pipeline, history) -> None:
        self.broker, self.dir, self.pipeline, self.history = broker, Path(run_dir), pipeline, history
        self.topic = broker.topic_prefix + "".join(c if c.isalnum() or c in "._-" else "-" for c in self.dir.name)
        self.output = self.topic + OUTPUT_TOPIC if pipeline.kafka_sink else None
        self.feed: KafkaFeed | None = None
        self.partitions = 0  # the input topic's, now
        self.held = pl.DataFrame()  # records keyed to partitions the topic does not have yet
        self.targets: dict[str, int] = {}  # each add-partitions fault's partition count

    def make(self, events: pl.DataFrame, partitions: int, chunk: int, faults: Sequence = ()) -> None:
        """Both topics made, the input written (or its first chunk fed: its feed's thread starts last, when nothing
        else can fail before the trial's own clean-up owns it); records of partitions ``faults`` add held back."""
        broker, topic = self.broker, self.topic
        # Event times start in 2026 and may lie ahead of this machine's clock: no retention by time, any timestamp.
        broker.create_topic(topic, partitions, {"retention.ms": "-1", "message.timestamp.after.max.ms": str(2**63 - 1)})
        if self.output:  # Spark's sink writes into it
            broker.create_topic(self.output, partitions, {"retention.ms": "-1"})
        self.partitions, self.held = partitions, events.filter(pl.col("partition") >= partitions)
        self.targets = grow_targets(partitions, faults)
        events = events.filter(pl.col("partition") < partitions)
        if self.pipeline.kafka_fed:
            self.feed = KafkaFeed(broker, topic, events, chunk, self.pipeline.kafka_records, self.history).start()
        else:
            broker.produce(topic, self.pipeline.kafka_records(events))
        ends = broker.end_offsets(topic)
        counts = {str(p): n for p, n in events.group_by("partition").len().iter_rows()}
        if self.feed is None and {p: n for p, n in ends.items() if n} != counts:
            raise HarnessError(f"the broker's topic {topic} holds {ends} records per partition, not the trial's "
                               f"{counts}")
        self.history.add("kafka", topic=topic, partitions=partitions, ends=ends, bootstrap=broker.bootstrap,
                         **({"chunks": len(self.feed.chunks)} if self.feed else {}))

    def grow(self, fault) -> dict:
        """The input topic grown to the partitions ``fault`` (an ``add-partitions``) gives it and the records keyed
        to them produced there, each acknowledged; what was done, for the fault's history."""
        total = max(self.partitions, self.targets.get(fault.spec, self.partitions + (fault.count or 1)))
        if total > self.partitions:
            self.broker.add_partitions(self.topic, total)
        deadline = time.monotonic() + 30  # a producer naming a partition its metadata lacks fails the record
        while self._shown() < total:
            if time.monotonic() > deadline:
                raise HarnessError(f"the broker's topic {self.topic} did not show {total} partitions in 30 s")
            time.sleep(0.2)
        now = self.held.filter(pl.col("partition") < total)
        self.held = self.held.filter(pl.col("partition") >= total)
        produced = self.broker.produce(self.topic, self.pipeline.kafka_records(now)) if now.height else 0
        self.partitions = total
        return {"topic": self.topic, "partitions": total, "records": produced,
                "first_id": int(now["id"].min()) if now.height else None}

    def _shown(self) -> int:
        """The input topic's partitions as the brokers answer now; 0 while a broker a fault just killed took the
        client's connection with it (KafkaError _DESTROY_BROKER): asked again until the wait's deadline."""
        from confluent_kafka import KafkaException

        try:
            return len(self.broker.end_offsets(self.topic))
        except KafkaException:
            return 0

    def unsent(self) -> str | None:
        """What an ``add-partitions`` that did not fire left out of the topic, for a stalled trial's reason."""
        if not self.held.height:
            return None
        return (f"{self.held.height} records held back for partitions an add-partitions fault was to add never "
                "reached the topic (the fault did not fire): the harness's, not Spark's")

    def end(self, export: bool) -> None:
        """The feed stopped; the output topic's records into the run directory (what the verdict is judged from),
        then the trial's topics deleted."""
        from chaos.clusters.kafka.broker import OUTPUT_RECORDS

        if self.feed is not None:
            self.feed.close()
        if export and self.output:
            self.broker.export(self.output, self.dir / "sink" / OUTPUT_RECORDS)
        for topic in (self.topic, self.output):
            if topic is None:
                continue
            try:
                self.broker.delete_topic(topic)
            except Exception as exc:  # a broker a fault left down: the topic goes with the broker
                self.history.add("kafka", deleted=False, topic=topic, error=str(exc)[:200])

    def raise_feed_error(self) -> None:
        """A chunk the broker did not take (down longer than the producer waits): the trial starved of input is
        the harness's failure, not a verdict on the pipeline."""
        if self.feed is not None and self.feed.error is not None:
            raise HarnessError(f"feeding the trial's topic {self.topic}: {self.feed.error}")
