"""The Spark cluster a trial runs on (Jepsen's "db").

Three shapes, named by ``--cluster``:
* ``standalone`` (default): a master and N workers started from the pyspark wheel alone
  (``spark-class ...deploy.master.Master`` / ``...deploy.worker.Worker``), each a separate process
  group owned by the harness, bound to 127.0.0.1. Workers can be killed and restarted.
* ``local-cluster[W,C,M]``: Spark's test cluster; executors are real JVMs under the driver.
* ``spark://host:port``: a cluster the user runs; we only find our app's executors on it.

Executors are found in the process table (``CoarseGrainedExecutorBackend --executor-id N
--app-id APP``), which is how faults aim at them.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil

from chaos.errors import HarnessError, UserError
from chaos.ownpath import first_on_path, user_entries
from chaos.procs import Group, Owned, wait_until

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# A worker takes SIGPWR as "decommission yourself" only with this set (the decommission-worker fault).
WORKER_DECOMMISSION_OPTS = "-Dspark.decommission.enabled=true"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
MASTER_PORT = 7077  # a master of the harness's on a node or host of its own (Docker nodes, hosts over SSH)
# How soon Spark notices a node or host that is gone without closing its connections (frozen, or cut off the
# network): a killed one's sockets close at once, but a paused or disconnected one's just fall silent. Spark's
# defaults (120 s network timeout, 60 s worker timeout) outlast a trial; these fit in one.
DRIVER_TIMEOUTS = {"spark.network.timeout": "20s", "spark.network.timeoutInterval": "5s",
                   "spark.executor.heartbeatInterval": "2s"}
WORKER_TIMEOUT_S = 10  # the master drops a worker silent this long (spark.worker.timeout)

# JVM flags for every Spark process the harness starts (master, workers, drivers, executors). A trial's
# JVMs live for seconds to minutes and run small batches: the C2 compiler and G1's parallel threads
# spend the 2 cores on start-up, not on work. C1 only and the serial collector halve a driver's boot
# and first query here (local[2], beside a busy trial: 19-21 s -> 9-11 s); benchmarks/trial_speed.py
# measures them in the trial. ``Harness(quick_jvm=False)`` keeps the JVM's defaults.
# Memory (a trial's processes must fit 3 GiB RSS, benchmarks/throughput.py): the JVM's initial heap is
# 1/64 of the machine's memory (384 MiB here) and a young generation that size is filled before the first
# collection; a 16 MiB start, grown and shrunk on demand, keeps each JVM's heap near its live data. JDK 17u
# maps class archives at a random address and relocates them (``ArchiveRelocationMode=1``): every page of
# the ~170 MiB driver archive is then written, private to each JVM; mapped where it was dumped, the
# read-only half stays shared page cache, touched only where used (and the relocation's CPU is saved).
APP_HEAP_START = "-Xms96m"  # drivers and executors (chaos.driver.quick_heap)
QUICK_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xms16m -XX:MinHeapFreeRatio=10 "
                     "-XX:MaxHeapFreeRatio=30 -XX:+UnlockDiagnosticVMOptions -XX:ArchiveRelocationMode=0")


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def scratch_option(tmp: Path | str | None) -> str:
    """The JVM flag that keeps a JVM's temporary files in ``tmp``: the native libraries lz4 and snappy
    extract, Spark's ``spark-*``, ``blockmgr-*`` and ``artifacts-*``. A SIGKILLed JVM deletes none of them:
    in /tmp they piled up by the thousand, trial after trial. ``tmp`` goes with its harness or cluster."""
    return f"-Djava.io.tmpdir={tmp}" if tmp else ""


DRIVER_SCRATCH_PREFIX = "driver-"


def driver_scratch(tmp: Path | str, pid: int) -> Path:
    """The driver process ``pid``'s own part of ``tmp``, for its JVM and its executors' JVMs. Every
    SIGKILLed driver JVM leaves its extracted lz4 library (147 KiB) and empty Spark directories behind;
    in a directory of its own they go as soon as the harness sees that driver gone
    (``sweep_driver_scratch``), not only when the harness closes."""
    return Path(tmp) / f"{DRIVER_SCRATCH_PREFIX}{pid}"


def sweep_driver_scratch(tmp: Path, live: set[int]) -> int:
    """Remove the scratch directories in ``tmp`` of drivers whose pid is not in ``live``; how many."""
    removed = 0
    for folder in tmp.glob(f"{DRIVER_SCRATCH_PREFIX}*"):
        pid = folder.name[len(DRIVER_SCRATCH_PREFIX):]
        if pid.isdigit() and int(pid) not in live:
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


def spark_env(java_options: str = "", tmp: Path | None = None) -> dict[str, str]:
    """Environment for every Spark process we start: loopback only, this Python for workers, and
    ``java_options`` for the master's and workers' JVMs (``SPARK_DAEMON_JAVA_OPTS``); ``tmp``: their
    temporary files and local directories (an executor's, and its Python workers', too) go there."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=spark_home(),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_HOSTNAME="localhost",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_NO_DAEMONIZE="1",
        # The master's and workers' heaps hold ~50 MiB; Spark's default is 1 GiB.
        SPARK_DAEMON_MEMORY="256m",
        # glibc gives each thread that allocates its own malloc arena, up to 8 per core; a Spark JVM has
        # 100-300 threads. Two arenas bound the native heap's growth.
        MALLOC_ARENA_MAX="2",
        # The harness's packages before anything of the user's (chaos/ownpath.py): executors and their Python
        # daemons, which import chaos.pydaemon, inherit it from the workers.
        PYTHONPATH=first_on_path(*user_entries()),
    )
    if tmp is not None:
        env.update(SPARK_LOCAL_DIRS=str(tmp), TMPDIR=str(tmp))
    daemon_options = " ".join(filter(None, [java_options, scratch_option(tmp)]))
    if daemon_options:
        env["SPARK_DAEMON_JAVA_OPTS"] = " ".join(filter(None, [env.get("SPARK_DAEMON_JAVA_OPTS", ""), daemon_options]))
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass(frozen=True)
class Executor:
    executor_id: str
    pid: int
    app_id: str


def executors(app_id: str | None = None) -> list[Executor]:
    """Live executor JVMs on this machine (of one app, if given), sorted by executor id."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = proc.info.get("cmdline") or []
        if EXECUTOR_CLASS not in cmd:
            continue
        args = dict(zip(cmd, cmd[1:], strict=False))
        exec_id, app = args.get("--executor-id"), args.get("--app-id")
        if exec_id is None or (app_id is not None and app != app_id):
            continue
        found.append(Executor(exec_id, proc.pid, app or ""))
    return sorted(found, key=lambda e: (len(e.executor_id), e.executor_id))


def executor_of(pid: int) -> Executor | None:
    """The executor JVM a process runs under (a Python worker's ancestor), if any."""
    try:
        proc = psutil.Process(pid)
        chain = [proc, *proc.parents()]
    except psutil.Error:
        return None
    for p in chain:
        try:
            cmd = p.cmdline()
        except psutil.Error:
            continue
        if EXECUTOR_CLASS in cmd:
            args = dict(zip(cmd, cmd[1:], strict=False))
            return Executor(args.get("--executor-id", "?"), p.pid, args.get("--app-id", ""))
    return None


class Cluster:
    """Base: a master URL for drivers; subclasses may own processes."""

    kind = "external"
    owns_workers = False
    host = "127.0.0.1"  # where the cluster reaches the host: drivers and the harness's servers listen there
    driver_conf: dict[str, str] = {}  # Spark settings its drivers need (DRIVER_TIMEOUTS on nodes and hosts)

    def __init__(self, master_url: str) -> None:
        self.master_url = master_url

    def start(self) -> None:
        pass

    def healthy(self) -> bool:
        return True

    def heal(self) -> None:
        pass

    def lost(self) -> str | None:
        """Why the daemon the cluster's nodes depend on no longer answers, or None: a trial that outlived it
        ran without the faults and heals it needed, so its verdict would say nothing."""
        return None

    def stop(self) -> None:
        pass

    def worker_groups(self) -> list[Group]:
        return []

    def describe(self) -> dict:
        return {"kind": self.kind, "master": self.master_url}


class LocalCluster(Cluster):
    kind = "local-cluster"


class StandaloneCluster(Cluster):
    """Master + N workers from the pyspark wheel, each in its own process group."""

    kind = "standalone"
    owns_workers = True

    def __init__(
        self,
        owned: Owned,
        workdir: Path,
        workers: int = 2,
        worker_cores: int = 1,
        worker_memory: str = "1g",
        master_port: int | None = None,
        java_options: str = "",
    ) -> None:
        if master_port is not None and port_in_use(master_port):
            raise UserError(f"port {master_port} on 127.0.0.1 is in use: pick another master port or free it")
        self.port = master_port or free_port()
        super().__init__(f"spark://127.0.0.1:{self.port}")
        self.owned = owned
        self.workdir = Path(workdir)
        self.workers = workers
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.java_options = java_options
        self.master: Group | None = None
        self.worker_list: list[Group | None] = [None] * workers
        self.tmp = self.workdir / "tmp"  # the master's, workers' and executors' temporary files

    def _env(self) -> dict[str, str]:
        return spark_env(self.java_options, self.tmp)

    def _spark_class(self) -> str:
        return os.path.join(spark_home(), "bin", "spark-class")

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.tmp, ignore_errors=True)  # what killed JVMs of an earlier start left
        self.tmp.mkdir()
        log = self.workdir / "master.log"
        # Fresh, as a worker's is: readiness is read from this start's lines. An earlier harness's "ALIVE" in
        # the same runs/ directory let the workers start before this master was leader; refused as a standby
        # master's, they registered again only on their retry, 10-15 s later.
        log.write_text("")
        self.master = self.owned.spawn(
            "master",
            [self._spark_class(), MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port),
             "--webui-port", str(free_port())],
            env=self._env(),
            log_path=log,
        )
        ok = wait_until(lambda: "ALIVE" in read_log(log) or not self.master.alive(), 90, 0.2)
        if not ok or not self.master.alive():
            raise HarnessError(f"Spark master did not start; see {log}: {log_tail(log)}")
        for i in range(self.workers):
            self.start_worker(i)
        for i in range(self.workers):
            self.wait_worker(i)

    def _worker_log(self, i: int) -> Path:
        return self.workdir / f"worker-{i}.log"

    def start_worker(self, i: int) -> None:
        log = self._worker_log(i)
        log.write_text("")  # a restart's log starts fresh, so readiness reads this start's lines
        work = self.workdir / f"worker-{i}"
        work.mkdir(exist_ok=True)
        env = self._env()
        env["SPARK_WORKER_DIR"] = str(work)
        env["SPARK_WORKER_OPTS"] = WORKER_DECOMMISSION_OPTS
        self.worker_list[i] = self.owned.spawn(
            f"worker-{i}",
            [self._spark_class(), WORKER_CLASS, self.master_url, "--host", "127.0.0.1",
             "--cores", str(self.worker_cores), "--memory", self.worker_memory,
             "--work-dir", str(work), "--webui-port", str(free_port())],
            env=env,
            log_path=log,
        )

    def wait_worker(self, i: int, timeout: float = 90) -> None:
        log, group = self._worker_log(i), self.worker_list[i]
        ok = wait_until(lambda: "Successfully registered with master" in read_log(log) or not group.alive(),
                        timeout, 0.2)
        if not ok or not group.alive():
            raise HarnessError(f"Spark worker {i} did not register; see {log}: {log_tail(log)}")

    def kill_worker(self, i: int) -> Group:
        group = self.worker_list[i]
        if group is not None:
            group.kill()
            self.owned.forget(group)
        return group

    def restart_worker(self, i: int) -> None:
        self.kill_worker(i)
        self.start_worker(i)
        self.wait_worker(i)

    def decommission_worker(self, i: int) -> None:
        """SIGPWR to worker ``i`` (started with ``spark.decommission.enabled``): it decommissions its executors."""
        self.worker_list[i].signal_leader(signal.SIGPWR)

    def worker_groups(self) -> list[Group]:
        return [g for g in self.worker_list if g is not None]

    def worker_index_of(self, pid: int) -> int | None:
        """Which worker launched the process ``pid`` (an executor or its Python worker)."""
        try:
            ancestors = {p.pid for p in psutil.Process(pid).parents()} | {pid}
        except psutil.Error:
            return None
        for i, group in enumerate(self.worker_list):
            if group is not None and group.pid in ancestors:
                return i
        return None

    def healthy(self) -> bool:
        return bool(self.master and self.master.alive()) and all(
            g is not None and g.alive() for g in self.worker_list
        )

    def heal(self) -> None:
        """Between trials: restart whatever died (a killed worker, or the whole cluster)."""
        if not (self.master and self.master.alive()):
            self.stop()
            self.start()
            return
        for i, group in enumerate(self.worker_list):
            if group is None or not group.alive():
                self.restart_worker(i)

    def stop(self) -> None:
        for group in [*self.worker_list, self.master]:
            if group is not None:
                group.kill()
                self.owned.forget(group)
        self.worker_list = [None] * self.workers
        self.master = None
        shutil.rmtree(self.tmp, ignore_errors=True)

    def describe(self) -> dict:
        return {"kind": self.kind, "master": self.master_url, "workers": self.workers,
                "worker_cores": self.worker_cores, "worker_memory": self.worker_memory}


def read_log(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def log_tail(path: Path, lines: int = 3) -> str:
    return " | ".join(read_log(path).strip().splitlines()[-lines:])


def on_nodes(spec: str) -> bool:
    """``spec`` names a cluster of Docker nodes: ``docker`` or ``docker:IMAGE``."""
    return spec == "docker" or spec.startswith("docker:")


def with_image(cluster: str, image: str | None) -> str:
    """The cluster spec ``--cluster docker --image IMAGE`` stands for (``docker:IMAGE``: stored with a scenario,
    so a replay runs on the same image)."""
    if image is None:
        return cluster
    if cluster != "docker":
        raise UserError(f"--image {image} names the image of Docker nodes: add --cluster docker")
    return f"docker:{image}"
