"""Kafka on a cluster of hosts (``--cluster ssh:FILE``): the broker on a host of the file (``kafka = "HOST"``),
killed over SSH and cut off by iptables rules on its host, or on this machine, reached by the hosts' executors
through the channels' proxies. The hosts carry PySpark 4.2.0, whose Kafka connector Maven serves: an image of
their own (``streamchaos --spark 4.2.0 image build --hosts``)."""

from __future__ import annotations

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
