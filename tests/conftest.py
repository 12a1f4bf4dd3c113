"""Shared fixtures: one standalone Spark cluster per test session, and a CLI runner.

Two ways a Spark test runs a trial. Most run on the session's shared harness, the pytest plugin's
``chaos_harness`` (``tests.test_trials_spark.trial``, with ``streamchaos trial``'s own options): as in a
campaign, each trial's first driver and first standby were booted during the previous test's trial or
recycled from it. What needs the command itself (its exit codes, its own harness's options and process
tree, the cold path) runs the real ``streamchaos`` CLI as a subprocess against the session's cluster
(``--cluster spark://...``), so each such test pays for its drivers, not for a cluster start.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from chaos.clusters.standalone import StandaloneCluster
from chaos.machine.java import require_java
from chaos.machine.processes import OWNER_VAR, Owned

REPO = Path(__file__).resolve().parent.parent
# A user's project run by the plugin test in its own pytest process, not part of this suite.
collect_ignore = ["plugin_project"]


def in_process_session(master: str, app: str):
    """A SparkSession in the test process itself (loopback, no UI, 2 shuffle partitions, UTC), stopped after:
    for module fixtures that check a piece of code against Spark without a harness."""
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master(master).appName(app)
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC").config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@dataclass
class CliRun:
    rc: int
    stdout: str
    stderr: str
    pid: int

    @property
    def json(self) -> dict:
        return json.loads(self.stdout)


def cli(*args: str, cwd: Path, env: dict | None = None, timeout: float = 600, script: bool = False) -> CliRun:
    """``python -m chaos ARGS`` in ``cwd``; ``script``: the installed ``streamchaos`` command, as a user runs it
    (``-m`` would put ``cwd`` first on the path, ahead of the install)."""
    command = [shutil.which("streamchaos") or str(Path(sys.executable).with_name("streamchaos"))] if script \
        else [sys.executable, "-m", "chaos"]
    proc = subprocess.Popen(
        [*command, *args],
        cwd=cwd, env=env or os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    out, err = proc.communicate(timeout=timeout)
    return CliRun(proc.returncode, out, err, proc.pid)


def left_by(pid: int) -> list[psutil.Process]:
    """Processes still alive that a harness with this pid started."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            tag = proc.environ().get(OWNER_VAR, "")
        except (psutil.Error, OSError):
            continue
        if tag.startswith(f"{pid}:") and proc.status() != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    require_java()
    owned = Owned()
    # Two cores per worker, as the harness's own cluster has: a standby driver's application holds executors.
    cluster = StandaloneCluster(owned, tmp_path_factory.mktemp("cluster"), workers=2, worker_cores=2,
                                worker_memory="2g")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        owned.stop_all()


# A run's Kafka output as the client rerouting tests give it: the trial's broker (nothing listens) and topic.
KAFKA_ROUTE = {"bootstrap": "127.0.0.1:1", "topic": "streamchaos-t1-out", "named": "orders-clean"}


@pytest.fixture
def kafka_rerouted(monkeypatch, tmp_path):
    """A run's rerouting (one ``reroute()`` for confluent_kafka's clients and kafka-python's), every class and method
    it replaces put back after the test (tests/test_kafka_clients.py, tests/test_kafka_python_clients.py)."""
    import confluent_kafka
    import confluent_kafka.admin
    import kafka
    import kafka.admin.client
    import kafka.consumer.group
    import kafka.producer.kafka

    from chaos.jobs.kafka.confluent_admin import CONFIG_REQUESTS, GROUP_REQUESTS, TOPIC_REQUESTS

    for module, name in ((kafka, "KafkaProducer"), (kafka, "KafkaConsumer"), (kafka, "KafkaAdminClient"),
                         (kafka.producer, "KafkaProducer"), (kafka.producer.kafka, "KafkaProducer"),
                         (kafka.consumer, "KafkaConsumer"), (kafka.consumer.group, "KafkaConsumer"),
                         (kafka.admin, "KafkaAdminClient"), (kafka.admin.client, "KafkaAdminClient")):
        monkeypatch.setattr(module, name, getattr(module, name))
    for name in ("Producer", "Consumer", "SerializingProducer", "DeserializingConsumer"):
        monkeypatch.setattr(confluent_kafka, name, getattr(confluent_kafka, name))
    admin = confluent_kafka.admin.AdminClient  # changed in place: its own methods put back
    for name in ("__init__", "list_topics", "list_consumer_groups", "list_groups", "create_topics", "delete_topics",
                 *TOPIC_REQUESTS, *CONFIG_REQUESTS, *GROUP_REQUESTS):
        monkeypatch.setattr(admin, name, getattr(admin, name))
    monkeypatch.setattr(admin, "_streamchaos_rerouted", False, raising=False)  # removed after the test
    from chaos.jobs.kafka import rerouting as kafka_rerouting
    from chaos.jobs.kafka import sink as kafka_sink

    output = {"bootstrap": KAFKA_ROUTE["bootstrap"], "topic": KAFKA_ROUTE["topic"]}
    kafka_sink.begin(output, tmp_path, KAFKA_ROUTE["named"])
    kafka_rerouting.reroute()
    yield
    kafka_sink.end()
