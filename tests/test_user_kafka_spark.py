"""The user's own Kafka cluster (``kafka = "KAFKA_BOOTSTRAP"``, chaos/clusters/ssh/userkafka.py) against a real
broker that asks for a SASL login: the harness logs in with the user's login, works in topics of its own there,
reaps a dead harness's, leaves the user's topics alone, and writes the password nowhere (a JVM: the broker)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from chaos.clusters.kafka import login
from chaos.clusters.ssh.userkafka import UserKafka, owner_prefix
from chaos.errors import UserError
from chaos.jobs.kafka.answer import begin_answer, finish_answer
from chaos.machine.processes import Owned
from tests.conftest import require_java
from tests.sasl_broker import LOGIN_ENV, SECRET, SaslBroker
from tests.test_kafka_spark import events

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def sasl(tmp_path_factory):
    require_java()
    owned = Owned()
    broker = SaslBroker(owned, tmp_path_factory.mktemp("sasl-kafka")).start()
    yield broker
    broker.stop()
    owned.stop_all()


def test_a_refused_login_is_one_line_without_the_password(sasl, tmp_path):
    wrong = login.load(None, {**LOGIN_ENV, "KAFKA_SASL_PASSWORD": "wr0ng-pw"})
    with pytest.raises(UserError) as caught:
        UserKafka(sasl.source_bootstrap, wrong, tmp_path).start()
    said = str(caught.value)
    assert not list(Path(tempfile.gettempdir()).glob(f"{login.LOGIN_PREFIX}{os.getpid()}-*"))  # its login went
    assert said.startswith(f"KAFKA_BOOTSTRAP: cannot reach {sasl.source_bootstrap} (") and "\n" not in said
    assert "authentication" in said.lower() and "wr0ng-pw" not in said, said


def test_the_harness_works_in_topics_of_its_own_and_leaves_the_users_alone(sasl, tmp_path):
    dead = owner_prefix("999999:1.000") + "run-7"  # a killed harness's of this machine
    sasl.create_topic(dead, 1)
    sasl.create_topic("orders", 1)  # the user's own
    kafka = UserKafka(sasl.source_bootstrap, login.load(None, LOGIN_ENV), tmp_path).start()
    topics = set(sasl.admin().list_topics(timeout=30).topics)
    assert dead not in topics and "orders" in topics
    assert stat.S_IMODE(Path(kafka.login_file).stat().st_mode) == 0o600
    assert not Path(kafka.login_file).is_relative_to(tmp_path)  # outside the harness's (and the runs') directories
    topic = kafka.topic_prefix + "run-1"
    kafka.create_topic(topic, 2, {"retention.ms": "-1", "message.timestamp.after.max.ms": str(2**63 - 1)})
    assert kafka.produce(topic, events(100, 2)) == 100
    assert kafka.end_offsets(topic) == {"0": 50, "1": 50} and len(kafka.read(topic)) == 100
    assert kafka.delete_records(topic, {0: 10}) == {0: 10}
    answer = begin_answer(kafka.bootstrap, topic, tmp_path / "answer", kafka.login)  # Spark's answer's own topic
    assert answer.startswith(kafka.topic_prefix)
    assert finish_answer(kafka.bootstrap, answer, tmp_path / "answer", kafka.login) == 0
    from confluent_kafka import Consumer, TopicPartition

    group = Consumer(kafka.conf(**{"group.id": f"{topic}.orders-app", "enable.auto.commit": False}))
    group.commit(offsets=[TopicPartition(topic, 0, 42)], asynchronous=False)  # a job's group, on the trial's topic
    group.close()
    saved = Path(kafka.login_file)
    kafka.stop()
    topics = set(sasl.admin().list_topics(timeout=30).topics)
    assert not [t for t in topics if t.startswith(kafka.topic_prefix)] and "orders" in topics
    groups = sasl.admin().list_consumer_groups(request_timeout=30).result(timeout=60).valid
    assert not [g.group_id for g in groups if g.group_id.startswith(kafka.topic_prefix)]
    assert not (tmp_path / "kafka").exists() and not saved.exists() and not saved.parent.exists()
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and SECRET in p.read_text(errors="replace")]
