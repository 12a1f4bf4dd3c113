"""The cluster a trial runs on (Jepsen's "db"), and what every kind of cluster can do, and refuse.

A kind of cluster is a subclass of ``Cluster``, registered by one line in chaos/clusters/registry.py. Its
abilities are methods the nemesis and the harness call without asking which kind it is (Jepsen's ``db/Kill``,
``db/Pause``): kill, pause or decommission executors and workers, node faults, partitions, its sink database.
What a kind cannot do it refuses before anything starts, in one line that says what to use instead
(``refusal``); the base class's methods raise ``LookupError`` with that line if a fault gets there anyway.
The planner asks the same ``refusal``, so a campaign plans exactly the faults a trial would accept.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from chaos.errors import UserError
from chaos.machine.processes import Group, Owned, kill_tree, wait_until
from chaos.machine.spark import Executor, executor_of, executors

if TYPE_CHECKING:
    from chaos.machine.check import Check
    from chaos.scenario.faults import Fault
    from chaos.scenario.scenario import Scenario

Heal = Callable[[], None]
DRAIN_TIMEOUT_S = 60.0  # how long a decommissioned worker's executors get to finish before it is replaced


def channels_of(pipeline, kafka_proxied: bool) -> tuple[bool, bool]:
    """Whether ``pipeline`` has a source and a sink channel (a fault proxy in front of each): its own say, unless
    its Kafka connections pass no proxy of the harness's (``Cluster.kafka_proxied``)."""
    return (bool(pipeline.source_channel) and (kafka_proxied or not pipeline.kafka),
            bool(pipeline.sink_channel) and (kafka_proxied or not pipeline.kafka_sink))


class Cluster:
    """A Spark master the drivers connect to (``spark://HOST:PORT`` of a cluster the user runs, the base kind):
    the harness finds its application's executors on this machine and owns nothing else of it."""

    kind = "external"
    owns_workers = False
    # Its drivers' and executors' JVMs start on this machine from this machine's class path, so the class
    # archives built here apply (not so for Docker nodes and hosts, which run their own JVMs).
    local_jvms = True
    # Phase reports carry the reporter's address, which tells which host a task ran on (hosts over SSH).
    peers_in_reports = False
    host = "127.0.0.1"  # where the cluster reaches the host: drivers and the harness's servers listen there
    driver_conf: dict[str, str] = {}  # Spark settings its drivers need (DRIVER_TIMEOUTS on nodes and hosts)
    workers = 0

    def __init__(self, master_url: str) -> None:
        self.master_url = master_url
        self.spec = master_url  # the ``--cluster`` it was made from (chaos.clusters.registry.make_cluster sets it)

    # -- the kind, before anything starts ---------------------------------------------------------
    @classmethod
    def create(cls, spec: str, owned: Owned, workdir: Path, workers: int, worker_cores: int, java_options: str,
               data_dir: Path) -> Cluster:
        """The cluster ``spec`` names (the registry matched it to this kind)."""
        return cls(spec)

    @classmethod
    def refusal(cls, fault: Fault, spec: str) -> str | None:
        """Why a cluster of this kind named ``spec`` cannot carry out ``fault`` (one line saying what to use
        instead), or None."""
        if fault.action == "decommission-worker":
            return (f"{fault.spec} needs the harness's own workers (--cluster standalone, docker or ssh); "
                    "on a cluster of yours, decommission an executor: decommission-executor")
        if fault.target == "worker":
            return (f"{fault.spec} needs --cluster standalone (the harness's own workers); "
                    "on --cluster docker, kill or pause the whole node: kill-node, pause-node")
        if fault.action == "partition" and fault.target == "sink-db":
            return (f"{fault.spec} needs --cluster docker or a cluster of hosts with a database host (the sink "
                    "database is then a machine of its own); here cut the sink channel instead: "
                    "cut-sink@BATCH:PHASE/10s")
        if fault.action == "partition" and fault.target == "broker":
            return (f"{fault.spec} needs --cluster docker (the Kafka broker is then a node of its own); here cut the "
                    "source channel instead: cut-source@BATCH:PHASE/10s")
        if fault.target == "node":
            return (f"{fault.spec} needs --cluster docker (nodes are containers; `streamchaos image build` makes "
                    "their image)")
        return None

    @classmethod
    def kafka_proxied(cls, spec: str) -> bool:
        """Whether a job's connections to Kafka pass the harness's fault proxies (its source and sink channels), as
        they do to every broker of the harness's own."""
        return True

    @classmethod
    def brokers_refusal(cls, brokers: int) -> str | None:
        """Why this kind cannot run ``brokers`` Kafka brokers for a trial (one line), or None."""
        if brokers > 1:
            return f"--brokers {brokers} runs each broker as a node of its own: add --cluster docker"
        return brokers_count_refusal(brokers)

    @classmethod
    def reap(cls) -> int:
        """Remove what killed harnesses of this machine left through this kind, beyond their processes (which
        ``chaos.machine.processes.reap_orphans`` kills whatever the kind); how many things."""
        return 0

    @classmethod
    def remote_checks(cls, spec: str) -> list[Check] | None:
        """``streamchaos doctor --cluster SPEC``: what this kind checks beyond this machine (None: nothing)."""
        return None

    @classmethod
    def reap_remote(cls, spec: str) -> list[str] | None:
        """``streamchaos reap --cluster SPEC``: reap what killed harnesses left on the cluster's machines; a line
        per machine (None: the kind has no machine but this one)."""
        return None

    def check(self, scenario: Scenario, pipeline) -> None:
        """Refuse (``UserError``) what this very cluster cannot run for ``pipeline``, beyond ``refusal``: a fault
        on a channel the pipeline has none of here (its Kafka connections past every proxy of the harness's)."""
        source, sink = channels_of(pipeline, self.kafka_proxied(self.spec))
        gone = {name for name, had, has in (("source", pipeline.source_channel, source),
                                             ("sink", pipeline.sink_channel, sink)) if had and not has}
        for fault in scenario.faults:
            if fault.channel and fault.target in gone:
                raise UserError(f"{fault.spec}: the job reaches the Kafka brokers directly, past the harness's fault "
                                "proxies (a cluster of yours): kill or pause its driver or executors, or partition a "
                                "host instead")

    def _cannot(self, fault: Fault) -> LookupError:
        return LookupError(self.refusal(fault, self.spec) or f"{fault.spec}: not on a {self.kind} cluster")

    # -- lifecycle ----------------------------------------------------------------------------------
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

    # -- its sink database ----------------------------------------------------------------------------
    def sink_database(self, owned: Owned, workdir: Path):
        """The sink database of the ``pg-*`` pipelines, started: a PostgreSQL server of the harness's on this
        machine, unless the kind has one of its own (a node, a host, the user's)."""
        from chaos.clusters.postgres import PostgresServer

        return PostgresServer(owned, workdir).start()

    def kafka_broker(self, owned: Owned, workdir: Path, brokers: int = 1):
        """The broker a job's Kafka source reads through Spark's connector, not started yet: one of the harness's
        on this machine, unless the kind has one of its own (a node, or ``brokers`` nodes)."""
        if refused := self.brokers_refusal(brokers):
            raise UserError(refused)
        if self.host != "127.0.0.1":
            raise UserError(f"a job read through Spark's Kafka connector runs on a local cluster or Docker nodes "
                            f"for now (this one's drivers run at {self.host}): give --kafka stand-in")
        from chaos.clusters.kafka.broker import KafkaBroker

        return KafkaBroker(owned, workdir)

    # -- executors ------------------------------------------------------------------------------------
    def executors(self, app_id: str | None) -> list[Executor]:
        """This application's live executors (all, with ``app_id`` None), sorted by executor id."""
        return executors(app_id)

    def reporting_executor(self, live: list[Executor], detail: dict) -> Executor | None:
        """The executor whose task reported a phase (``detail``: its pid, its address), if known."""
        return executor_of(int(detail["pid"])) if detail.get("pid") else None

    def kill_executor(self, ex: Executor) -> None:
        """SIGKILL the executor's JVM and its Python workers."""
        proc = psutil.Process(ex.pid)
        kill_tree([proc, *proc.children(recursive=True)])

    def pause_executor(self, ex: Executor) -> Heal:
        """SIGSTOP the executor's JVM and its Python workers; the heal resumes them."""
        proc = psutil.Process(ex.pid)
        return stop_processes([proc, *proc.children(recursive=True)])

    def decommission_executor(self, ex: Executor) -> None:
        """SIGPWR to the executor's JVM (``spark.decommission.enabled``): it finishes, migrates and leaves."""
        os.kill(ex.pid, signal.SIGPWR)

    # -- workers -------------------------------------------------------------------------------------
    def worker_index(self, fault: Fault, detail: dict, app_id: str | None) -> int:
        """The worker (or node, or host) ``fault`` aims at: its index, else the one that ran the reporting task,
        else one running this application's executor."""
        raise self._cannot(fault)

    def kill_worker(self, i: int) -> int | None:
        """SIGKILL worker ``i`` with every executor it launched; its pid, if it ran."""
        raise LookupError("worker faults need the harness's own workers")

    def pause_worker(self, i: int) -> tuple[int | None, Heal]:
        """SIGSTOP worker ``i`` and its executors; its pid and the heal."""
        raise LookupError("worker faults need the harness's own workers")

    def decommission_worker(self, i: int) -> None:
        raise LookupError("decommission-worker needs the harness's own workers")

    def replace_drained_worker(self, i: int, app_id: str | None) -> None:
        """After a decommission: once worker ``i``'s executors are gone (``DRAIN_TIMEOUT_S`` at the latest), a new
        worker in its place, as a drained host comes back empty."""
        raise LookupError("decommission-worker needs the harness's own workers")

    def restart_worker(self, i: int) -> None:
        raise LookupError("worker faults need the harness's own workers")

    # -- nodes ---------------------------------------------------------------------------------------
    def kill_node(self, i: int) -> None:
        raise LookupError("node faults need --cluster docker or a cluster of hosts")

    def pause_node(self, i: int) -> None:
        raise LookupError("node faults need --cluster docker or a cluster of hosts")

    def unpause_node(self, i: int) -> None:
        raise LookupError("node faults need --cluster docker or a cluster of hosts")

    def limit_cpu(self, i: int, cpus: float | None) -> None:
        raise LookupError("slow-node needs --cluster docker or a cluster of hosts")

    def squeeze_memory(self, i: int) -> dict:
        raise LookupError("oom-node needs --cluster docker")

    def release_memory(self, i: int) -> None:
        raise LookupError("oom-node needs --cluster docker")

    def partition(self, fault: Fault, detail: dict, service, app_id: str | None) -> tuple[int | str, Heal]:
        """Cut the fault's node off (or ``service``'s: the sink database's, ``node=sink``, the Kafka broker's,
        ``node=kafka``), from every peer or from one; the node's index (or ``"sink"``, ``"kafka"``) and the heal."""
        raise self._cannot(fault)


def brokers_count_refusal(brokers: int) -> str | None:
    """Two brokers, each a voter of the KRaft quorum, lose the quorum with either: no failover, one broker's worth."""
    if brokers == 2:
        return ("--brokers 2 cannot fail over (two voters lose their quorum with either broker): give 1, or 3 or "
                "more")
    return None


def stop_processes(procs: list[psutil.Process]) -> Heal:
    """SIGSTOP ``procs``; the heal sends them SIGCONT (those still alive)."""
    for proc in procs:
        try:
            proc.send_signal(signal.SIGSTOP)
        except psutil.Error:
            pass

    def resume() -> None:
        for proc in procs:
            try:
                proc.send_signal(signal.SIGCONT)
            except psutil.Error:
                pass

    return resume


class OwnWorkers(Cluster):
    """A cluster whose workers are processes (or containers) of the harness on this machine, found by the
    ancestry of the processes they launched (``worker_index_of``)."""

    owns_workers = True

    def worker_index_of(self, pid: int) -> int | None:
        raise NotImplementedError

    def worker_index(self, fault: Fault, detail: dict, app_id: str | None) -> int:
        if self.refusal(fault, self.spec):
            raise self._cannot(fault)
        if fault.index is not None:
            if fault.index >= self.workers:
                raise LookupError(f"no worker at index {fault.index}")
            return fault.index
        if detail.get("pid"):
            found = self.worker_index_of(int(detail["pid"]))
            if found is not None:
                return found
        for ex in executors(app_id):
            found = self.worker_index_of(ex.pid)
            if found is not None:
                return found
        return 0

    def replace_drained_worker(self, i: int, app_id: str | None) -> None:
        wait_until(lambda: not any(self.worker_index_of(ex.pid) == i for ex in executors()), DRAIN_TIMEOUT_S, 0.5)
        self.restart_worker(i)
