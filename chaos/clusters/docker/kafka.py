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

from chaos.clusters.docker.containers import labels
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
    """Kafka in a container of ``cluster``'s network; the same surface as ``KafkaBroker``."""

    def __init__(self, cluster: DockerCluster, owned: Owned, work_dir: Path) -> None:
        super().__init__(owned, work_dir)
        self.cluster = cluster
        self.container = None
        self.address = ""  # the container's, once it runs

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

    def start(self, *, say=None, proxy: Callable[[str, str], str] | None = None) -> KafkaNode:
        jars = str(Path(broker_classpath(say=say)).parent)
        classpath = f"{JARS}/*"
        started = time.monotonic()
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
        self.container = c.docker.containers.run(
            c.image, ["/bin/sh", "-c", script], name=f"{c.prefix}-kafka", hostname="kafka", user="nobody",
            network=c.network.name, labels=labels("node-kafka", c.owned.tag),
            volumes={jars: {"bind": JARS, "mode": "ro"}, str(self.home): {"bind": str(self.home), "mode": "rw"}},
            detach=True, init=True)
        self.address = c.address(self.container)
        self.port, self.controller_port = PORTS["PLAINTEXT"], PORTS["CONTROLLER"]
        self._open_listeners(proxy, {name: PORTS[name] for name in ("SOURCE", "SINK")})
        ready = props.with_name("server.properties.tmp")
        ready.write_text(self._properties())
        ready.rename(props)  # the container starts the broker once the file is whole
        self._wait()
        self.start_s = round(time.monotonic() - started, 2)
        return self

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
            self.container.start()
        if (now := self.cluster.address(self.container)) != self.address:  # listeners bound to the old one
            raise HarnessError(f"the Kafka node came back at {now}, not at {self.address} where its clients and "
                               "proxies reach it")
        self._wait()
        self.recovery_s = round(time.monotonic() - started, 2)

    def stop(self) -> None:
        if self.container is not None:
            try:
                self.container.remove(force=True, v=True)
            except Exception:  # docker.errors.NotFound: gone already
                pass
            self.container = None
        shutil.rmtree(self.home, ignore_errors=True)
