"""Spark's processes on this machine: where its jars are, the environment and JVM flags every Spark process
the harness starts gets, free ports, scratch directories, and executors found in the process table
(``CoarseGrainedExecutorBackend --executor-id N --app-id APP``), which is how faults aim at them.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil

from chaos.machine.own_packages import first_on_path, user_entries

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
APP_HEAP_START = "-Xms96m"  # drivers and executors (chaos.driver.process.quick_heap)
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
        # The harness's packages before anything of the user's (chaos/machine/own_packages.py): executors and their
        # Python daemons, which import chaos.driver.pydaemon, inherit it from the workers.
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
    host: str | None = None  # the host's name in a hosts' file (hosts over SSH); None: this machine

    def describe(self) -> dict:
        """What the history records of it."""
        return {"executor_id": self.executor_id, "pid": self.pid, **({"host": self.host} if self.host else {})}


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



def read_log(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def log_tail(path: Path, lines: int = 3) -> str:
    return " | ".join(read_log(path).strip().splitlines()[-lines:])

