"""A Spark standalone cluster whose master and workers are Docker containers ("nodes") on a network of the
harness's own.

Each node is a container of the node image (chaos/clusters/docker/image.py) on an internal bridge network the harness
creates for itself: the containers reach each other and the host's end of the bridge (its gateway
address, where the driver and the harness's servers listen), nothing else — an internal network has no
route out. The network and every container carry the owner labels of ``chaos.clusters.docker.containers`` and are
removed at ``stop``, or reaped at the next start if the harness was killed.

What runs in a node comes from the host, mounted read-only at the same paths: this Python (with PySpark,
its jars and every installed package), the directories on ``sys.path`` outside it (the harness's and the
pipelines' code); the cluster's work directory is mounted read-write at its own path (worker directories,
logs, the trial's checkpoint and sink when they live under it). So an executor and its Python workers in a
node run the driver's code, and whole-node faults act on real processes: ``docker kill`` takes a worker with
its executors and their local files, ``docker pause`` freezes them all (cgroup freezer), ``docker network
disconnect`` cuts every packet between a node and the rest.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil

from chaos.clusters.base import Heal, OwnWorkers, brokers_count_refusal
from chaos.clusters.docker.containers import address, client, labels, reap_containers, remove
from chaos.clusters.docker.image import find, has
from chaos.clusters.postgres import PASSFILE_VAR
from chaos.errors import HarnessError, UserError
from chaos.machine.jvm import cache_dir
from chaos.machine.own_packages import packages_folder
from chaos.machine.processes import OWNER_VAR, Owned, wait_until
from chaos.machine.spark import (
    DRIVER_TIMEOUTS,
    MASTER_CLASS,
    MASTER_PORT,
    WORKER_CLASS,
    WORKER_DECOMMISSION_OPTS,
    WORKER_TIMEOUT_S,
    log_tail,
    read_log,
    spark_env,
    spark_home,
)

# oom-node: the node's limit is its usage plus this; the hog wants this much more than the margin.
OOM_MARGIN = 32 << 20
OOM_HOG_EXTRA = 96 << 20
EXECUTOR_CLASS = "CoarseGrainedExecutorBackend"
OOM_HOG = ("import sys, time; held = []\n"  # touches every page it takes, 8 MiB at a time, then exits
           "for _ in range(int(sys.argv[1]) >> 23):\n"
           "    held.append(bytearray(b'x') * (8 << 20)); time.sleep(0.01)\n")


def module_roots() -> list[str]:
    """Where this process's imported packages live, when outside ``sys.path`` (an editable install's finder
    maps ``chaos`` to its source tree without putting it on the path): a node's Python must import them too."""
    roots = set()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if "." in name or not path:
            continue
        file = Path(path).resolve()
        roots.add(str(file.parent.parent if file.name == "__init__.py" else file.parent))
    return sorted(roots)


def host_mounts(*workdirs: Path, shared: tuple[Path, ...] = ()) -> dict[str, dict[str, str]]:
    """The host paths a node needs, each mounted at itself: this Python's prefixes, every directory on
    ``sys.path`` outside them and ``shared`` (read-only), and ``workdirs`` (read-write; one inside another is
    mounted with it)."""
    read_only: list[Path] = []
    for entry in [sys.prefix, sys.base_prefix, *sys.path, *module_roots(), *shared]:
        path = Path(entry or ".").resolve()
        if not path.is_dir() or path == Path("/") or any(path == p or p in path.parents for p in read_only):
            continue
        read_only = [p for p in read_only if path not in p.parents] + [path]
    writable: list[Path] = []
    for path in sorted(Path(w).resolve() for w in workdirs):
        if not any(path == p or p in path.parents for p in writable):
            writable.append(path)
    # A read-write work directory inside a read-only one is mounted over it (Docker mounts parents first).
    mounts = {str(p): {"bind": str(p), "mode": "ro"} for p in read_only if p not in writable}
    mounts.update({str(p): {"bind": str(p), "mode": "rw"} for p in writable})
    return mounts


def _iptables(pid: str, op: str, rule: list[str]) -> None:
    """One iptables change in the network namespace of process ``pid`` (a node's init)."""
    nsenter, iptables = shutil.which("nsenter"), shutil.which("iptables")
    if not nsenter or not iptables:
        raise UserError("a one-peer partition (from=/with=) needs nsenter and iptables on this machine "
                        "(Debian: apt-get install util-linux iptables)")
    done = subprocess.run([nsenter, "-t", pid, "-n", iptables, "-w", op, *rule], capture_output=True, text=True)
    if done.returncode != 0:
        raise HarnessError(f"iptables {op} {' '.join(rule)} in the node's namespace failed: "
                           f"{(done.stderr or done.stdout).strip()[-300:]}")


class DockerCluster(OwnWorkers):
    """Master and ``workers`` workers, each a container on the harness's own network."""

    kind = "docker"
    local_jvms = False  # the nodes run their own JVMs

    @classmethod
    def create(cls, spec: str, owned: Owned, workdir: Path, workers: int, worker_cores: int, java_options: str,
               data_dir: Path) -> DockerCluster:
        return cls(owned, workdir, workers=workers, worker_cores=worker_cores, worker_memory=f"{worker_cores}g",
                   java_options=java_options, data_dir=data_dir, image=spec.partition(":")[2] or None)

    @classmethod
    def refusal(cls, fault, spec: str) -> str | None:
        if fault.target == "node" or fault.action in ("partition", "decommission-worker"):  # a node's worker: SIGPWR
            return None
        return super().refusal(fault, spec)

    @classmethod
    def brokers_refusal(cls, brokers: int) -> str | None:
        return brokers_count_refusal(brokers)  # each broker a node of its own

    @classmethod
    def reap(cls) -> int:
        """Containers and networks whose owner is gone (their labels say whose)."""
        return reap_containers()

    def __init__(self, owned: Owned, workdir: Path, workers: int = 2, worker_cores: int = 1,
                 worker_memory: str = "1g", java_options: str = "", image: str | None = None,
                 data_dir: Path | None = None) -> None:
        super().__init__("")
        self.owned = owned
        self.workdir = Path(workdir).resolve()
        self.workers = workers
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.java_options = java_options
        self.image = image
        self.docker = None
        self.network = None
        self.gateway = ""  # the host's address on the network: where drivers and the harness's servers listen
        self.master = None
        self.nodes: list = [None] * workers
        self.addresses: dict[str, str] = {}  # a disconnected container's address, given back at its reconnection
        self.data_dir = Path(data_dir).resolve() if data_dir else self.workdir
        self.driver_conf = dict(DRIVER_TIMEOUTS)
        self.prefix = f"streamchaos-{os.getpid()}-{owned.tag.rsplit('#', 1)[-1]}"
        self.tmp = self.workdir / "tmp"
        # The pipelines' JVM hooks (chaos.machine.jvm.hooks_jar: a file sink's commit protocol) are built into this
        # cache, maybe after the nodes start: executors load them from their class path at the same path.
        self.jars = cache_dir()

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        self.docker = client()
        if self.image is None:
            self.image = find(self.docker)
            if self.image is None:
                raise UserError("the node image is not built: run `streamchaos image build` once (a few minutes, "
                                "offline from Debian's packages)")
        elif not has(self.docker, self.image):
            raise UserError(f"no image {self.image} in this machine's dockerd: `docker pull` or `docker load` it, "
                            "or leave out --image to use the one `streamchaos image build` makes")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir(exist_ok=True)
        self.jars.mkdir(parents=True, exist_ok=True)
        self.network = self._network()
        self.master = self._run("master", "node-master", [MASTER_CLASS, "--port", str(MASTER_PORT)])
        log = self._log("master")
        if not wait_until(lambda: "ALIVE" in read_log(log) or not self._running(self.master), 90, 0.2):
            raise HarnessError(f"Spark master node did not start; see {log}: {log_tail(log)}")
        self.master_url = f"spark://{self.address(self.master)}:{MASTER_PORT}"
        for i in range(self.workers):
            self.start_worker(i)
        for i in range(self.workers):
            self.wait_worker(i)

    def _network(self):
        """The internal bridge network, on a subnet Docker found free, fixed in its configuration: a node
        reconnected after a partition gets its address back (its worker is bound to it)."""
        from docker.types import IPAMConfig, IPAMPool

        probe = self.docker.networks.create(self.prefix, driver="bridge", internal=True,
                                            labels=labels("network", self.owned.tag))
        probe.reload()
        config = probe.attrs["IPAM"]["Config"][0]
        probe.remove()
        subnet = config["Subnet"]
        self.gateway = config.get("Gateway") or str(next(ipaddress.ip_network(subnet).hosts()))
        ipam = IPAMConfig(pool_configs=[IPAMPool(subnet=subnet, gateway=self.gateway)])
        return self.docker.networks.create(self.prefix, driver="bridge", internal=True, ipam=ipam,
                                           labels=labels("network", self.owned.tag))

    def _log(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    def _run(self, name: str, kind: str, spark_args: list[str]):
        """Start one node: ``spark-class`` with ``spark_args``, bound to the node's address on the network."""
        log = self._log(name)
        log.write_text("")
        env = spark_env(f"{self.java_options} -Dspark.worker.timeout={WORKER_TIMEOUT_S}", self.tmp)
        env = {k: v for k, v in env.items() if k.startswith(("SPARK_", "PYSPARK_", "MALLOC_", "PYTHON"))}
        env.update({OWNER_VAR: self.owned.tag, "SPARK_LOCAL_HOSTNAME": name, "HOME": str(self.workdir),
                    "SPARK_WORKER_OPTS": WORKER_DECOMMISSION_OPTS})
        passfile = os.environ.get(PASSFILE_VAR)  # the database's password, for executor-side sinks
        mounts = host_mounts(self.data_dir, self.workdir, shared=(self.jars, packages_folder()))
        if passfile:
            env[PASSFILE_VAR] = passfile
            mounts[str(Path(passfile).parent)] = {"bind": str(Path(passfile).parent), "mode": "ro"}
        env.pop("SPARK_LOCAL_IP", None)  # the node's own address, found at its start
        spark_class = os.path.join(spark_home(), "bin", "spark-class")
        script = ('ip=$(hostname -i | cut -d" " -f1); export SPARK_LOCAL_IP=$ip; '
                  f'exec "$0" "$@" --host $ip >>{log} 2>&1')
        return self.docker.containers.run(
            self.image, ["/bin/sh", "-c", script, spark_class, *spark_args], name=f"{self.prefix}-{name}",
            hostname=name, network=self.network.name, labels=labels(kind, self.owned.tag), environment=env,
            volumes=mounts, working_dir=str(self.workdir),
            detach=True, init=True)

    @property
    def host(self) -> str:
        return self.gateway

    def address(self, container) -> str:
        container.reload()
        return container.attrs["NetworkSettings"]["Networks"][self.network.name]["IPAddress"]

    def _running(self, container) -> bool:
        try:
            container.reload()
        except Exception:  # docker.errors.NotFound: removed
            return False
        return container.status == "running"

    def start_worker(self, i: int) -> None:
        work = self.workdir / f"worker-{i}"
        work.mkdir(exist_ok=True)
        self.nodes[i] = self._run(f"worker-{i}", "node-worker",
                                  [WORKER_CLASS, self.master_url, "--cores", str(self.worker_cores),
                                   "--memory", self.worker_memory, "--work-dir", str(work)])

    def wait_worker(self, i: int, timeout: float = 90) -> None:
        log, node = self._log(f"worker-{i}"), self.nodes[i]
        ok = wait_until(lambda: "Successfully registered with master" in read_log(log) or not self._running(node),
                        timeout, 0.2)
        if not ok or not self._running(node):
            raise HarnessError(f"Spark worker node {i} did not register; see {log}: {log_tail(log)}")

    def worker_index_of(self, pid: int) -> int | None:
        """Which worker node runs the process ``pid`` (an executor or its Python worker): the container id is in
        the process's cgroup path."""
        return next((i for i, node in enumerate(self.nodes) if node is not None and _in_node(pid, node)), None)

    def healthy(self) -> bool:
        return self.master is not None and self._running(self.master) and all(
            n is not None and self._running(n) for n in self.nodes)

    def heal(self) -> None:
        """Between trials: a stopped or frozen node runs again (restarted, or unpaused), its network reattached."""
        for i, node in enumerate(self.nodes):
            if node is None:
                continue
            node.reload()
            if node.status == "paused":
                node.unpause()
            if not self.attached(node):
                self.reconnect(node)
            if node.status not in ("running", "paused"):
                self.restart_worker(i)

    def lost(self) -> str | None:
        """dockerd killed or stopped mid-trial: the nodes may even run on (their shims outlive it), but no node
        fault fires, no partition heals and nothing is removed. Its containers and network carry this harness's
        owner label, so the next start after dockerd is back removes them
        (chaos.clusters.docker.containers.reap_containers)."""
        try:
            self.docker.ping()
        except Exception as exc:  # requests' ConnectionError, docker.errors.APIError
            return (f"the Docker daemon at {address()} stopped answering during the trial ({type(exc).__name__}): "
                    "its verdict would say nothing; start dockerd again, and the next streamchaos start removes "
                    "the containers and network this run left")
        return None

    # -- node faults ----------------------------------------------------------------------------
    def kill_node(self, i: int) -> None:
        """``docker kill``: the worker, its executors and their Python workers die at once, with the node."""
        self.nodes[i].kill()

    def restart_worker(self, i: int) -> None:
        """Start worker node ``i`` afresh (its container is replaced: a machine that comes back empty)."""
        old = self.nodes[i]
        if old is not None:
            old.remove(force=True)
        self.start_worker(i)
        self.wait_worker(i)

    def decommission_worker(self, i: int) -> None:
        """SIGPWR to the node's worker (the container's process under its init, which passes it on)."""
        self.nodes[i].kill(signal="SIGPWR")

    def pause_node(self, i: int) -> None:
        self.nodes[i].pause()

    def unpause_node(self, i: int) -> None:
        self.nodes[i].unpause()

    def limit_cpu(self, i: int, cpus: float | None) -> None:
        """Hold node ``i``'s processes together to ``cpus`` CPUs (a CFS quota), or lift the limit (None)."""
        period = 100_000
        self.nodes[i].update(cpu_period=period, cpu_quota=int(cpus * period) if cpus else -1)

    def squeeze_memory(self, i: int) -> dict:
        """Leave node ``i`` ``OOM_MARGIN`` above what it uses (a memory limit, no swap) and run a hog in it that
        wants more, then exits: the kernel's OOM killer kills the process it rates worst. The node's executors
        are made its first choice (oom_score_adj +1000, set from the host; lowering the worker's would need
        CAP_SYS_RESOURCE), so an executor dies and the worker lives; the hog's memory is free again at once."""
        node = self.nodes[i]
        executors = self._marked_for_oom(node)
        usage = int(Path(self._memory_cgroup(node), "memory.usage_in_bytes").read_text())
        limit = usage + OOM_MARGIN
        node.update(mem_limit=limit, memswap_limit=limit)
        done = node.exec_run([sys.executable, "-c", OOM_HOG, str(OOM_MARGIN + OOM_HOG_EXTRA)])
        # A killed executor stays a zombie until its worker reaps it: dead either way (up to 5 s to show).
        wait_until(lambda: any(_dead(pid) for pid in executors), 5, 0.1)
        killed = [pid for pid in executors if _dead(pid)]
        return {"limit_mib": limit >> 20, "usage_mib": usage >> 20, "executors": executors, "killed": killed,
                "hog_exit": done.exit_code}

    def release_memory(self, i: int) -> None:
        """Lift node ``i``'s memory limit (to all this machine has: a limit, once set, cannot be unset)."""
        memory = psutil.virtual_memory().total  # memory and memory+swap together, in the order runc needs
        self.nodes[i].update(mem_limit=memory, memswap_limit=memory)

    def _marked_for_oom(self, node) -> list[int]:
        """The node's executor JVMs, each given oom_score_adj 1000: the OOM killer's first choice."""
        marked = []
        for proc in self._node_processes(node):
            try:
                if EXECUTOR_CLASS in " ".join(proc.cmdline()):
                    Path(f"/proc/{proc.pid}/oom_score_adj").write_text("1000")
                    marked.append(proc.pid)
            except (OSError, psutil.Error):  # gone since it was listed
                continue
        return marked

    def _memory_cgroup(self, node) -> Path:
        node.reload()
        for line in Path(f"/proc/{node.attrs['State']['Pid']}/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "memory" in controllers.split(","):
                return Path("/sys/fs/cgroup/memory") / path.lstrip("/")
        raise HarnessError("no memory cgroup for the node (cgroup v1 expected)")

    def _node_processes(self, node) -> list:
        return [proc for proc in psutil.process_iter() if _in_node(proc.pid, node)]

    def disconnect(self, container) -> None:
        """Cut a container of this cluster (a worker node, the sink database) off the network: no packet to or
        from the master, the other nodes or the host. Its address is noted for the reconnection."""
        self.addresses[container.id] = self.address(container)
        self.network.disconnect(container, force=True)

    def reconnect(self, container) -> None:
        """Attach a container again at the address it had (its servers are bound to it)."""
        self.network.connect(container, ipv4_address=self.addresses.get(container.id))

    def peer_address(self, peer: str, database=None) -> str:
        """The address ``peer`` of a one-peer partition sends from: ``driver`` is the host's end of the network
        (the drivers, and the event log, controller and proxies that listen beside them), ``master``, ``node=M``,
        ``sink`` (``database``, the database node's container)."""
        if peer == "driver":
            return self.gateway
        if peer == "master":
            return self.address(self.master)
        if peer == "sink":
            if database is None:
                raise LookupError("no sink database node (a pg-* pipeline on --cluster docker)")
            return self.address(database)
        index = int(peer.split("=", 1)[1])
        if index >= self.workers:
            raise LookupError(f"no worker node {index}")
        return self.address(self.nodes[index])

    def block(self, container, source: str, both: bool):
        """Drop the packets ``source`` sends ``container`` (and, ``both``, those it sends ``source``) with iptables
        rules in the container's own network namespace, entered from the host (the node needs no privilege).
        Returns the heal: the rules deleted (nothing to do if the node was replaced meanwhile)."""
        container.reload()
        pid = str(container.attrs["State"]["Pid"])
        rules = [["INPUT", "-s", source, "-j", "DROP"]] + ([["OUTPUT", "-d", source, "-j", "DROP"]] if both else [])
        for rule in rules:
            _iptables(pid, "-I", rule)

        def heal() -> None:
            for rule in rules:
                try:
                    _iptables(pid, "-D", rule)
                except HarnessError:  # the node died (or was replaced) with its namespace and rules
                    pass

        return heal

    def partition(self, fault, detail: dict, service, app_id: str | None) -> tuple[int | str, Heal]:
        """``docker network disconnect`` of the node (a worker's, the sink database's, ``chaos.clusters.docker.
        database``, or the Kafka broker's, ``chaos.clusters.docker.kafka``): no packet to or from anyone; with a
        peer, iptables rules in the node's namespace instead."""
        container = getattr(service, "container", None)
        if fault.target in ("sink-db", "broker"):  # the proxies, the drivers and the executors lose it
            if container is None:
                raise LookupError("no sink database node (a pg-* pipeline on --cluster docker)"
                                  if fault.target == "sink-db" else "no Kafka broker node")
            node = "sink" if fault.target == "sink-db" else service.name  # kafka, or kafka-N of several
        else:
            node = self.worker_index(fault, detail, app_id)
            container = self.nodes[node]
        if fault.peer is None:
            self.disconnect(container)
            return node, lambda: self.reconnect(container)
        # Between the node and one peer only (iptables in the node's namespace): the rest of the network stays.
        mode, peer = fault.peer
        database = container if fault.target == "sink-db" else None if fault.target == "broker" else \
            getattr(service, "container", None)
        return node, self.block(container, self.peer_address(peer, database), both=mode == "with")

    def sink_database(self, owned: Owned, workdir: Path):
        """A node of its own, which a partition can cut off."""
        from chaos.clusters.docker.database import PostgresNode

        return PostgresNode(self, workdir).start()

    def kafka_broker(self, owned: Owned, workdir: Path, brokers: int = 1):
        """A node of its own (``brokers`` nodes: a cluster of brokers), which node faults and partitions reach."""
        from chaos.clusters.docker.kafka import KafkaNode, KafkaNodes

        return KafkaNode(self, owned, workdir) if brokers == 1 else KafkaNodes(self, owned, workdir, brokers)

    def attached(self, container) -> bool:
        container.reload()
        return self.network.name in container.attrs["NetworkSettings"]["Networks"]

    def stop(self) -> None:
        if self.docker is None:
            return
        for node in [*self.nodes, self.master]:
            remove(node)
        self.nodes, self.master = [None] * self.workers, None
        if self.network is not None:
            try:
                self.network.remove()
            except Exception:  # docker.errors.NotFound
                pass
            self.network = None
        self.docker.close()
        self.docker = None
        shutil.rmtree(self.tmp, ignore_errors=True)

    def describe(self) -> dict:
        return {"kind": self.kind, "master": self.master_url, "workers": self.workers, "image": self.image,
                "network": self.prefix, "worker_cores": self.worker_cores, "worker_memory": self.worker_memory}


def _dead(pid: int) -> bool:
    """Gone, or a zombie its parent has not reaped yet (``psutil.pid_exists`` is true for those)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _in_node(pid: int, node) -> bool:
    """Whether the process ``pid`` runs in the container ``node``: its id is in the process's cgroup paths."""
    try:
        return node.id in Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:  # gone, or not ours to read
        return False
