"""A job's own kafka-python clients reach the run's broker and topic (chaos.jobs.kafka.kafka_python), as its
confluent_kafka ones do; the harness's and a job's outside a run are left as written."""

from __future__ import annotations

from pathlib import Path

import kafka
import kafka.consumer
import kafka.producer
import pytest
from kafka.consumer.fetcher import ConsumerRecord
from kafka.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

from chaos.errors import UserError
from chaos.jobs.kafka import kafka_python as kafka_python_clients
from chaos.jobs.kafka import sink as kafka_sink
from tests.conftest import KAFKA_ROUTE as ROUTE


def test_settings_name_the_trials_broker_login_ids_and_groups():
    conf = kafka_python_clients.configs(ROUTE, {"bootstrap_servers": ["kafka:9092"], "transactional_id": "writer",
                                                "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
                                                "ssl_cafile": "/ca", "acks": "all", "api_version": (0, 10)})
    assert conf == {"bootstrap_servers": "127.0.0.1:1", "transactional_id": "streamchaos-t1-out.writer", "acks": "all"}
    as_written = {"bootstrap_servers": "kafka:9092"}
    assert kafka_python_clients.configs(None, as_written) == as_written
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";'
    login = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": jaas}
    assert kafka_python_clients.login_configs(login) == {
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "u",
        "sasl_plain_password": "p"}
    with pytest.raises(UserError, match="kafka-python client of the job cannot log in with ssl.ca.pem"):
        kafka_python_clients.login_configs({"security.protocol": "SSL", "ssl.truststore.certificates": "-----BEGIN"})


def test_only_clients_the_job_makes_in_a_run_are_rerouted(kafka_rerouted):
    """The harness's own kafka-python clients, and a job's outside a run, keep what they were given (the job's
    in a run are checked on a recording base class below, and against a real broker in test_kafka_spark.py)."""
    harness = {"__name__": "chaos.clusters.kafka.broker"}
    exec("from kafka import KafkaProducer\n"  # noqa: S102
         "p = KafkaProducer(bootstrap_servers='x:1', api_version=(3, 0))\n", harness)
    assert harness["p"].config["bootstrap_servers"] == "x:1" and harness["p"].__dict__["_streamchaos_route"] is None
    harness["p"].close(timeout=1)
    kafka_sink.end()  # no run: a job's client is left as it was made
    job = {"__name__": "orders_job"}
    exec("from kafka import KafkaConsumer\n"  # noqa: S102 - a job module's own code
         "c = KafkaConsumer('orders-clean', bootstrap_servers='kafka:9092', group_id='g', api_version=(3, 0))\n",
         job)
    assert job["c"].config["group_id"] == "g" and job["c"].subscription() == {"orders-clean"}
    job["c"].close()


def test_the_rerouted_classes_pickle_by_reference(kafka_rerouted):
    """A job's function referring to ``KafkaProducer`` reaches an executor's worker as kafka-python's class, which
    the worker has rerouted too (chaos.jobs.databases.on_executors)."""
    import pickle

    from pyspark import cloudpickle

    assert pickle.loads(cloudpickle.dumps(kafka.KafkaProducer)) is kafka.KafkaProducer  # noqa: S301
    assert kafka.producer.KafkaProducer is kafka.KafkaProducer and kafka.KafkaProducer._streamchaos_rerouted


def record(topic: str, partition: int, offset: int) -> ConsumerRecord:
    return ConsumerRecord(**{**dict.fromkeys(ConsumerRecord._fields), "topic": topic, "partition": partition,
                             "offset": offset, "key": b"k", "value": b"v"})


class _Recording:
    """A consumer's and producer's base class that records what reached it: what kafka-python would be given."""

    def __init__(self, *topics, **configs):
        self.topics, self.configs, self.calls = topics, configs, []

    def send(self, topic, value=None, key=None):
        self.calls.append(("send", topic, value))

    def commit_async(self, offsets=None, callback=None):
        callback(offsets, "response")

    def send_offsets_to_transaction(self, offsets, group_metadata):
        self.calls.append(("offsets", sorted(tp.topic for tp in offsets), group_metadata))

    def assign(self, partitions):
        self.calls.append(("assign", [(tp.topic, tp.partition) for tp in partitions]))

    def seek(self, partition, offset):
        self.calls.append(("seek", partition.topic, offset))

    def pause(self, *partitions):
        self.calls.append(("pause", [tp.topic for tp in partitions]))

    def subscribe(self, topics=(), pattern=None, listener=None):
        self.calls.append(("subscribe", list(topics), pattern))
        self.listener = listener

    def poll(self, timeout_ms=0):
        tp = TopicPartition(ROUTE["topic"], 0)
        return {tp: [record(ROUTE["topic"], 0, 3)]}

    def end_offsets(self, partitions):
        return {tp: 42 for tp in partitions}

    def __next__(self):
        return record(ROUTE["topic"], 1, 4)


def test_topics_and_partitions_move_to_the_trials_and_come_back_named_as_the_jobs(kafka_rerouted):
    producer_cls = kafka_python_clients.rerouted(_Recording, kafka_python_clients.PRODUCER_METHODS)
    consumer_cls = kafka_python_clients.rerouted(_Recording, kafka_python_clients.CONSUMER_METHODS)
    job = {"__name__": "orders_job", "P": producer_cls, "C": consumer_cls}
    exec("p = P(bootstrap_servers='kafka:9092', transactional_id='w')\n"  # noqa: S102
         "c = C('orders-clean', 'other', bootstrap_servers='kafka:9092', group_id='g')\n", job)
    producer, consumer = job["p"], job["c"]
    assert producer.configs == {"bootstrap_servers": "127.0.0.1:1", "transactional_id": "streamchaos-t1-out.w"}
    assert consumer.configs["group_id"] == "streamchaos-t1-out.g"
    assert consumer.topics == (ROUTE["topic"], "other")
    from pyspark.sql import Row

    row = Row(order_id="o-1", amount=5)
    producer.send("orders-clean", value=row)  # a Row is a tuple: the job's value, passed as it is
    producer.send(topic="dead-letters", value=[TopicPartition("orders-clean", 0)])
    producer.send_offsets_to_transaction({TopicPartition("orders-clean", 0): OffsetAndMetadata(5, "", -1)}, "g")
    producer.send_offsets_to_transaction({}, ConsumerGroupMetadata("g"))
    producer.send_offsets_to_transaction({}, ConsumerGroupMetadata("streamchaos-t1-out.g"))
    assert producer.calls == [("send", ROUTE["topic"], row), ("send", "dead-letters", [("orders-clean", 0)]),
                              ("offsets", [ROUTE["topic"]], "streamchaos-t1-out.g"),
                              ("offsets", [], ConsumerGroupMetadata("streamchaos-t1-out.g")),
                              ("offsets", [], ConsumerGroupMetadata("streamchaos-t1-out.g"))]
    assert producer.calls[0][2].asDict() == {"order_id": "o-1", "amount": 5}
    consumer.assign([TopicPartition("orders-clean", 0), TopicPartition("other", 1)])
    consumer.seek(TopicPartition("orders-clean", 0), 7)
    consumer.pause(TopicPartition("orders-clean", 0))
    seen = []

    class Listener:
        def on_partitions_revoked(self, revoked):
            seen.append(sorted(tp.topic for tp in revoked))

        def on_partitions_assigned(self, assigned):
            seen.append(sorted(tp.topic for tp in assigned))

    consumer.subscribe(["orders-clean"], listener=Listener())
    consumer.listener.on_partitions_assigned({TopicPartition(ROUTE["topic"], 0)})
    assert seen == [["orders-clean"]]
    consumer.subscribe(pattern="^orders-.*")  # matches the named topic: the trial's topic alone
    consumer.subscribe(pattern="^audit-.*")  # another: left as written
    assert consumer.calls == [("assign", [(ROUTE["topic"], 0), ("other", 1)]), ("seek", ROUTE["topic"], 7),
                              ("pause", [ROUTE["topic"]]), ("subscribe", [ROUTE["topic"]], None),
                              ("subscribe", [ROUTE["topic"]], None), ("subscribe", [], "^audit-.*")]
    handed = []
    consumer.commit_async({TopicPartition("orders-clean", 0): OffsetAndMetadata(5, "", -1)},
                          lambda offsets, response: handed.extend(tp.topic for tp in offsets))
    assert handed == ["orders-clean"]
    (tp, records), = consumer.poll(1000).items()
    assert tp == TopicPartition("orders-clean", 0) and records[0].topic == "orders-clean" and records[0].offset == 3
    assert next(consumer).topic == "orders-clean"
    assert consumer.end_offsets([TopicPartition("orders-clean", 0)]) == {TopicPartition("orders-clean", 0): 42}


def test_calls_kafka_python_makes_on_itself_reach_it_as_they_are(kafka_rerouted):
    """Its record iterator polls and its constructor subscribes through the (rerouted) methods: those calls see the
    trial's names, or the iterator would not find the partitions it fetches."""
    consumer_cls = kafka_python_clients.rerouted(_Recording, kafka_python_clients.CONSUMER_METHODS)
    job = {"__name__": "orders_job", "C": consumer_cls}
    exec("c = C(bootstrap_servers='kafka:9092', group_id='g')\n", job)  # noqa: S102
    itself = {"__name__": "kafka.consumer.group", "c": job["c"]}
    exec("polled = c.poll(1000)\n", itself)  # noqa: S102 - as kafka-python's own module calls it
    assert [tp.topic for tp in itself["polled"]] == [ROUTE["topic"]]
    assert [tp.topic for tp in job["c"].poll(1000)] == ["orders-clean"]


def test_a_listener_is_one_of_kafka_pythons_and_an_async_one_stays_async():
    import asyncio

    from kafka import AsyncConsumerRebalanceListener, ConsumerRebalanceListener

    names, seen = {ROUTE["topic"]: "orders-clean"}, []

    class Plain(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            seen.append(("revoked", sorted(tp.topic for tp in revoked)))

        def on_partitions_assigned(self, assigned):
            seen.append(("assigned", sorted(tp.topic for tp in assigned)))

    class Async(AsyncConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            seen.append(("async revoked", sorted(tp.topic for tp in revoked)))

        async def on_partitions_assigned(self, assigned):
            seen.append(("async assigned", sorted(tp.topic for tp in assigned)))

    trial = {TopicPartition(ROUTE["topic"], 0)}
    plain = kafka_python_clients._listener(names, Plain())
    assert isinstance(plain, ConsumerRebalanceListener)
    plain.on_partitions_assigned(trial)
    plain.on_partitions_lost(trial)  # none of its own: revoked
    wrapped = kafka_python_clients._listener(names, Async())
    assert isinstance(wrapped, AsyncConsumerRebalanceListener)
    asyncio.run(wrapped.on_partitions_assigned(trial))
    assert seen == [("assigned", ["orders-clean"]), ("revoked", ["orders-clean"]),
                    ("async assigned", ["orders-clean"])]


def test_a_sends_record_metadata_names_the_jobs_topic(kafka_rerouted):
    """``send(...).get()`` and its callbacks: the record's metadata names the topic the job sent to, resolved when
    kafka-python's own future is (a batch acknowledged at offset 40, this record its third)."""
    from kafka.producer.future import FutureProduceResult, FutureRecordMetadata

    batch = FutureProduceResult(TopicPartition(ROUTE["topic"], 1))

    class Sending(_Recording):
        def send(self, topic, value=None, key=None):
            super().send(topic, value, key)
            return FutureRecordMetadata(batch, 2, 1_700_000_000_000, None, 1, 1, 0)

    producer = kafka_python_clients.rerouted(Sending, kafka_python_clients.PRODUCER_METHODS)
    job = {"__name__": "orders_job", "P": producer}
    exec("p = P(bootstrap_servers='kafka:9092')\n", job)  # noqa: S102
    sent = job["p"].send("orders-clean", value=b"v")
    seen = []
    sent.add_callback(seen.append)
    assert not sent.is_done
    batch.success((40, -1, None))
    metadata = sent.get(timeout=1)
    assert (metadata.topic, metadata.partition, metadata.offset) == ("orders-clean", 1, 42)
    assert metadata.topic_partition == TopicPartition("orders-clean", 1) and seen == [metadata]
    assert isinstance(sent, FutureRecordMetadata) and sent.succeeded() and sent.value is metadata
    assert job["p"].calls == [("send", ROUTE["topic"], b"v")]


def test_a_kafka_python_too_old_for_the_trials_broker_is_one_line(monkeypatch, kafka_rerouted):
    """kafka-python before 2.1 (2.0.2 is what many repositories pin) asks protocol versions Kafka 4 removed: the
    job is told before its client is made, not left waiting out the client's timeouts. A user's cluster, whose
    version the harness does not know, is tried."""
    monkeypatch.setattr(kafka, "__version__", "2.0.2")
    with pytest.raises(UserError, match=r"^the job's kafka-python 2.0.2 cannot speak to the trial's Kafka 4.1.1 "
                                        r"\(.*\): install kafka-python>=2.1"):
        kafka_python_clients.require_speaks({"version": "4.1.1"})
    kafka_python_clients.require_speaks({"version": None})
    kafka_python_clients.require_speaks({"version": "3.9.1"})
    kafka_sink.begin({**ROUTE, "version": "4.1.1"}, Path("."), ROUTE["named"])
    with pytest.raises(UserError, match="kafka-python 2.0.2 cannot speak"):
        exec("from kafka import KafkaProducer\nKafkaProducer(bootstrap_servers='kafka:9092')\n",  # noqa: S102
             {"__name__": "orders_job"})
    monkeypatch.setattr(kafka, "__version__", "2.1.0")
    kafka_python_clients.require_speaks({"version": "4.1.1"})
