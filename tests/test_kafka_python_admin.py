"""A job's kafka-python ``KafkaAdminClient`` asks about the trial's topic and groups and is answered in the job's
names (chaos.jobs.kafka.kafka_python_admin), whichever version's method names it has."""

from __future__ import annotations

import kafka
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.structs import OffsetAndMetadata, TopicPartition

from chaos.jobs.kafka import kafka_python_admin
from tests.conftest import KAFKA_ROUTE as ROUTE

TRIAL = ROUTE["topic"]
GROUP = f"{TRIAL}.lag-check"  # the trial's name of the job's group "lag-check"


class _Admin:
    """An admin client's base class recording what each request would carry, answering as kafka-python does (3.x
    names, and 2.x's beside them)."""

    def __init__(self, **configs):
        self.configs, self.calls = configs, []

    def create_topics(self, new_topics, timeout_ms=None):
        made = sorted(new_topics) if isinstance(new_topics, dict) else [getattr(t, "name", t) for t in new_topics]
        self.calls.append(("create", made))
        return {"topics": made}

    def delete_topics(self, topics, timeout_ms=None):
        self.calls.append(("delete", list(topics)))
        return {"topics": list(topics)}

    def wait_for_topics(self, topic_names, timeout_ms=10000):
        self.calls.append(("wait", list(topic_names)))

    def describe_topics(self, topics=None):
        self.calls.append(("describe", topics))
        return [{"name": t, "partitions": [{"partition_index": 0}]} for t in topics or (TRIAL, "other")]

    def create_partitions(self, topic_partitions, timeout_ms=None):
        self.calls.append(("partitions", sorted(topic_partitions)))
        return {t: None for t in topic_partitions}

    def describe_configs(self, config_resources, include_synonyms=False):
        self.calls.append(("configs", [(r.resource_type.name, r.name) for r in config_resources]))
        return [{"resources": [{"resource_name": r.name} for r in config_resources]}]

    def list_group_offsets(self, group_specs):
        self.calls.append(("group offsets", group_specs))
        return {g: {TopicPartition(TRIAL, 0): OffsetAndMetadata(3, "", -1)} for g in group_specs}

    def alter_group_offsets(self, group_id, offsets, group_coordinator_id=None):
        self.calls.append(("alter", group_id, sorted(offsets)))
        return {tp: None for tp in offsets}

    def list_consumer_group_offsets(self, group_id, group_coordinator_id=None, partitions=None):
        self.calls.append(("2.x offsets", group_id, partitions))
        return {TopicPartition(TRIAL, 0): OffsetAndMetadata(3, "", -1)}

    def list_groups(self, broker_ids=None):
        return [{"group_id": GROUP, "protocol_type": "consumer"}, {"group_id": f"{TRIAL}.answer.run1.x"},
                {"group_id": "streamchaos-t2-out.lag-check"}, {"group_id": "lag-check"}]

    def list_consumer_groups(self, broker_ids=None):
        return [(GROUP, "consumer"), ("streamchaos-t2-out.lag-check", "consumer")]


def _job_admin():
    cls = kafka_python_admin.rerouted_admin(_Admin)
    job = {"__name__": "orders_job", "A": cls}
    exec("a = A(bootstrap_servers='kafka:9092', api_version=(0, 10, 1))\n", job)  # noqa: S102 - the job's code
    return job["a"]


def test_an_admin_client_leaves_the_trials_topic_to_the_harness(kafka_rerouted):
    """The job making or deleting the topic it names (the trial's, made fresh by the harness) is left out; other
    topics are made or deleted on the trial's broker as named."""
    admin = _job_admin()
    assert admin.configs == {"bootstrap_servers": "127.0.0.1:1"}
    assert admin.create_topics([NewTopic("orders-clean", 3, 1)]) == {"topics": []}  # 3.x: not asked, its shape
    made = admin.create_topics(new_topics={"orders-clean": {}, "dead-letters": {}}, timeout_ms=5)
    assert made == {"topics": ["dead-letters"]}
    assert admin.delete_topics(["orders-clean", "dead-letters"]) == {"topics": ["dead-letters"]}
    admin.wait_for_topics(["orders-clean"])
    assert admin.calls == [("create", ["dead-letters"]), ("delete", ["dead-letters"]),
                           ("wait", [TRIAL])]
    assert kafka.KafkaAdminClient._streamchaos_rerouted and kafka.admin.KafkaAdminClient is kafka.KafkaAdminClient


def test_topic_requests_ask_the_trials_topic_and_answer_with_the_jobs(kafka_rerouted):
    admin = _job_admin()
    described = admin.describe_topics(["orders-clean", "dead-letters"])
    assert [d["name"] for d in described] == ["orders-clean", "dead-letters"]
    assert [d["name"] for d in admin.describe_topics()] == ["orders-clean", "other"]
    assert admin.create_partitions(topic_partitions={"orders-clean": NewPartitions(4)}) == {"orders-clean": None}
    resources = [ConfigResource(ConfigResourceType.TOPIC, "orders-clean"), ConfigResource("BROKER", "1")]
    answer = admin.describe_configs(resources)
    assert answer == [{"resources": [{"resource_name": "orders-clean"}, {"resource_name": "1"}]}]
    assert resources[0].name == "orders-clean"  # the job's own resource is left as it wrote it
    assert admin.calls == [("describe", [TRIAL, "dead-letters"]), ("describe", None), ("partitions", [TRIAL]),
                           ("configs", [("TOPIC", TRIAL), ("BROKER", "1")])]


def test_group_requests_ask_the_trials_group_and_answer_with_the_jobs(kafka_rerouted):
    """3.x's ``list_group_offsets``/``alter_group_offsets`` and 2.x's ``list_consumer_group_offsets``: the trial's
    group and partitions asked, the job's named in the answer."""
    admin = _job_admin()
    offsets = admin.list_group_offsets(["lag-check"])
    assert offsets == {"lag-check": {TopicPartition("orders-clean", 0): OffsetAndMetadata(3, "", -1)}}
    reset = {TopicPartition("orders-clean", 0): OffsetAndMetadata(0, "", -1)}
    assert admin.alter_group_offsets("lag-check", reset) == {TopicPartition("orders-clean", 0): None}
    # A group the job names as its rerouted consumer's config holds it (the trial's already) stays as it is.
    old = admin.list_consumer_group_offsets(GROUP, partitions=[TopicPartition("orders-clean", 0)])
    assert old == {TopicPartition("orders-clean", 0): OffsetAndMetadata(3, "", -1)}
    assert admin.calls == [("group offsets", [GROUP]), ("alter", GROUP, [TopicPartition(TRIAL, 0)]),
                           ("2.x offsets", GROUP, [TopicPartition(TRIAL, 0)])]


def test_listed_groups_are_the_trials_alone_by_the_jobs_names(kafka_rerouted):
    """Other trials' groups and Spark's answer runs' share the broker: left out; 3.x dicts and 2.x tuples."""
    admin = _job_admin()
    assert admin.list_groups() == [{"group_id": "lag-check", "protocol_type": "consumer"}]
    assert admin.list_consumer_groups() == [("lag-check", "consumer")]


def test_a_call_kafka_python_makes_on_itself_is_not_moved_twice(kafka_rerouted):
    """One admin call of kafka-python's making another with the groups it was given (the trial's already): reached
    as it is when the caller is kafka-python's own module."""
    admin = _job_admin()
    own = {"__name__": "kafka.admin._groups", "GROUP": GROUP}
    exec("def describe(a): return a.list_group_offsets([GROUP])\n", own)  # noqa: S102 - kafka-python's code
    own["describe"](admin)
    assert admin.calls == [("group offsets", [GROUP])]


def test_kafka_python_2_answers_name_the_jobs_topic_and_group(kafka_rerouted):
    """2.x answers as it gives them (measured against a real broker with kafka-python 2.3.3): named tuples
    (``describe_consumer_groups``' ``GroupInformation``) and raw responses whose fields hold plain tuples
    (``describe_configs``, ``create_partitions``)."""
    from collections import namedtuple
    from types import SimpleNamespace

    group_information = namedtuple("GroupInformation", "error_code group state members")

    class Response:  # a kafka-python 2.x protocol Struct: its schema's names are its attributes
        SCHEMA = SimpleNamespace(names=("throttle_time_ms", "topic_errors"))

        def __init__(self, *values):
            self.throttle_time_ms, self.topic_errors = values

    names = {TRIAL: "orders-clean", GROUP: "lag-check"}
    assert kafka_python_admin._answer(names, [group_information(0, GROUP, "Empty", [])]) == [
        group_information(0, "lag-check", "Empty", [])]
    response = kafka_python_admin._answer(names, Response(0, [(TRIAL, 0, None), ("other", 0, None)]))
    assert response.topic_errors == [("orders-clean", 0, None), ("other", 0, None)]
    assert kafka_python_admin._answer(names, {TopicPartition(TRIAL, 1): OffsetAndMetadata(3, "", -1)}) == {
        TopicPartition("orders-clean", 1): OffsetAndMetadata(3, "", -1)}


def test_kafka_python_3_raw_answers_and_cursors_name_the_jobs_topic(kafka_rerouted):
    """3.x's ``create_partitions`` answers with the protocol's own response object; ``describe_topic_partitions``'
    cursor (from an answer, so by the job's name) is handed back on the trial's topic; a static member to remove
    is the trial's, as the job's consumer got its ``group_instance_id``."""
    from kafka.admin import MemberToRemove
    from kafka.protocol.admin import CreatePartitionsResponse

    answer = CreatePartitionsResponse(throttle_time_ms=0, results=[
        CreatePartitionsResponse.CreatePartitionsTopicResult(name=TRIAL, error_code=0, error_message=None)], version=1)
    names = {TRIAL: "orders-clean"}
    assert kafka_python_admin._answer(names, answer).results[0].name == "orders-clean"
    cursor = kafka_python_admin._others(ROUTE, names, {"topic_name": "orders-clean", "partition_index": 4})
    assert cursor == {"topic_name": TRIAL, "partition_index": 4}
    given = [MemberToRemove(group_instance_id="worker-1")]
    members = kafka_python_admin._others(ROUTE, names, given)
    assert members[0].group_instance_id == f"{TRIAL}.worker-1" and given[0].group_instance_id == "worker-1"
