"""The trial's topics on the harness's broker: made and written before the first driver, exported and deleted after.

The input topic gets one topic of its own per trial (partitions = ``--partitions``), written whole before the
first driver starts: Kafka's offsets are then the events' offsets in their partition, and batch N the same records
in every replay (chaos.jobs.as_written.kafka_options). A pipeline that cuts batches by time (``kafka_fed``, real-time
mode) gets its first batch of records there and the rest as batches commit (chaos/stream/kafkafeed.py). A pipeline
with a Kafka sink gets an output topic, made ahead with the same partitions, read into the run directory at the end.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from chaos.errors import HarnessError
from chaos.stream.kafkafeed import KafkaFeed

OUTPUT_TOPIC = "-out"  # the trial's output topic: its topic's name and this (a pipeline with a Kafka sink)


class TrialTopics:
    """One trial's input topic (and output topic), named after its run directory so a leftover is recognisable."""

    def __init__(self, broker, run_dir: Path, pipeline, history) -> None:
        self.broker, self.dir, self.pipeline, self.history = broker, Path(run_dir), pipeline, history
        self.topic = "streamchaos-" + "".join(c if c.isalnum() or c in "._-" else "-" for c in self.dir.name)
        self.output = self.topic + OUTPUT_TOPIC if pipeline.kafka_sink else None
        self.feed: KafkaFeed | None = None

    def make(self, events: pl.DataFrame, partitions: int, chunk: int) -> None:
        """Both topics made, the input written (or its first chunk fed: its feed's thread starts last, when nothing
        else can fail before the trial's own clean-up owns it)."""
        broker, topic = self.broker, self.topic
        # Event times start in 2026 and may lie ahead of this machine's clock: no retention by time, any timestamp.
        broker.create_topic(topic, partitions, {"retention.ms": "-1", "message.timestamp.after.max.ms": str(2**63 - 1)})
        if self.output:  # Spark's sink writes into it
            broker.create_topic(self.output, partitions, {"retention.ms": "-1"})
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
