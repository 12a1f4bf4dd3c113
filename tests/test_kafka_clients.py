"""A job's own confluent_kafka clients reach the run's broker and topic (chaos.jobs.kafka.confluent); the harness's
own clients are left alone."""

from __future__ import annotations

from concurrent.futures import Future

import confluent_kafka
import confluent_kafka.admin
from confluent_kafka import ConsumerGroupTopicPartitions, TopicCollection, TopicPartition
from confluent_kafka.admin import ClusterMetadata, ConfigResource, OffsetSpec, ResourceType, TopicDescription

from chaos.jobs.kafka import answer, confluent, confluent_admin, naming
from chaos.jobs.kafka import sink as kafka_sink
from tests.conftest import KAFKA_ROUTE as ROUTE


def test_the_named_topic_is_the_trials_and_other_topics_stay():
    assert naming.trial_topic(ROUTE, "orders-clean") == "streamchaos-t1-out"
    assert naming.trial_topic(ROUTE, "dead-letters") == "dead-letters"
    assert naming.trial_topic({**ROUTE, "named": ""}, "anything") == "streamchaos-t1-out"  # none named: all
    assert naming.trial_topic(None, "orders-clean") == "orders-clean"


def test_partitions_move_with_their_offsets_and_settings_name_the_trials_broker_ids_and_groups():
    moved = confluent.partitions(ROUTE, [TopicPartition("orders-clean", 0, 7), TopicPartition("other", 2, 3),
                                              TopicPartition("orders-clean", 1, 4, metadata="batch 4")])
    assert [(tp.topic, tp.partition, tp.offset) for tp in moved] == [("streamchaos-t1-out", 0, 7), ("other", 2, 3),
                                                                     ("streamchaos-t1-out", 1, 4)]
    assert moved[2].metadata == "batch 4"
    conf = confluent.settings(ROUTE, ({"bootstrap.servers": "kafka:9092", "transactional.id": "writer",
                                        "acks": "all"},), {"group.id": "writer"})
    assert conf == {"bootstrap.servers": "127.0.0.1:1", "transactional.id": "streamchaos-t1-out.writer",
                    "group.id": "streamchaos-t1-out.writer", "acks": "all"}
    assert confluent.settings(None, ({"bootstrap.servers": "kafka:9092"},), {}) == {"bootstrap.servers": "kafka:9092"}
    secured = confluent.settings(ROUTE, ({"bootstrap.servers": "b:9093", "security.protocol": "SASL_SSL",
                                           "sasl.mechanism": "PLAIN", "ssl.ca.location": "/ca"},), {})
    assert secured == {"bootstrap.servers": "127.0.0.1:1"}  # the trial's broker is plaintext


def test_clients_the_job_makes_are_routed_and_the_harnesss_are_not(kafka_rerouted):
    job = {"__name__": "orders_job"}
    exec("from confluent_kafka import Producer, Consumer\n"  # noqa: S102 - a job module's own code
         "p = Producer({'bootstrap.servers': 'kafka:9092', 'log_level': 0})\n"
         "c = Consumer({'bootstrap.servers': 'kafka:9092', 'group.id': 'g', 'log_level': 0})\n", job)
    assert job["p"].__dict__["_streamchaos_route"]["topic"] == ROUTE["topic"]
    assert job["c"].__dict__["_streamchaos_route"]["bootstrap"] == ROUTE["bootstrap"]
    job["c"].close()
    harness = {"__name__": "chaos.clusters.kafka.broker"}
    exec("from confluent_kafka import Producer\np = Producer({'bootstrap.servers': 'x:1', 'log_level': 0})\n",  # noqa: S102
         harness)
    assert harness["p"].__dict__["_streamchaos_route"] is None
    kafka_sink.end()  # no run: a job's client is left as it was made
    exec("q = Producer({'bootstrap.servers': 'kafka:9092', 'log_level': 0})\n", job)  # noqa: S102
    assert job["q"].__dict__["_streamchaos_route"] is None


def test_the_rerouted_classes_pickle_by_reference_and_serializing_clients_are_rerouted(kafka_rerouted):
    """A job's function referring to ``Producer`` reaches an executor's worker as confluent_kafka's class, which the
    worker has rerouted too (chaos.jobs.databases.on_executors)."""
    import pickle

    from pyspark import cloudpickle

    assert pickle.loads(cloudpickle.dumps(confluent_kafka.Producer)) is confluent_kafka.Producer  # noqa: S301
    assert getattr(confluent_kafka.SerializingProducer, "_streamchaos_rerouted", False)
    assert getattr(confluent_kafka.DeserializingConsumer, "_streamchaos_rerouted", False)


def test_the_answers_topic_is_named_for_its_run():
    name = answer.answer_topic("streamchaos-t1-out", "/runs/t1/oracle/again")
    assert name == "streamchaos-t1-out.answer.again"


def test_what_the_clients_hand_back_names_the_jobs_topic():
    """A consumed or delivered message, the partitions of ``committed`` and callbacks, and the topics of
    ``list_topics`` name the job's topic where they would name the trial's; other topics stay."""
    from types import SimpleNamespace

    names = {ROUTE["topic"]: ROUTE["named"]}
    message = confluent_kafka.Message(topic=ROUTE["topic"], partition=1, offset=5, value=b"v")
    assert confluent.back(names, message) is message and message.topic() == "orders-clean"
    other = confluent_kafka.Message(topic="dead-letters", partition=0)
    assert confluent.back(names, other).topic() == "dead-letters"
    parts = confluent.back(names, [TopicPartition(ROUTE["topic"], 0, 7, metadata="m"), TopicPartition("x", 1)])
    assert [(tp.topic, tp.partition, tp.offset, tp.metadata) for tp in parts] == [("orders-clean", 0, 7, "m"),
                                                                                  ("x", 1, -1001, None)]
    seen = []
    confluent._callback(names, lambda err, msg: seen.append((err, msg.topic())))(
        None, confluent_kafka.Message(topic=ROUTE["topic"]))
    assert seen == [(None, "orders-clean")]
    metadata = SimpleNamespace(topics={ROUTE["topic"]: "its metadata"})
    assert confluent.back(names, metadata).topics["orders-clean"] == "its metadata"
    learned: dict[str, str] = {}
    assert naming.trial_topic({**ROUTE, "named": ""}, "anything", learned) == ROUTE["topic"]
    assert learned == {ROUTE["topic"]: "anything"}  # none named: the name the job used, handed back
    assert confluent.back({}, message) is message


def test_a_rerouted_consumer_learns_the_named_topic(kafka_rerouted):
    job = {"__name__": "orders_job"}
    exec("from confluent_kafka import Consumer\n"  # noqa: S102 - a job module's own code
         "c = Consumer({'bootstrap.servers': 'kafka:9092', 'group.id': 'g', 'log_level': 0})\n", job)
    consumer = job["c"]
    try:
        assert confluent._names(consumer) == {ROUTE["topic"]: "orders-clean"}
        assert consumer.assignment() == []  # a wrapped method, nothing assigned yet
    finally:
        consumer.close()


class _Recording:
    """A client's base class that records what reached it: the topics librdkafka would be given."""

    def __init__(self, conf):
        self.conf = conf
        self.calls = []

    def commit(self, message=None, offsets=None, asynchronous=True):
        self.calls.append(("commit", message.topic() if message is not None else None,
                           [(tp.topic, tp.partition, tp.offset) for tp in offsets or []]))
        return offsets

    def store_offsets(self, message=None, offsets=None):
        self.calls.append(("store_offsets", message.topic() if message is not None else None))

    def get_watermark_offsets(self, partition, timeout=None, cached=False):
        self.calls.append(("watermarks", partition.topic))
        return (0, 42)

    def poll(self, timeout=None):
        return confluent_kafka.Message(topic=ROUTE["topic"], partition=0, offset=3)


def test_a_message_the_job_hands_back_names_the_trials_topic_for_the_call(kafka_rerouted):
    """``commit(msg)`` and ``store_offsets(msg)`` reach librdkafka with the trial's topic (it reads the topic from
    the message), the message names the job's again after; ``commit(None, offsets)`` moves its partitions; a tuple
    stays a tuple."""
    cls = confluent._rerouted(_Recording, confluent._CONSUMER_MOVES)
    job = {"__name__": "orders_job", "cls": cls}
    exec("c = cls({'bootstrap.servers': 'kafka:9092', 'group.id': 'g'})\n", job)  # noqa: S102
    consumer = job["c"]
    message = consumer.poll(1.0)
    assert message.topic() == "orders-clean"
    consumer.commit(message)
    consumer.commit(message=message, asynchronous=False)
    consumer.store_offsets(message)
    consumer.commit(None, [TopicPartition("orders-clean", 1, 9)])
    assert consumer.get_watermark_offsets(TopicPartition("orders-clean", 0)) == (0, 42)
    assert consumer.calls == [("commit", ROUTE["topic"], []), ("commit", ROUTE["topic"], []),
                              ("store_offsets", ROUTE["topic"]), ("commit", None, [(ROUTE["topic"], 1, 9)]),
                              ("watermarks", ROUTE["topic"])]
    assert message.topic() == "orders-clean"
    assert consumer.conf["group.id"] == f"{ROUTE['topic']}.g"


class _Admin:
    """An AdminClient's base class that records the topics a request would carry."""

    def __init__(self, conf):
        self.conf, self.calls = conf, []

    def create_topics(self, new_topics, operation_timeout=0):
        self.calls.append(("create", [t.topic for t in new_topics]))
        return {t.topic: "its future" for t in new_topics}

    def delete_topics(self, topics, operation_timeout=0):
        self.calls.append(("delete", list(topics)))
        return {t: "its future" for t in topics}


def test_an_admin_client_leaves_the_trials_topic_to_the_harness(kafka_rerouted):
    """A job's AdminClient reaches the trial's broker; making or deleting the topic it names (the trial's, made
    fresh by the harness) is left out and reported done; other topics are made or deleted there as named."""
    from confluent_kafka.admin import NewTopic

    assert getattr(confluent_kafka.admin.AdminClient, "_streamchaos_rerouted", False)
    real = {"__name__": "orders_job"}
    exec("from confluent_kafka.admin import AdminClient\n"  # noqa: S102 - its super(AdminClient, self) still works
         "a = AdminClient({'bootstrap.servers': 'kafka:9092', 'log_level': 0})\n", real)
    assert real["a"].__dict__["_streamchaos_names"].route["bootstrap"] == ROUTE["bootstrap"]

    class Admin(_Admin):
        pass

    confluent_admin.reroute_admin(Admin)
    job = {"__name__": "orders_job", "cls": Admin}
    exec("a = cls({'bootstrap.servers': 'kafka:9092'})\n", job)  # noqa: S102
    admin = job["a"]
    assert admin.conf == {"bootstrap.servers": ROUTE["bootstrap"]}
    made = admin.create_topics(new_topics=[NewTopic("orders-clean", 3, 1), NewTopic("dead-letters", 1, 1)])
    assert made["dead-letters"] == "its future" and made["orders-clean"].result(timeout=0) is None
    gone = admin.delete_topics(["orders-clean"])
    assert gone["orders-clean"].result(timeout=0) is None
    assert admin.calls == [("create", ["dead-letters"])]


def _done(value):
    future = Future()
    future.set_result(value)
    return future


class _Asking(_Admin):
    """An AdminClient's base class answering as the broker would, from the topics and groups a request carries."""

    def list_topics(self, *args, **kwargs):
        self.calls.append(("list", kwargs.get("topic")))
        metadata = ClusterMetadata()
        metadata.topics = {ROUTE["topic"]: "its metadata"}
        return metadata

    def describe_configs(self, resources, **kwargs):
        self.calls.append(("configs", [r.name for r in resources]))
        return {r: _done({"retention.ms": "its entry"}) for r in resources}

    def describe_topics(self, topics, **kwargs):
        self.calls.append(("describe", topics.topic_names))
        return {t: _done(TopicDescription(t, None, False, [])) for t in topics.topic_names}

    def list_offsets(self, topic_partition_offsets, **kwargs):
        self.calls.append(("offsets", [(tp.topic, tp.partition) for tp in topic_partition_offsets]))
        return {tp: _done("its offsets") for tp in topic_partition_offsets}

    def list_consumer_group_offsets(self, requests, **kwargs):
        self.calls.append(("group offsets", [(r.group_id, [tp.topic for tp in r.topic_partitions]) for r in requests]))
        return {r.group_id: _done(ConsumerGroupTopicPartitions(r.group_id, [TopicPartition(tp.topic, tp.partition, 5)
                                                                              for tp in r.topic_partitions]))
                for r in requests}

    def list_consumer_groups(self, **kwargs):
        from confluent_kafka.admin import ConsumerGroupListing, ListConsumerGroupsResult

        listed = [ConsumerGroupListing(g, False) for g in (f"{ROUTE['topic']}.writer", "streamchaos-t2-out.writer",
                                                           f"{ROUTE['topic']}.answer.again.writer")]
        return _done(ListConsumerGroupsResult(valid=listed if kwargs.get("states") is None else None))

    def list_groups(self, group=None, timeout=-1):
        from confluent_kafka.admin import GroupMetadata

        self.calls.append(("legacy groups", group))
        listed = []
        for name in (f"{ROUTE['topic']}.writer", "streamchaos-t2-out.writer", f"{ROUTE['topic']}.answer.x.writer"):
            listed.append(GroupMetadata())
            listed[-1].id = name
        return [g for g in listed if group is None or g.id == group]

    def delete_consumer_groups(self, groups, **kwargs):
        self.calls.append(("delete groups", list(groups)))
        failed = Future()
        failed.set_exception(RuntimeError("GROUP_ID_NOT_FOUND"))
        return {g: failed for g in groups}


def test_an_admin_clients_requests_name_the_trials_topic_and_groups_and_answer_in_the_jobs_names(kafka_rerouted):
    """Describing the topic, its offsets, a group's lag: asked of the trial's topic and groups (as the job's own
    consumers' groups are named), answered (keys, descriptions, offsets, errors) in the job's names."""

    class Admin(_Asking):
        pass

    confluent_admin.reroute_admin(Admin)
    job = {"__name__": "orders_job", "cls": Admin}
    exec("a = cls({'bootstrap.servers': 'kafka:9092'})\n", job)  # noqa: S102
    admin, trial = job["a"], ROUTE["topic"]
    assert admin.list_topics(topic="orders-clean").topics["orders-clean"] == "its metadata"
    described = admin.describe_topics(TopicCollection(["orders-clean", "dead-letters"]))
    assert set(described) == {"orders-clean", "dead-letters"}
    assert described["orders-clean"].result(timeout=0).name == "orders-clean"
    retention = ConfigResource(ResourceType.TOPIC, "orders-clean")
    configs = admin.describe_configs([retention])
    assert configs[retention].result(timeout=0) == {"retention.ms": "its entry"} and retention.name == "orders-clean"
    offsets = admin.list_offsets(topic_partition_offsets={TopicPartition("orders-clean", 0): OffsetSpec.latest()})
    assert [(tp.topic, tp.partition) for tp in offsets] == [("orders-clean", 0)]
    lag = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("writer", [TopicPartition("orders-clean",
                                                                                                   1)])])
    answer = lag["writer"].result(timeout=0)
    assert answer.group_id == "writer" and [(tp.topic, tp.partition, tp.offset) for tp in
                                            answer.topic_partitions] == [("orders-clean", 1, 5)]
    assert [g.group_id for g in admin.list_consumer_groups().result(timeout=0).valid] == ["writer"]  # not t2's
    assert admin.list_consumer_groups(states={"STABLE"}).result(timeout=0).valid == []  # none listed
    assert [g.id for g in admin.list_groups()] == ["writer"] and [g.id for g in admin.list_groups("writer")] == [
        "writer"]
    gone = admin.delete_consumer_groups(["writer"])
    assert isinstance(gone["writer"].exception(timeout=0), RuntimeError)
    assert not gone["writer"].cancel()  # running, as the library's own futures are
    assert admin.calls == [("list", trial), ("describe", [trial, "dead-letters"]), ("configs", [trial]),
                           ("offsets", [(trial, 0)]),
                           ("group offsets", [(f"{trial}.writer", [trial])]), ("legacy groups", None),
                           ("legacy groups", f"{trial}.writer"), ("delete groups", [f"{trial}.writer"])]
    kafka_sink.end()  # made with no run: asked and answered as named
    plain = Admin({"bootstrap.servers": "kafka:9092"})
    assert list(plain.describe_topics(TopicCollection(["orders-clean"]))) == ["orders-clean"]
    assert plain.calls == [("describe", ["orders-clean"])]
