"""The user's own Kafka cluster (``kafka = "KAFKA_BOOTSTRAP"``) and its login (chaos/clusters/kafka/login.py,
chaos/clusters/ssh/userkafka.py): every mistake is one line without the password; the login reaches Spark's options,
the harness's librdkafka clients and a job's own clients, and is shown nowhere as it is (no JVM needed)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from chaos.clusters.kafka import login
from chaos.clusters.ssh.hostsfile import load
from chaos.clusters.ssh.userkafka import gone_owner, owner_prefix
from chaos.errors import UserError
from chaos.jobs.kafka import confluent
from chaos.jobs.kafka import sink as kafka_sink
from chaos.jobs.kafka.source import kafka_options
from chaos.machine.processes import my_tag
from tests.test_hostfile import GOOD, write

SECRET = "n0t-in-any-file"
ENV = {"KAFKA_SASL_USERNAME": "alice", "KAFKA_SASL_PASSWORD": SECRET}


def test_a_properties_file_gives_the_protocol_and_the_environment_the_password(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("# staging\nsecurity.protocol = SASL_SSL\n! old: PLAIN\nsasl.mechanism=SCRAM-SHA-512\n"
                     "ssl.truststore.type=PEM\nssl.truststore.location=/etc/kafka/\\\n   ca.pem\n")
    got = login.load(props, ENV)
    assert got["security.protocol"] == "SASL_SSL" and got["ssl.truststore.location"] == "/etc/kafka/ca.pem"
    assert got["sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                       f'username="alice" password="{SECRET}";')
    assert login.librdkafka(got) == {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
                                     "sasl.username": "alice", "sasl.password": SECRET,
                                     "ssl.ca.location": "/etc/kafka/ca.pem"}


def test_properties_are_read_as_java_reads_them(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("security.protocol : SSL\n"
                     "ssl.keystore.key = -----BEGIN PRIVATE KEY-----\\nMIIB\\n-----END PRIVATE KEY-----\n"
                     "ssl.keystore.certificate.chain=-----BEGIN CERTIFICATE-----\\n\\\n"
                     "    MIIC\\n-----END CERTIFICATE-----\n"
                     "ssl.truststore.type PEM\nssl.truststore.location=C:\\\\certs\\\\ca.pem\n"
                     "ssl.endpoint.identification.algorithm=\n")
    got = login.load(props, {})
    assert got["ssl.truststore.location"] == "C:\\certs\\ca.pem" and got["security.protocol"] == "SSL"
    assert login.librdkafka(got) == {
        "security.protocol": "SSL", "ssl.ca.location": "C:\\certs\\ca.pem",
        "ssl.key.pem": "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----",
        "ssl.certificate.pem": "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----",
        "ssl.endpoint.identification.algorithm": "none"}


def test_the_environment_alone_logs_in_with_plain_over_tls_and_quotes_what_it_must():
    got = login.load(None, {"KAFKA_SASL_USERNAME": 'a"b', "KAFKA_SASL_PASSWORD": "p\\q"})
    assert (got["security.protocol"], got["sasl.mechanism"]) == ("SASL_SSL", "PLAIN")
    assert login.librdkafka(got)["sasl.username"] == 'a"b' and login.librdkafka(got)["sasl.password"] == "p\\q"
    assert login.load(None, {}) == {} and login.librdkafka({}) == {}


@pytest.mark.parametrize(("text", "env", "says"), [
    ("bootstrap.servers=b:9092\n", {}, "bootstrap.servers is not a login setting"),
    ("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n", {}, "sasl.mechanism GSSAPI"),
    ("security.protocol=SASL_PLAINTEXT\n", {}, "needs sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and a"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n", {}, "needs a user name and password: export"),
    ("security.protocol=SSL\nssl.truststore.location=/x.jks\n", {}, "give the CA certificates as PEM"),
    ("security.protocol=SSL\nssl.keystore.location=/k.jks\n", {}, "PKCS12 or PEM"),
    ("security.protocol=TLS\n", {}, "security.protocol TLS is not one of"),
    ("", {"KAFKA_SASL_USERNAME": "alice"}, "KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD go together"),
    ("", {**ENV, "KAFKA_SASL_MECHANISM": "OAUTHBEARER"}, "cannot take KAFKA_SASL_USERNAME"),
    ("security.protocol=SSL\n", ENV, "KAFKA_SASL_USERNAME is set but security.protocol is SSL"),
    (f"sasl.mechanism PLAIN\nbroken{SECRET}\n", {}, f"broken{SECRET} is not a login setting"),
])
def test_a_login_the_harness_cannot_use_is_one_line_without_the_password(tmp_path, text, env, says):
    props = tmp_path / "client.properties"
    props.write_text(text)
    with pytest.raises(UserError) as caught:
        login.load(props, env)
    assert says in str(caught.value) and "\n" not in str(caught.value)
    assert SECRET not in str(caught.value) or "broken" in says  # a key is named, never a value


@pytest.mark.parametrize(("value", "says"), [
    ("", "KAFKA_BOOTSTRAP is not set: export KAFKA_BOOTSTRAP=HOST:PORT"),
    ("broker-1", "'broker-1' is not HOST:PORT"),
    ("SASL_SSL://b:9093", "is not HOST:PORT"),
    ("b:70000", "is not HOST:PORT"),
])
def test_a_bad_bootstrap_is_one_line(value, says):
    with pytest.raises(UserError, match=says):
        login.read_bootstrap({"KAFKA_BOOTSTRAP": value})
    assert login.read_bootstrap({"KAFKA_BOOTSTRAP": " b1:9092, b2:9092 "}) == "b1:9092,b2:9092"


def test_the_hosts_file_names_the_users_cluster_and_its_properties(tmp_path, monkeypatch):
    text = GOOD.replace('kafka = "n2"', 'kafka = "KAFKA_BOOTSTRAP"\nkafka_properties = "client.properties"')
    (tmp_path / "client.properties").write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")
    path = write(tmp_path, text)
    monkeypatch.delenv("KAFKA_BOOTSTRAP", raising=False)
    with pytest.raises(UserError, match="KAFKA_BOOTSTRAP is not set"):
        load(path)
    monkeypatch.setenv("KAFKA_BOOTSTRAP", "kafka.staging:9092")
    with pytest.raises(UserError, match="needs a user name and password"):  # checked before anything starts
        load(path)
    monkeypatch.setenv("KAFKA_SASL_USERNAME", "alice")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", SECRET)
    hosts = load(path)
    assert hosts.user_kafka and hosts.kafka_host is None
    assert hosts.kafka_properties == (tmp_path / "client.properties").resolve()
    with pytest.raises(UserError, match='kafka_properties is the login to your own cluster: it goes with kafka = '
                                        '"KAFKA_BOOTSTRAP"'):
        load(write(tmp_path, GOOD.replace('kafka = "n2"', 'kafka = "n2"\nkafka_properties = "client.properties"')))
    with pytest.raises(UserError, match="is neither a host of the file"):
        load(write(tmp_path, GOOD.replace('kafka = "n2"', 'kafka = "KAFKA_SERVERS"')))


def test_faults_on_the_users_cluster_are_refused_in_one_line(tmp_path, monkeypatch):
    from chaos.clusters.ssh.cluster import HostsCluster
    from chaos.scenario.faults import parse_fault

    monkeypatch.setenv("KAFKA_BOOTSTRAP", "kafka.staging:9092")
    path = write(tmp_path, GOOD.replace('kafka = "n2"', 'kafka = "KAFKA_BOOTSTRAP"'))
    for spec in ("kill-broker@2:planned/3s", "pause-broker@1:reading/2s", "partition@2:planned/node=kafka/4s"):
        said = HostsCluster.refusal(parse_fault(spec), f"ssh:{path}")
        assert said and "the Kafka cluster of KAFKA_BOOTSTRAP is yours" in said, spec
    assert HostsCluster.refusal(parse_fault("kill-driver@2:sink-done"), f"ssh:{path}") is None


def test_the_login_reaches_sparks_source_options_and_source_json_shows_no_secret(tmp_path):
    saved = login.write(login.load(None, {**ENV, "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"}))
    assert stat.S_IMODE(os.stat(saved).st_mode) == 0o600 and login.of({"login": saved})["sasl.mechanism"] == "PLAIN"
    assert stat.S_IMODE(os.stat(os.path.dirname(saved)).st_mode) == 0o700
    job = {"kafka.bootstrap.servers": "prod:9093", "subscribe": "orders", "kafka.security.protocol": "SSL",
           "kafka.ssl.truststore.location": "/etc/prod.jks", "failOnDataLoss": "false"}
    opts, changed = kafka_options(job, {"bootstrap": "k.staging:9092", "topic": "t", "max_offsets": 200,
                                        "login": saved})
    assert opts["kafka.security.protocol"] == "SASL_PLAINTEXT" and SECRET in opts["kafka.sasl.jaas.config"]
    assert "kafka.ssl.truststore.location" not in opts and opts["failOnDataLoss"] == "false"
    assert changed["kafka.sasl.jaas.config"] == "[hidden]" and changed["kafka.ssl.truststore.location"] is None
    assert SECRET not in json.dumps(changed)
    login.remove(saved)
    assert not os.path.exists(os.path.dirname(saved))


def test_the_login_reaches_sparks_kafka_sink_and_a_jobs_own_clients(monkeypatch):
    saved = login.write(login.load(None, {**ENV, "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"}))
    monkeypatch.setenv(kafka_sink.OUT_VAR, json.dumps({"bootstrap": "k.staging:9092", "topic": "out",
                                                       "login": saved, "named": ""}))
    opts = kafka_sink.stream_options()
    assert opts["kafka.security.protocol"] == "SASL_PLAINTEXT" and opts["topic"] == "out"
    assert kafka_sink.trial_owned("kafka.SASL.jaas.config") and not kafka_sink.trial_owned("kafka.acks")
    route = {"bootstrap": "k.staging:9092", "topic": "out", "login": saved}
    conf = confluent.settings(route, ({"bootstrap.servers": "prod:9093", "security.protocol": "SSL",
                                        "ssl.ca.location": "/prod.pem", "transactional.id": "orders"},), {})
    assert conf == {"bootstrap.servers": "k.staging:9092", "transactional.id": "out.orders",
                    "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN", "sasl.username": "alice",
                    "sasl.password": SECRET}
    assert kafka_sink.job_login("kafka.ssl.truststore.password") and not kafka_sink.job_login("kafka.acks")
    monkeypatch.setenv(kafka_sink.OUT_VAR, json.dumps({"bootstrap": "127.0.0.1:9092", "topic": "out", "named": ""}))
    assert kafka_sink.stream_options()["kafka.security.protocol"] == "PLAINTEXT"  # the job's own SSL gives way
    monkeypatch.delenv(kafka_sink.OUT_VAR)
    assert not kafka_sink.job_login("kafka.ssl.truststore.password")  # not rerouted: the job's options stand
    login.remove(saved)


def test_a_dead_harness_login_file_is_reaped(tmp_path):
    import tempfile
    from pathlib import Path

    dead = Path(tempfile.mkdtemp(prefix=f"{login.LOGIN_PREFIX}999999-"))
    (dead / "login.json").write_text("{}")
    mine = login.write({"security.protocol": "SSL"})
    assert not dead.exists() and os.path.exists(mine)
    login.remove(mine)


def test_no_channel_of_a_kafka_job_is_planned_on_the_users_cluster(tmp_path, monkeypatch):
    from chaos.clusters.registry import channels
    from pipelines_under_test import resolve

    monkeypatch.setenv("KAFKA_BOOTSTRAP", "kafka.staging:9092")
    (tmp_path / "theirs").mkdir()
    theirs = write(tmp_path / "theirs", GOOD.replace('kafka = "n2"', 'kafka = "KAFKA_BOOTSTRAP"'))
    theirs, ours = f"ssh:{theirs}", f"ssh:{write(tmp_path, GOOD)}"
    assert channels(resolve("kafka-passthrough"), theirs) == (False, False)
    assert channels(resolve("pg-append"), theirs) == (True, True)  # no Kafka: its channels stand
    assert channels(resolve("kafka-passthrough"), ours) == (True, True)
    assert channels(resolve("kafka-passthrough"), "standalone") == (True, True)


def test_topics_carry_their_owner_and_only_a_gone_owner_of_this_machine_is_reaped():
    mine = owner_prefix()
    assert mine.startswith("streamchaos.") and not gone_owner(mine + "run-1")
    assert all(c.isalnum() or c in "._-" for c in mine)
    dead = owner_prefix("999999:1.000")  # no such process
    assert gone_owner(dead + "run-1") and gone_owner(dead + "run-1-out.answer.a")
    other = dead.replace(dead.split(".")[1], "another-machine")
    assert not gone_owner(other + "run-1") and not gone_owner("orders") and not gone_owner("streamchaos-run-1")
    assert not gone_owner(f"streamchaos.{dead.split('.')[1]}.orders.v2")  # not a harness's name
    assert my_tag().split(":")[0] in mine
