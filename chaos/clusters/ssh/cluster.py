"""A Spark standalone cluster on a user's hosts, reached over SSH only (``--cluster ssh:FILE``,
chaos/clusters/ssh/hostsfile.py).

At its start the harness reaps what a killed harness of this machine left on each host (chaos/clusters/ssh/remote.py),
checks every host (chaos/clusters/ssh/checks.py: Java, the driver's PySpark, iptables, root, the shared storage), ships
its code into a venv there (chaos/clusters/ssh/shipping.py), then starts a master on the file's master host and a worker
on every host, each a detached process tagged as its own. Or, with ``master = "spark://..."``, it starts no Spark
process and uses the user's cluster, finding its own applications' executors on the hosts by application id.

The driver runs on this machine, as a Jepsen test's client does, and listens (with the event log, the
controller and the channels' proxies) on this machine's address toward the hosts. The harness's work directory
and the trials' directories must be on the shared storage: the workers' directories, the logs, checkpoints and
sinks live there and the harness reads them from here. Faults act over SSH: signals to an executor's JVM and its
Python workers, and iptables DROP rules on a host for a peer's address (one way or both), deleted at the heal.
"""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from chaos.clusters.base import DRAIN_TIMEOUT_S, Cluster, Heal
from chaos.clusters.ssh.checks import check_hosts
from chaos.clusters.ssh.client import Remote
from chaos.clusters.ssh.hostsfile import Host, HostCluster, load
from chaos.clusters.ssh.remote import HostProcs, HostRules, reap
from chaos.clusters.ssh.shipping import host_jar, link_python, ship, wheels
from chaos.errors import HarnessError, UserError
from chaos.machine.jvm import hooks_jar, hooks_unavailable
from chaos.machine.processes import Owned, wait_until
from chaos.machine.spark import (
    DRIVER_TIMEOUTS,
    MASTER_CLASS,
    MASTER_PORT,
    WORKER_CLASS,
    WORKER_DECOMMISSION_OPTS,
    WORKER_TIMEOUT_S,
    Executor,
    log_tail,
    read_log,
)

WORKER_TIMEOUT_OPTS = f"-Dspark.worker.timeout={WORKER_TIMEOUT_S}"
# A process and all below it, listed before any dies (a dead parent's children move to init), then signalled.
SIGNAL_TREE = ("tree() {{ for c in $(pgrep -P \"$1\"); do tree \"$c\"; done; echo \"$1\"; }}; "
               "kill -{signal} $(tree {pid}) 2>/dev/null; true")



def control_address(host: Host) -> str:
    """This machine's address on the route to ``host`` (no packet is sent: a UDP socket's connect only picks
    the route): where drivers and the harness's servers listen for the hosts."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((host.address, host.port))
        except OSError as exc:
            raise UserError(f"no route from this machine to host {host} ({exc.strerror or exc}): check its "
                            "address") from None
        return probe.getsockname()[0]


class HostsCluster(Cluster):
    """The file's hosts: a master on its master host (unless it names an existing one) and a worker on each."""

    kind = "ssh"
    local_jvms = False  # the hosts run their own JVMs
    peers_in_reports = True  # a reporting task's address names its host

    @classmethod
    def create(cls, spec: str, owned: Owned, workdir: Path, workers: int, worker_cores: int, java_options: str,
               data_dir: Path) -> HostsCluster:
        cluster = cls(spec, workdir, worker_cores=worker_cores, worker_memory=f"{worker_cores}g")
        require_shared(cluster.file, Path(data_dir).resolve())
        return cluster

    @classmethod
    def refusal(cls, fault, spec: str) -> str | None:
        file = load(spec)
        if fault.target == "worker":
            if file.existing:
                return (f"{fault.spec}: the workers of {file.master} are yours, not the harness's: fault an executor "
                        "or a host instead")
            if fault.kind not in ("kill", "pause", "decommission"):
                return (f"{fault.spec}: on a cluster of hosts a worker is killed, paused or decommissioned "
                        "(kill-worker, pause-worker, decommission-worker)")
            return None
        if fault.target == "node" and fault.kind not in ("partition", "kill", "pause", "slow"):
            return (f"{fault.spec}: on a cluster of hosts, kill, pause, slow or partition a host (kill-node, "
                    "pause-node, slow-node, partition) or fault an executor; oom-node needs --cluster docker")
        if fault.target == "broker" and file.user_kafka:
            return (f"{fault.spec}: the Kafka cluster of {file.kafka} is yours, not the harness's: fault the job's "
                    "driver, executors or hosts, or name a host of the file as kafka for a broker of the harness's")
        if fault.target == "broker" and fault.action == "partition" and not file.kafka:
            return (f"{fault.spec} needs a Kafka host in {file.path} (kafka = HOST): here cut the source channel "
                    "instead: cut-source@BATCH:PHASE/10s")
        if fault.target == "sink-db" and file.user_database:
            return (f"{fault.spec}: the database of DATABASE_URL is yours, not the harness's: fault the sink channel "
                    "instead (e.g. down-sink@2:sink-write/3s), or name a host as database")
        if fault.target == "sink-db" and fault.action == "partition" and not file.database:
            return (f"{fault.spec} needs a database host in {file.path} (database = HOST): here cut the sink channel "
                    "instead: cut-sink@BATCH:PHASE/10s")
        return None

    @classmethod
    def kafka_proxied(cls, spec: str) -> bool:
        """A cluster of the user's own (``KAFKA_BOOTSTRAP``) advertises its brokers: no proxy is in between."""
        return not load(spec).user_kafka

    @classmethod
    def remote_checks(cls, spec: str) -> list:
        """Each host reached over SSH and probed: Java, PySpark, iptables, the shared storage; the user's database."""
        from chaos.clusters.ssh.checks import check_hosts_file

        return check_hosts_file(spec)

    @classmethod
    def reap_remote(cls, spec: str) -> list[str]:
        hosts = load(spec)
        lines = []
        for host in hosts.hosts:
            remote = Remote(hosts, host)
            try:
                processes, rules = reap(remote)
            finally:
                remote.close()
            lines.append(f"host {host}: reaped {processes} process(es) and {rules} iptables rule(s)")
        return lines

    def check(self, scenario, pipeline) -> None:
        """The user's own database (``DATABASE_URL``) is theirs: no pipeline creates databases in it."""
        if self.file.user_database and pipeline.database and pipeline.spark_oracle:
            raise UserError(f"{scenario.pipeline}: a job writing to PostgreSQL needs databases of the harness's own "
                            "for its oracle: name a host of the file as database, not DATABASE_URL")
        super().check(scenario, pipeline)

    def sink_database(self, owned: Owned, workdir: Path):
        """The user's own (a schema of the harness's in it), the file's database host, or one on this machine."""
        if self.file.user_database:
            from chaos.clusters.ssh.dburl import read_url
            from chaos.clusters.ssh.userdb import UserDatabase

            return UserDatabase(read_url(), workdir).start()
        if self.file.database:
            from chaos.clusters.ssh.database import HostDatabase

            self.database = HostDatabase(self, workdir).start()
            return self.database
        return super().sink_database(owned, workdir)

    def kafka_broker(self, owned: Owned, workdir: Path, brokers: int = 1):
        """The file's Kafka host's broker (``kafka = HOST``: node faults reach it), else one on this machine, which
        the job reaches through the source and sink channels' proxies on this machine's address toward the hosts."""
        if refused := self.brokers_refusal(brokers):
            raise UserError(refused)
        if self.file.user_kafka:
            from chaos.clusters.ssh.userkafka import of_hosts_file

            return of_hosts_file(self.file, workdir, brokers)
        if self.file.kafka_host:
            from chaos.clusters.ssh.kafka import HostKafka

            self.broker = HostKafka(self, owned, workdir)
            return self.broker
        from chaos.clusters.kafka.broker import KafkaBroker

        return KafkaBroker(owned, workdir)

    def __init__(self, spec: str, workdir: Path, worker_cores: int = 1, worker_memory: str = "1g") -> None:
        self.file: HostCluster = load(spec)
        super().__init__(self.file.master if self.file.existing else "")
        self.owns_workers = not self.file.existing
        self.workdir = Path(workdir).resolve()
        self.worker_cores, self.worker_memory = worker_cores, worker_memory
        self.workers = len(self.file.hosts) if self.owns_workers else 0
        self.remotes = {h.name: Remote(self.file, h) for h in self.file.hosts}
        self.procs = {name: HostProcs(remote) for name, remote in self.remotes.items()}
        self.rules = {name: HostRules(remote) for name, remote in self.remotes.items()}
        self.homes: dict[str, str] = {}  # each host's PySpark (its bin/spark-class)
        self.python = ""  # the venv's Python, at the same path on every host
        self.pids: dict[str, int] = {}  # "master", "worker-I" -> pid on its host
        self.driver_conf = dict(DRIVER_TIMEOUTS)
        self.host = "127.0.0.1"
        # chaos.clusters.ssh.database.HostDatabase, when a trial's pipeline needs the file's database host
        self.database = None
        self.broker = None  # chaos.clusters.ssh.kafka.HostKafka, when a trial's pipeline reads Kafka on the file's host
        self.throttles: dict[str, int] = {}  # host name -> pid of its throttle (a slowed host)
        require_shared(self.file, self.workdir)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        from chaos.machine.spark_versions import current_version

        self.host = control_address(self.file.master_host or self.file.hosts[0])
        for remote in self.remotes.values():
            reap(remote)  # what a killed harness of this machine left: processes and iptables rules
        facts = check_hosts(self.file, self.remotes, current_version())
        self.homes = {f.host.name: f.spark_home for f in facts}
        files = wheels(echo=lambda text: None)
        if hooks_unavailable() is None:  # the JVM hooks of the file sinks' phases, for the executors' class path
            files.append(hooks_jar())
            self.driver_conf["spark.executor.extraClassPath"] = host_jar(files, files[-1])
        with ThreadPoolExecutor(max_workers=min(8, len(self.remotes))) as pool:
            pythons = set(pool.map(lambda r: ship(r, self.file.python, files), self.remotes.values()))
        self.python = pythons.pop()
        link_python(self.python)
        self.driver_conf["spark.pyspark.python"] = self.python  # the executors' Python workers: the venv's
        (self.workdir / "cluster").mkdir(parents=True, exist_ok=True)
        if self.file.existing:
            return
        self.start_master()
        for i in range(self.workers):
            self.start_worker(i)
        for i in range(self.workers):
            self.wait_worker(i)

    def start_master(self) -> None:
        master = self.file.master_host
        log = self._log("master")
        log.write_text("")
        self.pids["master"] = self.procs[master.name].start(
            [self._spark_class(master), MASTER_CLASS, "--host", master.address, "--port", str(MASTER_PORT),
             "--webui-port", "0"], log=str(log), env=self._env(master))
        if not wait_until(lambda: "ALIVE" in read_log(log), 90, 0.3):
            raise HarnessError(f"the Spark master on host {master} did not start; see {log}: {log_tail(log)}")
        self.master_url = f"spark://{master.address}:{MASTER_PORT}"

    def _spark_class(self, host: Host) -> str:
        return f"{self.homes[host.name]}/bin/spark-class"

    def _env(self, host: Host) -> dict[str, str]:
        # JAVA_TOOL_OPTIONS reaches every JVM started from here, executors too: no hsperfdata file in the host's
        # /tmp, which a SIGKILLed JVM would leave behind.
        return {"SPARK_LOCAL_IP": host.address, "PYSPARK_PYTHON": self.python,
                "SPARK_MASTER_OPTS": WORKER_TIMEOUT_OPTS, "SPARK_LOG_DIR": str(self.workdir / "cluster"),
                "JAVA_TOOL_OPTIONS": "-XX:-UsePerfData"}

    def _log(self, name: str) -> Path:
        return self.workdir / "cluster" / f"{name}.log"

    def start_worker(self, i: int) -> None:
        host = self.file.hosts[i]
        log, work = self._log(f"worker-{i}"), self.workdir / "cluster" / f"worker-{i}"
        log.write_text("")
        work.mkdir(parents=True, exist_ok=True)
        env = {**self._env(host), "SPARK_WORKER_OPTS": WORKER_DECOMMISSION_OPTS,
               "SPARK_LOCAL_DIRS": str(work / "local")}
        self.pids[f"worker-{i}"] = self.procs[host.name].start(
            [self._spark_class(host), WORKER_CLASS, self.master_url, "--host", host.address, "--cores",
             str(self.worker_cores), "--memory", self.worker_memory, "--work-dir", str(work), "--webui-port", "0"],
            log=str(log), env=env)

    def wait_worker(self, i: int, timeout: float = 90) -> None:
        log = self._log(f"worker-{i}")
        if not wait_until(lambda: "Successfully registered with master" in read_log(log), timeout, 0.3):
            raise HarnessError(f"the Spark worker on host {self.file.hosts[i]} did not register; see {log}: "
                               f"{log_tail(log)}")

    def _alive(self) -> set[str]:
        """Which of the harness's daemons ("master", "worker-I") still run: one listing per host."""
        where = {"master": self.file.master_host, **{f"worker-{i}": h for i, h in enumerate(self.file.hosts)}}
        running = {h.name: {p.pid for p in self.procs[h.name].tagged()} for h in self.file.hosts}
        return {name for name, host in where.items() if self.pids.get(name) in running[host.name]}

    def healthy(self) -> bool:
        return self.file.existing or len(self._alive()) == 1 + len(self.file.hosts)

    def heal(self) -> None:
        """Between trials: whatever died comes back (the whole cluster if the master did)."""
        if self.file.existing:
            return
        alive = self._alive()
        if "master" not in alive:
            self.stop()
            self.start()
            return
        for i in range(len(self.file.hosts)):
            if f"worker-{i}" not in alive:
                self.start_worker(i)
                self.wait_worker(i)

    def stop(self) -> None:
        for name in self.remotes:
            try:
                self.rules[name].remove_mine()
                self.procs[name].kill_all()
            except UserError:
                pass  # a host that went away keeps nothing of ours running that the next start will not reap
            self.remotes[name].close()
        self.pids.clear()

    def describe(self) -> dict:
        return {"kind": self.kind, "master": self.master_url, "file": str(self.file.path),
                "hosts": [str(h) for h in self.file.hosts], "existing": self.file.existing}

    # -- faults ------------------------------------------------------------------------------------
    def kill_node(self, i: int) -> None:
        """SIGKILL every Spark process of the harness on host ``i`` (its worker, executors, Python workers, and
        the master if it lives there): the host's share of the cluster dies at once, as in a crash."""
        self.procs[self.file.hosts[i].name].kill_all()

    def restart_worker(self, i: int) -> None:
        """A killed host comes back: its master first, if it was the master's host, its database or broker, then
        its worker."""
        host = self.file.hosts[i]
        if self.file.master_host == host and "master" not in self._alive():
            self.start_master()
        for service in (self.database, self.broker):  # the database's or the broker's host: it comes back too
            if service is not None and service.host == host and not service.ready():
                service.restart()
        self.start_worker(i)
        self.wait_worker(i)

    def limit_cpu(self, i: int, cpus: float | None) -> None:
        """Slow host ``i``: its processes of the harness run ``cpus`` of the time (a tenth: stopped 90 ms of each
        100), or run freely again (None). A share of time, not of a CPU: hosts give the harness no cgroup."""
        name = self.file.hosts[i].name
        if cpus:
            self.throttles[name] = self.procs[name].throttle(self.file.python, cpus)
        elif name in self.throttles:
            self.procs[name].unthrottle(self.throttles.pop(name))

    def pause_node(self, i: int) -> None:
        """SIGSTOP every process of the harness on host ``i``: frozen, its connections silent."""
        procs = self.procs[self.file.hosts[i].name]
        procs.signal([p.pid for p in procs.tagged()], "STOP")

    def unpause_node(self, i: int) -> None:
        procs = self.procs[self.file.hosts[i].name]
        procs.signal([p.pid for p in procs.tagged()], "CONT")

    def executors(self, app_id: str | None) -> list[Executor]:
        """This application's executors on every host (a user's cluster runs other applications' too)."""
        found = []
        for host in self.file.hosts:
            ran = self.remotes[host.name].run(["ps", "-eo", "pid=,args="], timeout=30)
            for line in ran.out.splitlines():
                pid, _, args = line.strip().partition(" ")
                words = args.split()
                if "CoarseGrainedExecutorBackend" not in args or not pid.isdigit():
                    continue
                flags = dict(zip(words, words[1:], strict=False))
                if app_id is None or flags.get("--app-id") == app_id:
                    found.append(Executor(flags.get("--executor-id", "?"), int(pid),
                                                flags.get("--app-id", ""), host.name))
        return sorted(found, key=lambda e: (e.executor_id, e.host))

    def reporting_executor(self, live: list[Executor], detail: dict) -> Executor | None:
        """The executor whose task reported a phase: on the host at the reporter's address, the executor that is
        the reporting process or its ancestor (pids are per host)."""
        peer, pid = detail.get("peer"), detail.get("pid")
        host = next((h for h in self.file.hosts if h.address == peer), None)
        mine = [ex for ex in live if host is not None and ex.host == host.name]
        if len(mine) <= 1 or pid is None:
            return mine[0] if mine else None
        chain = self.remotes[host.name].run(["sh", "-c", f"p={int(pid)}; while [ \"$p\" -gt 1 ]; do echo $p; "
                                                         "p=$(awk '/^PPid/{print $2}' /proc/$p/status); done; true"])
        ancestors = {int(w) for w in chain.out.split() if w.isdigit()}
        return next((ex for ex in mine if ex.pid in ancestors), mine[0])

    def signal_executor(self, ex: Executor, sig: str) -> None:
        """``sig`` to an executor's JVM and its Python workers (its children, then itself)."""
        self.remotes[ex.host].run(["sh", "-c", f"pkill -{sig} -P {ex.pid}; kill -{sig} {ex.pid} 2>/dev/null; true"])

    def kill_executor(self, ex: Executor) -> None:
        self.signal_executor(ex, "KILL")

    def pause_executor(self, ex: Executor) -> Heal:
        self.signal_executor(ex, "STOP")
        return lambda: self.signal_executor(ex, "CONT")

    def decommission_executor(self, ex: Executor) -> None:
        """The executor JVM only: its Python workers finish their tasks."""
        self.remotes[ex.host].run(["kill", "-PWR", str(ex.pid)])

    def worker_index(self, fault, detail: dict, app_id: str | None) -> int:
        """A host of the file (its worker): by index, else the host that ran the reporting task, else one running
        this application's executor."""
        if fault.index is not None:
            if fault.index >= len(self.file.hosts):
                raise LookupError(f"no host at index {fault.index}")
            return fault.index
        names = [h.name for h in self.file.hosts]
        for k, host in enumerate(self.file.hosts):
            if detail.get("peer") == host.address:
                return k
        live = self.executors(app_id)
        return names.index(live[0].host) if live else 0

    def kill_worker(self, i: int) -> int | None:
        """SIGKILL host ``i``'s worker and every process under it (its executors and their Python workers), as
        the standalone cluster's ``kill-worker`` does; the rest of the host lives."""
        return self._signal_worker(i, "KILL", tree=True, forget=True)

    def pause_worker(self, i: int) -> tuple[int | None, Heal]:
        """SIGSTOP host ``i``'s worker and every process under it, as the standalone cluster's ``pause-worker``
        does: its executors freeze with it; the rest of the host runs on. Its pid and the heal (SIGCONT)."""
        pid = self._signal_worker(i, "STOP", tree=True)
        return pid, lambda: self._signal_worker(i, "CONT", tree=True)

    def replace_drained_worker(self, i: int, app_id: str | None) -> None:
        """This application's executors on the host gone, then a new worker there."""
        host = self.file.hosts[i].name
        wait_until(lambda: not any(ex.host == host for ex in self.executors(app_id)), DRAIN_TIMEOUT_S, 0.5)
        self.kill_worker(i)
        self.restart_worker(i)

    def partition(self, fault, detail: dict, database, app_id: str | None) -> tuple[int | str, Heal]:
        """iptables rules on the host over SSH: the sink database's port on its host, the Kafka broker's listeners
        on its host (``database`` is the broker then), or a host's traffic."""
        mode, peer = fault.peer or (None, None)
        if fault.target == "sink-db":
            if self.database is None or database is not self.database:
                raise LookupError("no sink database host (a pg-* pipeline and database = HOST in the hosts' file)")
            return "sink", self.block_port(self.file.hosts.index(database.host), database.port, peer)
        if fault.target == "broker":
            from chaos.clusters.ssh.kafka import HostKafka

            if not isinstance(database, HostKafka):
                raise LookupError("no Kafka host (a pipeline reading Kafka and kafka = HOST in the hosts' file)")
            rules = self.rules[database.host.name]
            made = [rule for port in database.listener_ports()
                    for rule in rules.drop_port(port, self.address_of(peer) if peer else None)]
            return "kafka", _deleting(rules, made)
        node = self.worker_index(fault, detail, app_id)
        return node, self.block(node, peer, both=mode != "from")

    def decommission_worker(self, i: int) -> None:
        """SIGPWR over SSH to host ``i``'s worker (started with ``spark.decommission.enabled``): it decommissions
        its executors and takes no new one."""
        self._signal_worker(i, "PWR")

    def _signal_worker(self, i: int, signal: str, tree: bool = False, forget: bool = False) -> int | None:
        """``signal`` over SSH to host ``i``'s worker (``tree``: and every process under it); its pid, if it runs.
        ``forget``: the harness no longer counts it as running (a kill)."""
        pid = self.pids.pop(f"worker-{i}", None) if forget else self.pids.get(f"worker-{i}")
        if pid is not None:
            argv = ["sh", "-c", SIGNAL_TREE.format(signal=signal, pid=int(pid))] if tree else \
                ["kill", f"-{signal}", str(int(pid))]
            self.remotes[self.file.hosts[i].name].run(argv)
        return pid

    def block_port(self, index: int, port: int, peer: str | None):
        """Drop what reaches TCP ``port`` on host ``index`` (the sink database) and what it answers: from
        ``peer`` only, or from everyone but this machine's SSH. The heal."""
        rules = self.rules[self.file.hosts[index].name]
        return _deleting(rules, rules.drop_port(port, self.address_of(peer) if peer else None))

    def address_of(self, peer: str) -> str:
        """``master``, ``driver`` (this machine) or ``node=M`` -> an address the hosts see."""
        if peer == "driver":
            return self.host
        if peer == "master":
            if self.file.existing:
                return self.file.master[len("spark://"):].rsplit(":", 1)[0]
            return self.file.master_host.address
        if peer.startswith("node="):
            return self.file.hosts[int(peer[5:])].address
        raise LookupError(f"no peer {peer!r} on a cluster of hosts (driver, master or node=M)")

    def block(self, index: int, peer: str | None, both: bool):
        """Drop what ``peer`` sends host ``index`` (and, ``both``, what the host sends it); with no peer, every
        packet between the host and the others and this machine, both ways, but this machine's SSH. The heal."""
        host = self.file.hosts[index]
        rules = self.rules[host.name]
        if peer is None:
            peers = {self.host, *(h.address for h in self.file.hosts if h != host)}
            if self.file.existing:
                peers.add(self.address_of("master"))
            peers.discard(host.address)
            made = []
            for address in sorted(peers):
                made += [rules.drop_from(address), rules.drop_to(address)]
            made += rules.keep_ssh(self.host)
        else:
            source = self.address_of(peer)
            made = [rules.drop_from(source)]
            if both:
                made.append(rules.drop_to(source))
        return _deleting(rules, made)


def _deleting(rules: HostRules, made: list[list[str]]):
    """The heal of a partition: delete exactly the rules it made."""

    def heal() -> None:
        for rule in made:
            rules.delete(rule)

    return heal


def require_shared(file: HostCluster, path: Path) -> None:
    """The harness's directories must be on the shared storage: the hosts write there, the harness reads."""
    shared = Path(file.shared).resolve()
    if path != shared and shared not in path.parents:
        raise UserError(f"{path} is not on the shared storage {file.shared} of {file.path}: run from a directory "
                        f"under it (--keep or --out {file.shared}/...)")
