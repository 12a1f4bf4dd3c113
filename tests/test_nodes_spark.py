"""Spark on Docker nodes: a real dockerd, the node image built offline, a master and two workers in containers
on the harness's own network, a driver on the host whose executors and Python workers run in the nodes.

Without a Docker daemon these tests are skipped, except in CI (``CI=true``), where .ci/run starts one: there a
missing daemon fails them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from chaos.clusters.docker.containers import OWNER_LABEL, configured, reap_containers
from chaos.errors import UserError

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def docker_client():
    from chaos.clusters.docker.containers import client

    try:
        if not configured():
            raise UserError("no Docker daemon socket")
        found = client(timeout=30)
    except UserError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs a Docker daemon: {exc}")
        pytest.skip(f"no Docker daemon: {exc}")
    yield found
    found.close()


@pytest.fixture(scope="module")
def node_image(docker_client):
    from chaos.clusters.docker.image import build

    return build(docker_client, echo=lambda *_: None)  # found by its tag when built already


@pytest.fixture(scope="module")
def nodes(node_image, tmp_path_factory):
    from chaos.clusters.docker.nodes import DockerCluster
    from chaos.machine.processes import Owned

    owned = Owned()
    cluster = DockerCluster(owned, tmp_path_factory.mktemp("nodes"), workers=2, worker_cores=1,
                            image=node_image)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        owned.stop_all()


def _session(cluster):
    """A driver on the host, listening on the host's end of the nodes' network. Its Python workers run this very
    interpreter (PYSPARK_PYTHON, as the harness's drivers have it), mounted into the nodes."""
    from pyspark.sql import SparkSession

    from chaos.machine.spark import DRIVER_TIMEOUTS

    builder = SparkSession.builder
    for key, value in DRIVER_TIMEOUTS.items():
        builder = builder.config(key, value)
    return (builder.master(cluster.master_url).appName("streamchaos-nodes-test")
            .config("spark.ui.enabled", "false").config("spark.driver.host", cluster.gateway)
            .config("spark.driver.bindAddress", cluster.gateway)
            .config("spark.executor.memory", "512m").config("spark.cores.max", "2")
            .getOrCreate())


def _where_tasks_ran(spark, n: int = 8) -> set[str]:
    """The hostnames of the Python workers that ran ``n`` tasks."""
    return set(spark.sparkContext.parallelize(range(n), n).map(lambda _: socket.gethostname()).collect())


def test_executors_and_python_workers_run_in_the_nodes_and_survive_a_node_kill(nodes, docker_client, monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    network = docker_client.networks.get(nodes.network.name)
    assert network.attrs["Internal"] is True  # no route out of the harness's network
    assert network.attrs["Labels"][OWNER_LABEL] == nodes.owned.tag
    spark = _session(nodes)
    try:
        deadline = time.monotonic() + 60
        while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1 < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _where_tasks_ran(spark) == {"worker-0", "worker-1"}  # the same Python, mounted from the host
        nodes.kill_node(0)  # the worker, its executor and Python workers die together
        assert _where_tasks_ran(spark) == {"worker-1"}
        nodes.restart_worker(0)
        assert nodes.healthy()
        deadline = time.monotonic() + 60
        while "worker-0" not in _where_tasks_ran(spark) and time.monotonic() < deadline:
            time.sleep(1)
        assert "worker-0" in _where_tasks_ran(spark, 16)  # the replacement node got an executor again
    finally:
        spark.stop()


def test_the_kafka_node_recovers_its_log_after_a_kill_and_a_partition_cuts_it_off(nodes, docker_client, tmp_path):
    """``--cluster docker``'s broker is a container on the nodes' network (chaos/clusters/docker/kafka.py), the
    same Kafka the local broker runs: a ``docker kill`` and start of it is Kafka's log recovery on the records it
    had, a pause freezes it without losing it, a partition cuts the host's clients off until the heal, and nothing
    of it is left after its stop."""
    import ipaddress

    from chaos.clusters.docker.kafka import KafkaNode
    from chaos.machine.processes import Owned, wait_until
    from chaos.scenario.faults import parse_fault

    owned = Owned()
    broker = KafkaNode(nodes, owned, tmp_path).start()
    name = broker.container.name
    try:
        subnet = ipaddress.ip_network(nodes.network.attrs["IPAM"]["Config"][0]["Subnet"])
        assert ipaddress.ip_address(broker.address) in subnet  # the nodes' network, never loopback or beyond
        broker.create_topic("orders", 2)
        broker.produce("orders", [(i % 2, f"k{i % 7}".encode(), str(i).encode(), 1_767_225_600_000 + i)
                                  for i in range(300)])
        killed = broker.kill()
        assert killed and broker.pid is None and not broker.ready()
        broker.restart()
        assert broker.recovery_s is not None and broker.end_offsets("orders") == {"0": 150, "1": 150}
        assert sorted(int(v) for _, _, _, v in broker.read("orders")) == list(range(300))
        broker.pause()
        assert broker.pid is not None and not broker.alive()  # frozen, not gone
        broker.resume()
        assert wait_until(broker.ready, 30, 0.2)
        node, heal = nodes.partition(parse_fault("partition@0:reading/node=kafka/5s"), {}, broker, None)
        assert node == "kafka" and not nodes.attached(broker.container)
        with pytest.raises(OSError):
            socket.create_connection((broker.address, broker.port), timeout=2).close()
        heal()
        assert wait_until(broker.ready, 60, 0.5) and broker.end_offsets("orders") == {"0": 150, "1": 150}
    finally:
        broker.stop()
        owned.stop_all()
    assert docker_client.containers.list(all=True, filters={"name": name}) == []


@pytest.mark.long  # one broker node's faults in the default run: the test above
def test_three_broker_nodes_keep_every_acknowledged_record_when_the_leader_is_killed(nodes, docker_client, tmp_path):
    """``--brokers 3``: three nodes, each a voter of the KRaft quorum, every partition on all three and two of them
    in sync before a write is acknowledged. The leader of the topic's first partition killed: another leads, the
    producer's records are taken meanwhile, and the killed broker comes back on its data and catches up."""
    from confluent_kafka.admin import ConfigResource

    from chaos.clusters.docker.kafka import KafkaNodes
    from chaos.machine.processes import Owned, wait_until

    owned = Owned()
    brokers = KafkaNodes(nodes, owned, tmp_path, 3).start()
    names = [m.container.name for m in brokers.members]
    try:
        assert brokers.proxies("source") == ("kafka-0-source", "kafka-1-source", "kafka-2-source")
        assert len(brokers.bootstrap.split(",")) == 3 and brokers.brokers == 3
        brokers.create_topic("orders", 2)
        admin = brokers.admin()  # held until its futures resolve
        topic = admin.list_topics("orders", timeout=10).topics["orders"]
        assert all(len(p.replicas) == 3 for p in topic.partitions.values())
        [config] = [f.result(30) for f in admin.describe_configs([ConfigResource("topic", "orders")]).values()]
        assert config["min.insync.replicas"].value == "2"
        records = [(i % 2, f"k{i % 7}".encode(), str(i).encode(), 1_767_225_600_000 + i) for i in range(400)]
        brokers.produce("orders", records[:200])
        leader = brokers.leader_of("orders")
        assert leader.kill() and leader.pid is None
        assert wait_until(lambda: brokers.leader_of("orders") is not leader, 60, 0.5)  # another leads
        brokers.produce("orders", records[200:])  # two of three in sync: taken while the old leader is down
        leader.restart()
        assert brokers.ready() and brokers.end_offsets("orders") == {"0": 200, "1": 200}
        assert sorted(int(v) for _, _, _, v in brokers.read("orders")) == list(range(400))
    finally:
        brokers.stop()
        owned.stop_all()
    assert all(docker_client.containers.list(all=True, filters={"name": n}) == [] for n in names)


BROKER_NODE_FAULTS = ["kill-broker@2:reading/3s", "pause-broker@3:sink-done/3s", "partition@4:reading/node=kafka/5s",
                      "kill-driver@4:sink-done"]


@pytest.mark.long  # the broker node's own faults, without Spark: the test above
def test_a_kafka_job_on_nodes_is_exactly_once_when_its_broker_node_is_killed_frozen_and_cut_off(node_image, tmp_path):
    """Spark's Kafka connector in the driver and in the executors of the worker nodes reads the broker's node through
    the source channel's proxy; the broker's node killed, frozen and cut off, and a replayed batch."""
    from tests.conftest import cli, left_by
    from tests.test_kafka_spark import CONNECTOR_SPARK, added_connector_spark

    added_connector_spark(tmp_path)
    run = cli("--spark", CONNECTOR_SPARK, "trial", "kafka-windowed-count", "--cluster", "docker", "--events", "1000",
              "--keep", str(tmp_path / "run"), "--json", *[a for f in BROKER_NODE_FAULTS for a in ("--fault", f)],
              cwd=tmp_path, timeout=900)
    assert run.rc == 0, run.stderr[-2000:]
    result = run.json
    assert result["verdict"] == "exactly-once" and result["consistent_cut"]["ok"] is True
    assert [f["spec"] for f in result["faults"]] == BROKER_NODE_FAULTS and all(f["fired"] for f in result["faults"])
    assert result["faults"][2]["detail"]["node"] == "kafka" and result["cluster"]["kind"] == "docker"
    assert left_by(run.pid) == []


def test_nothing_of_a_stopped_or_killed_harness_is_left(node_image, docker_client, tmp_path):
    """A cluster stopped cleanly leaves no container or network; one whose harness was SIGKILLed is reaped."""
    script = (
        "import sys, time; from pathlib import Path; from chaos.clusters.docker.nodes import DockerCluster; "
        "from chaos.machine.processes import Owned; "
        f"c = DockerCluster(Owned(), Path(sys.argv[1]), workers=1, image={node_image!r}); c.start(); "
        "Path(sys.argv[1], 'started').write_text(c.prefix); time.sleep(600)"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while not (tmp_path / "started").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert (tmp_path / "started").exists(), proc.stderr.read() if proc.poll() is not None else "no start"
    prefix = (tmp_path / "started").read_text()
    assert len(docker_client.containers.list(filters={"name": prefix})) == 2  # master and one worker
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert reap_containers() >= 3  # two containers and the network
    assert docker_client.containers.list(all=True, filters={"name": prefix}) == []
    assert docker_client.networks.list(names=[prefix]) == []
    assert reap_containers() == 0


def _cli_node_trial(tmp_path, pipeline: str, *args: str) -> dict:
    from tests.conftest import cli, left_by

    run = cli("trial", pipeline, "--cluster", "docker", "--keep", str(tmp_path / "run"), "--json", *args,
              cwd=tmp_path)
    assert run.rc == 0, run.stderr[-2000:]
    assert left_by(run.pid) == [], "the trial left processes behind"
    return run.json


@pytest.mark.long  # the standalone cluster's and the plugin's: tests/test_shadowing_spark.py
def test_a_job_beside_namesakes_of_the_harness_packages_runs_on_nodes(node_image, docker_client, tmp_path):
    """Run from the project's directory (the driver's path holds it) with the harness's packages folder first on
    every path, mounted into the nodes: the nodes' Python workers and the driver import the harness's packages,
    not the project's namesakes (chaos/machine/own_packages.py; the standalone cluster and the plugin:
    tests/test_shadowing_spark.py)."""
    from tests.conftest import cli, left_by
    from tests.shadow_project import JOB, JOB_ARGS, make_project, marks

    project = make_project(tmp_path / "project")
    run = cli("trial", JOB, *JOB_ARGS, "--cluster", "docker", "--events", "600", "--json",
              "--keep", str(project / "runs" / "t"), cwd=project, script=True)
    assert run.rc == 0, run.stderr[-3000:]
    assert run.json["verdict"] == "exactly-once" and run.json["cluster"]["kind"] == "docker"
    assert marks(project / "runs") == [] and left_by(run.pid) == []


@pytest.mark.long
def test_a_starved_node_and_a_node_out_of_memory_keep_key_count_exactly_once(node_image, docker_client, tmp_path):
    """On a user's image (--image): here the built one under a name of the user's. The starved node slows the
    trial; the node out of memory loses an executor to the kernel's OOM killer, not to the harness."""
    image = docker_client.images.get(node_image)
    image.tag("streamchaos-test/users-node", "1")
    try:
        result = _cli_node_trial(tmp_path, "key-count", "--events", "1400", "--fault", "slow-node@2:reading/6s",
                                 "--fault", "oom-node@5:reading/1/8s", "--image", "streamchaos-test/users-node:1")
    finally:
        docker_client.images.remove("streamchaos-test/users-node:1")
    assert result["cluster"]["image"] == "streamchaos-test/users-node:1"
    assert result["verdict"] == "exactly-once" and result["consistent_cut"]["ok"] is True
    slow, oom = result["faults"]
    assert slow["fired"] and slow["detail"]["cpus"] == 0.1 and slow["detail"]["duration"] == 6.0
    detail = oom["detail"]
    assert oom["fired"] and detail["node"] == 1 and detail["limit_mib"] > detail["usage_mib"]
    assert detail["killed"] and set(detail["killed"]) <= set(detail["executors"])  # by the kernel, not by us


@pytest.mark.long
def test_every_node_cut_off_past_the_recovery_timeout_is_stalled_never_a_pass(node_image, docker_client, tmp_path):
    from tests.conftest import cli, left_by

    run = cli("trial", "key-count", "--cluster", "docker", "--events", "1000", "--recovery-timeout", "15",
              "--fault", "partition@2:reading/node=0/until=committed",
              "--fault", "partition@2:reading/node=1/until=committed", "--json", cwd=tmp_path)
    assert run.rc == 3, run.stderr[-2000:]  # inconclusive
    result = run.json
    assert result["verdict"] == "stalled" and result["outcome"] == "stalled"
    assert all(f["fired"] for f in result["faults"])
    assert left_by(run.pid) == []
    assert docker_client.containers.list(all=True, filters={"name": result["cluster"]["network"]}) == []


def test_an_image_dockerd_does_not_have_is_one_line_and_nothing_is_started(docker_client, tmp_path):
    from tests.conftest import cli

    run = cli("trial", "key-count", "--cluster", "docker", "--image", "streamchaos-test/no-such:0", cwd=tmp_path)
    assert run.rc == 2 and "Traceback" not in run.stderr
    assert "no image streamchaos-test/no-such:0 in this machine's dockerd" in run.stderr.strip().splitlines()[-1]
    mine = [c for c in docker_client.containers.list(all=True, filters={"label": OWNER_LABEL})
            if c.labels[OWNER_LABEL].startswith(f"{run.pid}:")]  # the module's node cluster is not this run's
    assert mine == []


def _history(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]


# -- trials on one harness for the module: its nodes, database node and spare drivers start once, as in a campaign --
@pytest.fixture(scope="module")
def node_harness(node_image, docker_client, tmp_path_factory):
    """The harness ``--cluster docker`` runs; after it closed, none of its containers or its network is left. The
    nodes mount the session's temporary folder, where each test's run directory is (``trial --keep`` mounts the
    folder of the directory it keeps)."""
    from chaos.run.harness import Harness

    with Harness(cluster="docker", workdir=tmp_path_factory.mktemp("node-harness"),
                 data_dir=tmp_path_factory.getbasetemp()) as harness:
        yield harness
        prefix = harness.cluster.prefix if harness.cluster is not None else None
    assert prefix is not None
    assert docker_client.containers.list(all=True, filters={"name": prefix}) == []  # the database node too
    assert docker_client.networks.list(names=[prefix]) == []


def _node_trial(harness, tmp_path, pipeline: str, *faults: str, events: int) -> dict:
    """``streamchaos trial PIPELINE --cluster docker`` on the module's harness; exit 0 as the command's would be."""
    from tests.test_trials_spark import trial

    return trial(harness, tmp_path, pipeline, "--cluster", "docker", "--events", str(events),
                 *[arg for fault in faults for arg in ("--fault", fault)])


NODE_FAULTS = ["partition@2:reading/node=1/8s", "partition@4:reading/node=1/from=driver/8s", "kill-node@6:sink-write"]


def test_key_count_stays_exactly_once_across_partitions_and_a_node_kill(node_harness, tmp_path):
    """One trial, three node faults at their own batches: node 1 cut off both ways, then only from the driver's
    end (one way), then a node killed after the sink wrote."""
    result = _node_trial(node_harness, tmp_path, "key-count", *NODE_FAULTS, events=1600)
    assert result["verdict"] == "exactly-once" and result["lost"] == [] and result["duplicated"] == []
    assert result["consistent_cut"]["ok"] is True
    both, one_way, kill = result["faults"]
    assert [f["spec"] for f in result["faults"]] == NODE_FAULTS and all(f["fired"] for f in result["faults"])
    for cut in (both, one_way):
        assert cut["detail"]["node"] == 1 and cut["detail"]["duration"] == 8.0
    assert "from" not in both["detail"] and one_way["detail"]["from"] == "driver"  # one way: host -> node 1 dropped
    assert kill["detail"]["node"] in (0, 1)
    heals = {e["detail"]["spec"]: e for e in _history(tmp_path / "run") if e["kind"] == "heal"}
    assert sorted(heals) == sorted(NODE_FAULTS)  # the killed node restarted too
    for cut in (both, one_way):
        assert heals[cut["spec"]]["t"] - cut["t"] >= 8.0 - 0.5  # cut for its duration, then healed
    assert result["cluster"]["kind"] == "docker"


def test_pg_upsert_by_batch_stays_exactly_once_while_its_database_node_is_cut_off(node_harness, tmp_path):
    """The write of batch 3 cannot reach the database until the partition heals; the sink retries it then."""
    fault = "partition@3:sink-write/node=sink/10s"
    result = _node_trial(node_harness, tmp_path, "pg-upsert-by-batch", fault, events=1200)
    assert result["verdict"] == "exactly-once" and result["lost"] == [] and result["duplicated"] == []
    [fired] = result["faults"]
    assert fired["fired"] and fired["detail"]["node"] == "sink" and fired["detail"]["duration"] == 10.0
    history = _history(tmp_path / "run")
    [heal] = [e for e in history if e["kind"] == "heal"]
    [done] = [e for e in history if e["kind"] == "phase" and e["phase"] == "sink-done" and e["batch"] == 3]
    assert done["t"] >= heal["t"] and done["detail"]["attempts"] >= 2  # written only once the node was back


def test_pg_append_under_a_database_partition_and_a_driver_kill_is_found_at_least_once(node_harness, tmp_path):
    result = _node_trial(node_harness, tmp_path, "pg-append", "partition@3:sink-write/node=sink/10s",
                         "kill-driver@3:sink-done", events=1200)
    assert result["verdict"] == "at-least-once" and result["lost"] == [] and result["duplicated"]
    assert all(f["fired"] for f in result["faults"])


def test_channel_faults_and_executor_side_sinks_work_on_nodes(node_harness, tmp_path):
    """The proxies listen on the host's end of the nodes' network: executors in the nodes read the event log
    through the source channel (cut here) and pg-two-phase's tasks stage their rows through the sink channel."""
    result = _node_trial(node_harness, tmp_path, "pg-two-phase", "cut-source@3:reading/5s", events=1200)
    assert result["verdict"] == "exactly-once" and result["lost"] == [] and result["duplicated"] == []
    [fired] = result["faults"]
    assert fired["fired"] and fired["detail"]["channel"] == "source"
    staged = [e for e in _history(tmp_path / "run") if e["kind"] == "phase" and e["phase"] == "sink-write"]
    assert sum(e["detail"]["rows"] for e in staged) >= 1200  # every row staged by a task in a node, none lost
