"""A producer that feeds the trial's topic over the trial, one batch of records per committed batch.

Every other pipeline's topic holds all of the trial's records before the first driver starts, and
``maxOffsetsPerTrigger`` cuts them into batches. Real-time mode refuses that option and cuts batches by time (a
batch reads whatever arrives until its duration ends), so a topic written ahead would be read whole by one batch.
The feed writes the first ``chunk`` records (in id order) before the query starts and the next ``chunk`` each time a
batch commits (the controller tells it, as it tells the socket feed), the way a live producer's records meet a
running query, so a fault at batch N meets records in flight. Batch N reads about chunk N once the tasks' Kafka
consumers are warm; a new application's first batch reads little (docs/spark-notes.md, real-time mode) and the
next one the backlog. Records go through an idempotent producer and are acknowledged before the next chunk; what
a killed driver read stays in the topic (Kafka keeps it), unlike the socket feed's lines.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

import polars as pl

# ``KafkaBroker.produce`` waits this long for the broker's acknowledgements (a broker down longer fails the chunk).
PRODUCE_WAIT_S = 60


class KafkaFeed:
    """The chunks, how many went out and how many may have; one thread sends, the controller's listener allows."""

    def __init__(self, broker, topic: str, events: pl.DataFrame, chunk: int,
                 records: Callable[[pl.DataFrame], Iterable], history) -> None:
        ordered = events.sort("id")
        self.chunks = [ordered.slice(start, chunk) for start in range(0, ordered.height, max(1, chunk))]
        self.broker, self.topic, self.records, self.history = broker, topic, records, history
        self.sent = 0  # chunks acknowledged by the broker
        self.allowed = 1  # chunks the feed may have sent by now: the first, then one per commit
        self.error: Exception | None = None
        self.cond = threading.Condition()
        self.closed = False
        self.thread = threading.Thread(target=self._loop, name="kafka-feed", daemon=True)

    def start(self) -> KafkaFeed:
        """The first chunk in the caller's thread (before any driver starts: a refusal is the caller's error), then
        the thread that sends the rest."""
        if self.chunks:
            self._send_next()
        self.thread.start()
        return self

    def advance(self) -> None:
        """A batch committed: one chunk more may go."""
        with self.cond:
            self.allowed += 1
            self.cond.notify_all()

    @property
    def done(self) -> bool:
        return self.sent >= len(self.chunks)

    def _send_next(self) -> None:
        frame = self.chunks[self.sent]
        count = self.broker.produce(self.topic, self.records(frame))  # every record acknowledged, or it raises
        self.sent += 1
        self.history.add("fed", chunk=self.sent - 1, records=count, first_id=int(frame["id"][0]))

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.closed and (self.done or self.sent >= self.allowed):
                    self.cond.wait(0.5)
                if self.closed:
                    return
            try:
                self._send_next()
            except Exception as exc:  # noqa: BLE001 - kept for the trial, which raises it as the harness's
                if not self.closed:  # a chunk cut short by the trial's end is no error
                    self.error = exc
                return

    def close(self) -> None:
        """No chunk more; a send under way is waited for (at most its acknowledgement wait), so the topic is not
        exported or deleted under it."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        if self.thread.is_alive():
            self.thread.join(PRODUCE_WAIT_S + 30)
