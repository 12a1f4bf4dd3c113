"""Kafka on a cluster of hosts (``--cluster ssh:FILE``): the broker on a host of the file (``kafka = "HOST"``),
killed over SSH and cut off by iptables rules on its host, or on this machine, reached by the hosts' executors
through the channels' proxies. The hosts carry PySpark 4.2.0, whose Kafka connector Maven serves: an image of
their own (``streamchaos --spark 4.2.0 image build --hosts``)."""

from __future__ import annotations

import os

import pytest

from chaos.clusters.docker.containers import configured
from chaos.clusters.ssh.client import Remote
from chaos.clusters.ssh.hostsfile import load
from chaos.clusters.ssh.remote import OWNED_DIRS, HostProcs, HostRules
from tests.conftest import cli, left_by
from tests.ssh_hosts import SshHosts
from tests.test_kafka_spark import CONNECTOR_SPARK, added_connector_spark

pytestmark = [pytest.mark.spark, pytest.mark.long,
              pytest.mark.skipif(not configured(), reason="no Docker daemon (the hosts are containers)")]


@pytest.fixture(scope="module")
def kafka_hosts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ssh-kafka")
    added_connector_spark(tmp)
    built = cli("--spark", CONNECTOR_SPARK, "image", "build", "--hosts", cwd=tmp, timeout=1800)
    assert built.rc == 0, built.stdout[-2000:] + built.stderr[-2000:]
    with SshHosts(tmp, image=built.stdout.strip().splitlines()[-1]) as made:
        yield made


def nothing_left_on(hosts, file) -> None:
    """No process, iptables rule or owned directory of a harness on any host."""
    cluster = load(file)
    for host in cluster.hosts:
        remote = Remote(cluster, host)
        try:
            assert not HostProcs(remote).tagged("") and not HostRules(remote).listed(), host
            assert remote.run(["sh", "-c", f"ls {OWNED_DIRS} 2>/dev/null | grep '^kafka-'; true"]).out == "", host
        finally:
            remote.close()


def test_a_broker_on_a_host_killed_and_cut_off_keeps_the_windowed_count_exactly_once(kafka_hosts):
    """The broker on host2: SIGKILLed there over SSH and restarted on its data, then its listeners cut off by
    iptables rules on host2; the driver killed after a batch's upsert. Offsets and window state are saved together:
    exactly-once, with a consistent cut at every checked batch."""
    file = kafka_hosts.write("kafka-host.toml", master="host3", kafka="host2")
    work = kafka_hosts.shared / "kafka-host"
    work.mkdir()
    run = cli("--spark", CONNECTOR_SPARK, "trial", "kafka-windowed-count", "--cluster", f"ssh:{file}",
              "--events", "1000", "--fault", "kill-broker@1:planned/3s", "--fault", "partition@2:planned/node=kafka/4s",
              "--fault", "kill-driver@3:sink-done", "--json", "--keep", str(work / "run"), cwd=work, timeout=1800)
    assert run.rc == 0, run.stdout[-2000:] + run.stderr[-3000:]
    r = run.json
    assert r["verdict"] == "exactly-once" and all(f["fired"] for f in r["faults"]), r["faults"]
    assert r["consistent_cut"]["ok"] is True, r["consistent_cut"]
    cut = next(f for f in r["faults"] if f["spec"].startswith("partition"))
    assert cut["detail"]["node"] == "kafka", cut  # refused on a cluster of hosts without its Kafka host
    assert left_by(run.pid) == []
    nothing_left_on(kafka_hosts, file)


def test_a_broker_on_this_machine_is_reached_through_the_proxies_and_a_replayed_batch_found(kafka_hosts):
    """No Kafka host in the file: the broker runs here on 127.0.0.1, the executors on the hosts reach it through
    the source and sink channels' proxies on this machine's address toward them; Spark's Kafka sink repeats the
    batch a driver killed between its writes and its commit (at-least-once, as documented)."""
    file = kafka_hosts.write("kafka-local.toml", master="host3")
    work = kafka_hosts.shared / "kafka-local"
    work.mkdir()
    run = cli("--spark", CONNECTOR_SPARK, "trial", "kafka-passthrough", "--cluster", f"ssh:{file}",
              "--events", "1000", "--fault", "cut-source@1:planned/3s", "--fault", "kill-driver@2:sink-done",
              "--json", "--keep", str(work / "run"), cwd=work, timeout=1800)
    assert run.rc == 0, run.stdout[-2000:] + run.stderr[-3000:]
    r = run.json
    assert r["verdict"] == "at-least-once" and all(f["fired"] for f in r["faults"]), r["faults"]
    assert {d["batch"] for d in r["duplicated"]} == {2}, r["duplicated"][:3]
    assert r["anomaly_counts"]["duplicated"] >= 150, r["anomaly_counts"]  # the batch's records, about 200
    assert left_by(run.pid) == []
    nothing_left_on(kafka_hosts, file)


def test_the_users_own_cluster_asks_for_a_login_and_keeps_no_secret(kafka_hosts, tmp_path):
    """``kafka = "KAFKA_BOOTSTRAP"``: a cluster of the user's (here a broker on host2 whose listener asks for a SASL
    PLAIN login), the protocol and mechanism in a properties file, the user and password in the environment. Spark's
    Kafka source and sink on the hosts, the harness's producer and readers here all log in; the driver killed
    between the batch's writes and its commit repeats it (at-least-once, as Spark documents); the trial's topics
    are gone after it, the user's topic stays, the password is in no file of the run or the harness; a broker
    fault on the user's cluster is refused in one line."""
    from chaos.clusters.ssh.cluster import HostsCluster
    from chaos.clusters.ssh.kafka import HostKafka
    from chaos.machine.processes import Owned
    from tests.sasl_broker import LOGIN_ENV, SECRET, with_sasl

    class SaslHostKafka(HostKafka):
        def settings(self) -> dict[str, str]:
            return with_sasl(super().settings())

    work = kafka_hosts.shared / "user-kafka"
    (work / "broker").mkdir(parents=True)
    cluster = HostsCluster(f"ssh:{kafka_hosts.write('sasl-broker.toml', master='host3', kafka='host2')}",
                           work / "broker")
    owned = Owned()
    broker = SaslHostKafka(cluster, owned, work / "broker")
    try:
        broker.start()  # no proxy: its SOURCE listener, advertised as itself, is the "user's" cluster
        broker.create_topic("orders", 1)
        props = kafka_hosts.tmp / "client.properties"
        props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")
        file = kafka_hosts.write("user-kafka.toml", master="host3", kafka="KAFKA_BOOTSTRAP",
                                 kafka_properties=str(props))
        env = {**os.environ, "KAFKA_BOOTSTRAP": broker.source_bootstrap, **LOGIN_ENV}
        refused = cli("--spark", CONNECTOR_SPARK, "trial", "kafka-passthrough", "--cluster", f"ssh:{file}",
                      "--fault", "kill-broker@1:planned/3s", cwd=work, env=env, timeout=600)
        assert refused.rc == 2 and "the Kafka cluster of KAFKA_BOOTSTRAP is yours" in refused.stderr, refused.stderr
        run = cli("--spark", CONNECTOR_SPARK, "trial", "kafka-passthrough", "--cluster", f"ssh:{file}",
                  "--events", "1000", "--fault", "kill-driver@2:sink-done", "--json", "--keep", str(work / "run"),
                  cwd=work, env=env, timeout=1800)
        assert run.rc == 0, run.stdout[-2000:] + run.stderr[-3000:]
        r = run.json
        assert r["verdict"] == "at-least-once" and all(f["fired"] for f in r["faults"]), r["faults"]
        assert {d["batch"] for d in r["duplicated"]} == {2}, r["duplicated"][:3]
        assert left_by(run.pid) == []
        topics = set(broker.admin().list_topics(timeout=30).topics)
        assert "orders" in topics and not [t for t in topics if t.startswith("streamchaos.")], topics
        leaked = [p for p in work.rglob("*") if p.is_file() and p.relative_to(work).parts[0] != "broker"
                  and p.stat().st_size < 50_000_000 and SECRET.encode() in p.read_bytes()]
        assert leaked == [], leaked
    finally:
        broker.stop()
        owned.stop_all()
        for remote in cluster.remotes.values():
            remote.close()
    nothing_left_on(kafka_hosts, kafka_hosts.file)  # the same hosts (the user's file needs its environment)
