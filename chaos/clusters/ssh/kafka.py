"""The Kafka broker on the hosts' file's Kafka host (``kafka = "HOST"``): Apache Kafka started over SSH, as the Spark
daemons and the database host's PostgreSQL are.

A Jepsen test runs the system it tests on nodes it can crash and cut off; a job reading Kafka on a cluster of hosts
then has its broker on one of them: a node kill of that host kills it, a partition of that host cuts it off, and
``kill-broker``/``pause-broker`` signal its process over SSH. It is the same Apache Kafka as the harness's local
broker (``chaos.clusters.kafka.broker``): the cached jars are copied once into the harness's work directory on the
shared storage (every host sees it at the same path), its ``server.properties`` and log are there too, its data
in a directory of the harness under ``/var/tmp/streamchaos`` on the host (a tagged directory: removed at the stop, or
by the next start's reaping), its listeners on the host's address at free ports. The job's listeners are advertised
as the fault proxies' addresses on this machine, as the local broker's are, so the source and sink channels' faults
act between the job and the broker; the harness's own producer, admin and reads use the plain listener.
"""

from __future__ import annotations

import shlex
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from chaos.clusters.kafka.broker import KafkaBroker
from chaos.clusters.kafka.jars import broker_classpath
from chaos.clusters.ssh.database import FREE_PORT
from chaos.clusters.ssh.remote import OWNED_DIRS, OWNER_FILE, remote_tag
from chaos.errors import HarnessError, UserError
from chaos.machine.processes import OWNER_VAR, Owned
from chaos.machine.spark import log_tail

HOME_PREFIX = "kafka-"
JAVA = ["sh", "-c", 'exec "${JAVA_HOME:+$JAVA_HOME/bin/}java" "$@"', "java"]  # the host's Java, as Spark's finds it


class HostKafka(KafkaBroker):
    """Kafka on the Kafka host of a ``HostsCluster``; the surface of ``KafkaBroker``."""

    def __init__(self, cluster, owned: Owned, work_dir: Path) -> None:
        super().__init__(owned, work_dir)
        self.cluster = cluster
        self.host = cluster.file.host(cluster.file.kafka_host)
        self.remote = cluster.remotes[self.host.name]
        self.procs = cluster.procs[self.host.name]
        self.address = self.host.address
        self.data_home = f"{OWNED_DIRS}/{HOME_PREFIX}{remote_tag().replace('/', '-').replace(':', '-')}"
        self.sid: int | None = None
        self.classpath = ""

    @property
    def data_dir(self) -> str:
        return f"{self.data_home}/data"

    @property
    def pid(self) -> int | None:
        return self.sid

    def alive(self) -> bool:
        return self.sid is not None and self.remote.run(["kill", "-0", str(self.sid)]).rc == 0

    def start(self, *, say=None, proxy: Callable[[str, str], str] | None = None) -> HostKafka:
        started = time.monotonic()
        jars = Path(broker_classpath(say=say)).parent
        shutil.rmtree(self.home, ignore_errors=True)
        (self.home / "jars").mkdir(parents=True)
        for jar in jars.glob("*.jar"):  # on the shared storage: the host reads them at the same path
            shutil.copy2(jar, self.home / "jars" / jar.name)
        self.classpath = str(self.home / "jars" / "*")
        self.log_path.write_text("")
        self.log_path.chmod(0o666)
        home = shlex.quote(self.data_home)
        self.remote.run(["sh", "-c", f"rm -rf {home} && mkdir -p {home}/data && echo {shlex.quote(remote_tag())} > "
                                     f"{home}/{OWNER_FILE}"], check=True)  # what a stop could not remove goes first
        ports = [self._free_port() for _ in range(4)]
        self.port, self.controller_port = ports[0], ports[1]
        self._open_listeners(proxy, {"SOURCE": ports[2], "SINK": ports[3]})
        (self.home / "server.properties").write_text(self._properties())
        tagged = f"{OWNER_VAR}={shlex.quote(self.procs.tag)}"  # reaped with the rest if the harness dies meanwhile
        fmt = self.remote.run(["sh", "-c", f"env {tagged} {shlex.join([*JAVA, *self.format_args(self.classpath)])} "
                                           f">> {shlex.quote(str(self.log_path))} 2>&1"], timeout=120)
        if fmt.rc != 0:
            raise HarnessError(f"Kafka's storage format failed on host {self.host} (exit {fmt.rc}): "
                               f"{log_tail(self.log_path)}")
        self._launch(self.classpath)
        self.start_s = round(time.monotonic() - started, 2)
        return self

    def listener_ports(self) -> list[int]:
        """The ports clients reach it on (the harness's, the job's source and sink): what a partition drops."""
        return [self.port, *(port for port, _ in self._listeners.values())]

    def _free_port(self) -> int:
        ran = self.remote.run([self.cluster.file.python, "-c", FREE_PORT, self.address], check=True)
        return int(ran.out.strip())

    def _launch(self, classpath: str) -> None:
        self.sid = self.procs.start([*JAVA, *self.java_args(classpath)], log=str(self.log_path), cwd=str(self.home))
        self._wait()

    def kill(self) -> int | None:
        """SIGKILL the broker's session on its host (``kill-broker``); a node kill of the host does the same."""
        sid, self.sid = self.sid, None
        if sid is not None:
            self.procs.kill_session(sid)
        return sid

    def pause(self) -> None:
        if self.sid is not None:
            self.procs.signal_session(self.sid, "STOP")

    def resume(self) -> None:
        if self.sid is not None:
            self.procs.signal_session(self.sid, "CONT")

    def restart(self) -> None:
        """Start again on the same data and ports (after a kill, or a node kill of its host): log recovery."""
        started = time.monotonic()
        if self.sid is not None:
            self.kill()  # a node kill took it: nothing of the old session may hold the ports
        self._launch(self.classpath)
        self.recovery_s = round(time.monotonic() - started, 2)

    def stop(self) -> None:
        try:
            if self.sid is not None:
                self.procs.stop_session(self.sid, grace=10)
                self.sid = None
            self.remote.run(["rm", "-rf", self.data_home])
        except UserError:
            pass  # the host went away: the next start's reaping removes the directory
        shutil.rmtree(self.home, ignore_errors=True)
        if self.cluster.broker is self:  # a host's restart no longer brings it back
            self.cluster.broker = None
