"""A foreachBatch that writes each batch to Kafka in one transaction: the pattern users copy to get exactly-once
into Kafka from Spark, whose own Kafka sink is at-least-once.

The transactional id carries the query's name and the batch id, so a replayed batch's producer fences its dead
predecessor and aborts the transaction it left open: a reader that skips aborted records (read_committed) sees
that batch once. That alone does not cover a driver that died after ``commit_transaction`` and before
``commits/N``: the replay commits the batch a second time. ``mode="marker"`` closes that gap the way Kafka's own
exactly-once processing does: the batch id is committed as a consumer group's offset inside the same
transaction (``send_offsets_to_transaction``), and a batch whose marker is already there is skipped.
``mode="batch-id"`` is the pattern without it.
"""

from __future__ import annotations

import json
from collections.abc import Callable

TIMEOUT_S = 30.0


class TransactionalKafkaSink:
    def __init__(self, bootstrap: str, topic: str, app: str, mode: str, phase: Callable[..., None],
                 login: dict[str, str] | None = None) -> None:
        if mode not in ("marker", "batch-id"):
            raise ValueError(f"unknown transactional sink mode {mode!r}")
        self.bootstrap = bootstrap
        self.topic = topic
        self.app = app  # transactional ids and the marker's group: the query's and the trial's topic
        self.mode = mode
        self.phase = phase
        self.login = login or {}  # a user's cluster's (chaos.clusters.kafka.login)

    def conf(self, **settings) -> dict:
        from chaos.clusters.kafka.broker import client_conf

        return client_conf(self.bootstrap, self.login, **settings)

    @property
    def group(self) -> str:
        return f"{self.app}-batches"

    def written(self, batch_id: int) -> bool:
        """Whether a committed transaction already wrote ``batch_id`` (its marker offset is past it)."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(self.conf(**{"group.id": self.group, "enable.auto.commit": False,
                                         "isolation.level": "read_committed", "log_level": 3}))
        try:
            [marker] = consumer.committed([TopicPartition(self.topic, 0)], timeout=TIMEOUT_S)
            return marker.offset > batch_id
        finally:
            consumer.close()

    def __call__(self, df, batch_id: int) -> None:
        from confluent_kafka import Consumer, Producer, TopicPartition

        rows = df.select("id", "key", "value").collect()
        producer = Producer(self.conf(**{"transactional.id": f"{self.app}-{batch_id}", "log_level": 3}))
        producer.init_transactions(TIMEOUT_S)  # fences a dead driver's producer of this batch, aborts its writes
        if self.mode == "marker" and self.written(batch_id):
            self.phase(batch_id, "sink-write", rows=0, skipped=True)
            self.phase(batch_id, "sink-done", rows=0, skipped=True)
            return
        producer.begin_transaction()
        for r in rows:
            producer.produce(self.topic, key=r["key"].encode(),
                             value=json.dumps({"id": r["id"], "key": r["key"], "value": r["value"]}).encode())
        producer.flush(TIMEOUT_S)
        self.phase(batch_id, "sink-write", rows=len(rows))  # in the topic, the transaction still open
        if self.mode == "marker":
            consumer = Consumer(self.conf(**{"group.id": self.group, "log_level": 3}))
            try:
                producer.send_offsets_to_transaction([TopicPartition(self.topic, 0, batch_id + 1)],
                                                     consumer.consumer_group_metadata(), TIMEOUT_S)
            finally:
                consumer.close()
        producer.commit_transaction(TIMEOUT_S)
        self.phase(batch_id, "sink-done", rows=len(rows))
