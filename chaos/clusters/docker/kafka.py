"""The Kafka broker as a node of a Docker cluster: the harness's broker in a container on the nodes' network.

On ``--cluster docker`` a job's Kafka is a machine of its own, as it is in production: node faults reach it
(``partition@B:P/node=kafka/DURATION`` cuts it off, ``docker kill`` is ``kill-broker``, ``docker pause`` is
``pause-broker``), and the executors in the worker nodes reach it over the network like the driver does. The broker
is the same Apache Kafka the local one runs (``chaos.clusters.kafka.broker``: its jars from the harness's Maven
cache, mounted read-only at their path; the node image's Java 17), started as ``nobody`` on a data directory inside
the container, so a kill and a ``docker start`` of the same container is Kafka's own log recovery on what it had.

Its listeners bind the container's address. The harness's producer, admin and reads reach it there from the host
(the host's end of the bridge); the job's source and sink listeners are advertised as the fault proxies in front of
them, which listen on the host's end too, so the channel faults act between the job and the broker. The listeners'
addresses are known only once the container runs: it waits for its ``server.properties``, which the harness writes
then.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.clusters.docker.containers import labels, remove
from chaos.clusters.kafka.broker import KafkaBroker
from chaos.clusters.kafka.jars import broker_classpath
from chaos.errors import HarnessError
from chaos.machine.processes import Owned

if TYPE_CHECKING:
    from chaos.clusters.base import Cluster as DockerCluster  # the Docker nodes (chaos.clusters.docker.nodes)

JARS = "/opt/kafka/libs"  # the cached jars' folder, mounted here: the cache's own path may be closed to nobody
DATA = "/tmp/kafka/data"  # in the container's own filesystem: kept across a docker kill and start, gone at removal
PORTS = {"PLAINTEXT": 9092, "CONTROLLER": 9093, "SOURCE": 9094, "SINK": 9095}


class KafkaNode(KafkaBroker):
    """Kafka in a container of ``cluster``'s network; the same surface as ``KafkaBroker``. Alone, it is its own
    controller; as ``number`` of a ``KafkaNodes`` cluster, one of its voters."""

    def __init__(self, cluster: DockerCluster, owned: Owned, work_dir: Path, number: int | None = None) -> None:
        super().__init__(owned, work_dir)
        self.cluster = cluster
        self.number = number  # its node.id - 1 in a cluster of brokers, None alone
        self.voters = ""  # controller.quorum.voters of its cluster of brokers
        self.container = None
        self.address = ""  # the container's, once it runs

    @property
    def name(self) -> str:
        return "kafka" if self.number is None else f"kafka-{self.number}"

    @property
    def data_dir(self) -> str:
        return DATA

    @property
    def pid(self) -> int | None:
        if self.container is None:
            return None
        self.container.reload()
        up = self.container.status in ("running", "paused")  # a paused broker is frozen, not gone
        return (self.container.attrs["State"].get("Pid") or None) if up else None

    def alive(self) -> bool:
        return self.pid is not None and self.container.status == "running"

    def proxies(self, channel: str) -> tuple[str, ...]:
        return (f"{self.name}-{channel}",)

    def settings(self) -> dict[str, str]:
        settings = super().settings()
        if self.number is not None:  # one voter of a static quorum; every internal topic on several brokers
            del settings["controller.quorum.bootstrap.servers"]
            replicas = str(self.replicas)
            settings |= {"node.id": str(self.number + 1), "controller.quorum.voters": self.voters,
                         "default.replication.factor": replicas, "min.insync.replicas": str(min_isr(self.replicas)),
                         "offsets.topic.replication.factor": replicas,
                         "transaction.state.log.replication.factor": replicas,
                         "transaction.state.log.min.isr": str(min_isr(self.replicas))}
        return settings

    def format_args(self, classpath: str) -> list[str]:
        args = super().format_args(classpath)
        return [a for a in args if a != "--standalone"] if self.number is not None else args

    def start(self, *, say=None, proxy: Callable[[str, str], str] | None = None) -> KafkaNode:
        started = time.monotonic()
        self.launch(str(Path(broker_classpath(say=say)).parent), proxy)
        self.configure()
        self._wait()
        self.start_s = round(time.monotonic() - started, 2)
        return self

    def launch(self, jars: str, proxy: Callable[[str, str], str] | None) -> None:
        """The container, waiting for its ``server.properties``; its address and listeners (and their proxies)."""
        classpath = f"{JARS}/*"
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.mkdir(parents=True)
        self.home.chmod(0o777)  # the broker runs as nobody; its log and properties are here
        self.log_path.write_text("")
        self.log_path.chmod(0o666)
        props = self.home / "server.properties"
        java = " ".join(f'"{a}"' for a in self.java_args(classpath))
        fmt = " ".join(f'"{a}"' for a in self.format_args(classpath))
        script = (f"while [ ! -f {props} ]; do sleep 0.1; done; set -e; mkdir -p {DATA}; "
                  f"[ -f {DATA}/meta.properties ] || java {fmt} >>{self.log_path} 2>&1; "
                  f"exec java {java} >>{self.log_path} 2>&1")
        c = self.cluster
        for stale in c.docker.containers.list(all=True, filters={"name": f"^{c.prefix}-{self.name}$"}):
            remove(stale)  # one a failed start of this harness left
        self.container = c.docker.containers.run(
            c.image, ["/bin/sh", "-c", script], name=f"{c.prefix}-{self.name}", hostname=self.name, user="nobody",
            network=c.network.name, labels=labels("node-kafka", c.owned.tag),
            volumes={jars: {"bind": JARS, "mode": "ro"}, str(self.home): {"bind": str(self.home), "mode": "rw"}},
            detach=True, init=True)
        self.address = c.address(self.container)
        self.port, self.controller_port = PORTS["PLAINTEXT"], PORTS["CONTROLLER"]
        self._open_listeners(proxy, {name: PORTS[name] for name in ("SOURCE", "SINK")})

    def configure(self) -> None:
        """Its ``server.properties``, written whole: the container starts the broker then."""
        props = self.home / "server.properties"
        ready = props.with_name("server.properties.tmp")
        ready.write_text(self._properties())
        ready.rename(props)

    def kill(self) -> int | None:
        """``docker kill`` of the node (``kill-broker``): the broker dies with every connection."""
        pid = self.pid
        if pid is not None:
            self.container.kill()
        return pid

    def pause(self) -> None:
        """``docker pause`` (``pause-broker``): the cgroup freezer holds every thread of the node."""
        if self.pid is not None:
            self.container.pause()

    def resume(self) -> None:
        if self.container is not None:
            self.container.reload()
            if self.container.status == "paused":
                self.container.unpause()

    def restart(self) -> None:
        """The same container again, attached at its address: Kafka recovers its log from the data it kept."""
        started = time.monotonic()
        if not self.cluster.attached(self.container):
            self.cluster.reconnect(self.container)
        self.resume()
        self.container.reload()
        if self.container.status != "running":
            # Its address kept for it (a node restarted meanwhile may have been given it): its listeners bind it.
            self.cluster.network.disconnect(self.container, force=True)
            self.cluster.network.connect(self.container, ipv4_address=self.address)
            self.container.start()
        if (now := self.cluster.address(self.container)) != self.address:  # listeners bound to the old one
            raise HarnessError(f"the Kafka node came back at {now}, not at {self.address} where its clients and "
                               "proxies reach it")
        self._wait()
        self.recovery_s = round(time.monotonic() - started, 2)

    def stop(self) -> None:
        remove(self.container)
        self.container = None
        shutil.rmtree(self.home, ignore_errors=True)


def min_isr(replicas: int) -> int:
    """``min.insync.replicas``: a write waits for two copies where three are kept (Kafka's advice), else one."""
    return 2 if replicas >= 3 else 1


class KafkaNodes(KafkaBroker):
    """A cluster of brokers, each a node of its own and a voter of the KRaft quorum (``--brokers N``); every
    partition on up to three of them, ``min.insync.replicas`` two of three. A broker fault aims at the leader of the
    trial's topic's first partition (``leader_of``); the job's source and sink connections go through one proxy per
    broker, and a channel fault acts on them all."""

    def __init__(self, cluster: DockerCluster, owned: Owned, work_dir: Path, brokers: int) -> None:
        super().__init__(owned, work_dir)
        self.replicas = min(3, brokers)
        self.members = [KafkaNode(cluster, owned, self.home / f"broker-{i}", i) for i in range(brokers)]
        for member in self.members:
            member.cluster_id, member.replicas = self.cluster_id, self.replicas

    @property
    def brokers(self) -> int:
        return len(self.members)

    @property
    def bootstrap(self) -> str:
        return ",".join(m.bootstrap for m in self.members)

    @property
    def log_path(self) -> Path:
        return self.members[0].log_path

    @property
    def pid(self) -> int | None:
        return next((pid for m in self.members if (pid := m.pid) is not None), None)

    def alive(self) -> bool:
        return all(m.alive() for m in self.members)

    def ready(self) -> bool:
        return all(m.ready() for m in self.members)

    def proxies(self, channel: str) -> tuple[str, ...]:
        return tuple(name for m in self.members for name in m.proxies(channel))

    def start(self, *, say=None, proxy: Callable[[str, str], str] | None = None) -> KafkaNodes:
        started = time.monotonic()
        jars = str(Path(broker_classpath(say=say)).parent)
        shutil.rmtree(self.home, ignore_errors=True)
        for member in self.members:
            member.launch(jars, proxy)
        voters = ",".join(f"{m.number + 1}@{m.address}:{m.controller_port}" for m in self.members)
        for member in self.members:
            member.voters = voters
            member.configure()
        self.source_bootstrap = ",".join(m.source_bootstrap for m in self.members)
        self.sink_bootstrap = ",".join(m.sink_bootstrap for m in self.members)
        self._wait()
        self.start_s = round(time.monotonic() - started, 2)
        return self

    def leader_of(self, topic: str | None) -> KafkaBroker:
        """The broker leading ``topic``'s first partition now (the first broker when there is no topic yet)."""
        leader = -1
        running = [m for m in self.members if m.alive()]  # a frozen broker would hold the metadata request
        if topic is not None and running:
            admin = self.admin(",".join(m.bootstrap for m in running))
            found = admin.list_topics(topic, timeout=10).topics.get(topic)
            if found is not None and 0 in found.partitions:
                leader = found.partitions[0].leader
        return next((m for m in self.members if m.number + 1 == leader), self.members[0])

    def kill(self) -> int | None:
        pids = [m.kill() for m in self.members]
        return next((pid for pid in pids if pid is not None), None)

    def pause(self) -> None:
        for member in self.members:
            member.pause()

    def resume(self) -> None:
        for member in self.members:
            member.resume()

    def restart(self) -> None:
        started = time.monotonic()
        for member in self.members:
            if not member.ready():
                member.restart()
        self._wait()
        self.recovery_s = round(time.monotonic() - started, 2)

    def stop(self) -> None:
        for member in self.members:
            member.stop()
        shutil.rmtree(self.home, ignore_errors=True)
