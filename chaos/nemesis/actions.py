"""The nemesis: carries out a fault at the moment the controller fires it, and heals it later.

Kills are SIGKILL of a whole host's worth of processes (the driver's group; an executor JVM and
its Python workers; a worker and the executors it launched). Pauses are SIGSTOP, then SIGCONT
after the fault's duration. A decommission is SIGPWR, the signal Spark's executors and workers take as
"finish, hand your blocks on, leave" (what a cluster manager sends before it takes a host away). A killed
worker is restarted after its downtime; a killed driver is restarted by the trial loop. Heals run on timers
and are all awaited before the trial ends.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from chaos.clusters.base import Cluster, stop_processes
from chaos.clusters.kafka.broker import KafkaBroker
from chaos.clusters.postgres import PostgresServer
from chaos.machine.processes import Group
from chaos.nemesis.channels import Channels
from chaos.nemesis.controller import History
from chaos.scenario.faults import CHANNEL_DEFAULT_DURATION, UNTIL_MAX_S, Fault

DEFAULT_WORKER_DOWNTIME = 2.0
DEFAULT_DB_DOWNTIME = 2.0
DEFAULT_BROKER_DOWNTIME = 3.0  # a broker's restart: its log recovery and the controller's election add ~3 s more
DEFAULT_DECOMMISSION_DOWNTIME = 5.0  # a decommissioned worker is replaced this long after its executors left
# The application of a trial with a decommission fault: executors take SIGPWR as a decommission and hand their
# cached and shuffle blocks to a peer, and there is a peer: two 1-core executors instead of one with both cores.
# A drained executor exits only after a pass over its blocks that began after its last task; passes are 30 s
# apart by default, so the drained worker's replacement waited 30-60 s past the trial's last batch. At 2 s the
# executor leaves within seconds of its last task, as on a host drained between two batches.
DECOMMISSION_CONF = {
    "spark.decommission.enabled": "true",
    "spark.storage.decommission.enabled": "true",
    "spark.storage.decommission.shuffleBlocks.enabled": "true",
    "spark.storage.decommission.rddBlocks.enabled": "true",
    "spark.storage.decommission.replicationReattemptInterval": "2s",
    "spark.executor.cores": "1",
}
SLOW_NODE_CPUS = 0.1  # slow-node: the CPU a starved node keeps


class Nemesis:
    def __init__(
        self,
        cluster: Cluster,
        driver: Callable[[], Group | None],
        app_id: Callable[[], str | None],
        checkpoint: Path,
        history: History,
        channels: Channels | None = None,
        database: PostgresServer | None = None,
        broker: KafkaBroker | None = None,
    ) -> None:
        self.cluster = cluster
        self.driver = driver
        self.app_id = app_id
        self.checkpoint = Path(checkpoint)
        self.history = history
        self.channels = channels
        self.database = database
        self.broker = broker
        self.kafka_topic: str | None = None  # the trial's topic on the broker (set once produced)
        self.batch_records = 0  # a batch's records (--events-per-batch): delete-records' default count
        self.grow_topic: Callable[[Fault], dict] | None = None  # add-partitions: the trial's topic grown
        # A channel's proxies when not the one of its own name (Kafka's listeners: one per broker).
        self.channel_routes: dict[str, tuple[str, ...]] = {}
        self._until: list[tuple[Fault, threading.Event]] = []
        self.heals: list[threading.Thread] = []
        self.driver_kill: Fault | None = None  # the fault that killed the current driver, if any
        # Called before a driver kill with the phase's detail (the trial waits for its standby there).
        self.before_driver_kill: Callable[[dict], None] | None = None

    # -- entry point -------------------------------------------------------------------------
    def fire(self, fault: Fault, detail: dict) -> dict:
        if fault.channel:
            return self._channel(fault)
        handler = {
            "kill": self._kill,
            "pause": self._pause,
            "damage": self._damage,
            "stop": self._stop,
            "partition": self._partition,
            "slow": self._slow,
            "oom": self._oom,
            "decommission": self._decommission,
            "delete": self._delete_records,
            "add": self._add_partitions,
        }[fault.kind]
        return handler(fault, detail)

    def wait_heals(self, timeout: float = 300) -> None:
        for thread in list(self.heals):
            thread.join(timeout)

    # -- targets -------------------------------------------------------------------------------
    def _executor(self, fault: Fault, detail: dict):
        """The fault's executor: by index, else the one whose task reported the phase, else the first."""
        live = self.cluster.executors(self.app_id())
        if fault.index is not None:
            if fault.index >= len(live):
                raise LookupError(f"no executor at index {fault.index} ({len(live)} live)")
            return live[fault.index]
        reporter = self.cluster.reporting_executor(live, detail)
        if reporter is not None:
            return reporter
        if not live:
            raise LookupError("no live executor of this application")
        return live[0]

    def _broker(self) -> KafkaBroker:
        """The broker a broker fault aims at: the harness's, or of a cluster of brokers the leader of the trial's
        topic's first partition."""
        target = self.broker.leader_of(self.kafka_topic) if self.broker is not None else None
        if target is None or target.pid is None:
            raise LookupError("no running Kafka broker: this pipeline reads no Kafka, or a kill left it down")
        return target

    def _live_driver(self) -> Group:
        group = self.driver()
        if group is None or not group.alive():
            raise LookupError("no live driver")
        return group

    # -- actions -------------------------------------------------------------------------------
    def _kill(self, fault: Fault, detail: dict) -> dict:
        if fault.target == "broker":
            broker = self._broker()
            pid = broker.kill()
            downtime = fault.duration if fault.duration is not None else DEFAULT_BROKER_DOWNTIME
            self._heal_later(fault, downtime, broker.restart, broker=broker.name, pid=pid)
            return {"done": True, "pid": pid, "broker": broker.name, "downtime": downtime}
        if fault.target == "sink-db":
            if self.database is None:
                raise LookupError("this pipeline has no sink database")
            pid = self.database.kill()
            downtime = fault.duration if fault.duration is not None else DEFAULT_DB_DOWNTIME
            self._heal_later(fault, downtime, self.database.restart, database=pid)
            return {"done": True, "pid": pid, "downtime": downtime}
        if fault.target == "driver":
            if self.before_driver_kill is not None:
                self.before_driver_kill(detail)
            group = self._live_driver()
            self.driver_kill = fault
            group.kill()
            return {"done": True, "pid": group.pid}
        if fault.target == "executor":
            ex = self._executor(fault, detail)
            self.cluster.kill_executor(ex)
            return {"done": True, **ex.describe()}
        index = self.cluster.worker_index(fault, detail, self.app_id())
        downtime = fault.duration if fault.duration is not None else DEFAULT_WORKER_DOWNTIME
        if fault.target == "node":  # the worker with its executors, Python workers and local files
            self.cluster.kill_node(index)
            self._heal_later(fault, downtime, lambda: self.cluster.restart_worker(index), node=index)
            return {"done": True, "node": index, "downtime": downtime}
        pid = self.cluster.kill_worker(index)
        self._heal_later(fault, downtime, lambda: self.cluster.restart_worker(index), worker=index)
        return {"done": True, "worker": index, "pid": pid, "downtime": downtime}

    def _stop(self, fault: Fault, detail: dict) -> dict:
        """A clean stop (SIGTERM: the driver stops its query between batches); the trial restarts it."""
        group = self._live_driver()
        self.driver_kill = fault
        group.signal_leader(signal.SIGTERM)
        return {"done": True, "pid": group.pid, "cores_after": fault.index}

    def _pause(self, fault: Fault, detail: dict) -> dict:
        duration = fault.duration or 0.0
        if fault.target == "broker":
            broker = self._broker()
            broker.pause()
            what, resume = {"broker": broker.name, "pid": broker.pid}, broker.resume
        elif fault.target == "driver":
            group = self._live_driver()
            what, resume = {"pid": group.pid}, stop_processes(group.members())
        elif fault.target == "executor":
            ex = self._executor(fault, detail)
            what, resume = ex.describe(), self.cluster.pause_executor(ex)
        elif fault.target == "node":  # every process of the node (or host) frozen at once
            index = self.cluster.worker_index(fault, detail, self.app_id())
            self.cluster.pause_node(index)
            what, resume = {"node": index}, lambda: self.cluster.unpause_node(index)
        else:
            index = self.cluster.worker_index(fault, detail, self.app_id())
            pid, resume = self.cluster.pause_worker(index)
            what = {"worker": index, "pid": pid}
        self._heal_later(fault, duration, resume, **what)
        return {"done": True, "duration": fault.duration, **what}

    def _partition(self, fault: Fault, detail: dict) -> dict:
        """The node (a worker's, a host, the sink database's or the Kafka broker's) cut off from the others and the
        host (driver, event log, controller, proxies), both ways, until the heal after the duration or at
        ``until``; with ``from=``/``with=`` only what one peer sends it (or both ways with that peer) is dropped."""
        service = self._broker() if fault.target == "broker" else self.database
        node, heal = self.cluster.partition(fault, detail, service, self.app_id())
        mode, peer = fault.peer or (None, None)
        return {"done": True, **self._heal_after(fault, heal, node=node, **({mode: peer} if mode else {}))}

    def _slow(self, fault: Fault, detail: dict) -> dict:
        """A CPU quota on the whole node (every process in it shares a tenth of one CPU), lifted after the duration:
        a machine starved by a noisy neighbour, slow but alive."""
        index = self.cluster.worker_index(fault, detail, self.app_id())
        self.cluster.limit_cpu(index, SLOW_NODE_CPUS)
        self._heal_later(fault, fault.duration or 0.0, lambda: self.cluster.limit_cpu(index, None), node=index)
        return {"done": True, "node": index, "duration": fault.duration, "cpus": SLOW_NODE_CPUS}

    def _oom(self, fault: Fault, detail: dict) -> dict:
        """The node's memory limited to what it uses while a hog in it wants more: the kernel's OOM killer kills
        an executor (made its first choice; the worker lives); the limit is lifted after the duration."""
        index = self.cluster.worker_index(fault, detail, self.app_id())
        squeezed = self.cluster.squeeze_memory(index)
        self._heal_later(fault, fault.duration or 0.0, lambda: self.cluster.release_memory(index), node=index)
        return {"done": True, "node": index, "duration": fault.duration, **squeezed}

    def _delete_records(self, fault: Fault, detail: dict) -> dict:
        """Kafka's retention beating the consumer: every record of the trial's topic before batch B's end offsets
        (``offsets/B``, else the newest offsets file) and N more (default: a batch's worth, spread over the
        partitions) deleted; what the query had not read yet of them is gone for it."""
        from chaos.store.checkpoint import kafka_offsets

        self._broker()  # a running broker: its records are there to delete
        broker, topic = self.broker, self.kafka_topic
        if topic is None:
            raise LookupError("no topic of this trial on the broker")
        logs = sorted((p for p in (self.checkpoint / "offsets").glob("[0-9]*") if int(p.name) <= fault.batch),
                      key=lambda p: int(p.name))
        planned = (kafka_offsets(str(logs[-1])) or {}).get(topic, {}) if logs else {}
        ends = {int(p): n for p, n in broker.end_offsets(topic).items()}
        more = fault.count if fault.count is not None else self.batch_records
        each = -(-more // max(len(ends), 1))
        before = {p: min(end, int(planned.get(str(p), 0)) + each) for p, end in ends.items()}
        deleted = broker.delete_records(topic, before)
        return {"done": True, "topic": topic, "planned": planned, "deleted_before": {str(p): o for p, o in
                                                                                     sorted(deleted.items())}}

    def _add_partitions(self, fault: Fault, detail: dict) -> dict:
        """The trial's topic grows by N partitions (default 1) and the records keyed to them from the next batch
        on are produced there: Spark's Kafka source must find the new partitions and read them from their start.
        At a phase that holds the driver (``sink-done``) the next batch's plan sees them; at ``committed`` (seen in
        the checkpoint, Spark not held) that batch may be planned first and the one after reads them."""
        if self.grow_topic is None or self.kafka_topic is None:
            raise LookupError("no topic of this trial on the broker")
        return {"done": True, **self.grow_topic(fault)}

    def _decommission(self, fault: Fault, detail: dict) -> dict:
        """Spark's graceful decommission: an executor (``spark.decommission.enabled``) finishes its tasks, migrates
        its blocks to a peer and exits, and the cluster manager gives the application a new one; a worker
        decommissions every executor it runs and takes no new one. The worker is replaced once its executors
        are gone and the fault's duration has passed, as a drained host comes back empty."""
        if fault.target == "executor":
            ex = self._executor(fault, detail)
            self.cluster.decommission_executor(ex)
            return {"done": True, **ex.describe()}
        index = self.cluster.worker_index(fault, detail, self.app_id())
        self.cluster.decommission_worker(index)
        downtime = fault.duration if fault.duration is not None else DEFAULT_DECOMMISSION_DOWNTIME
        app_id = self.app_id()
        self._heal_later(fault, downtime, lambda: self.cluster.replace_drained_worker(index, app_id), worker=index)
        return {"done": True, "worker": index, "downtime": downtime}

    def _damage(self, fault: Fault, detail: dict) -> dict:
        return {"done": True, **damage_checkpoint(self.checkpoint, fault.mode)}

    def _channel(self, fault: Fault) -> dict:
        if self.channels is None:
            raise LookupError("no fault proxy in this harness")
        heal = self.channels.apply(fault, self.channel_routes.get(fault.target, ()))
        return {"done": True, **self._heal_after(fault, heal, channel=fault.target), **fault.attributes}

    def _heal_after(self, fault: Fault, heal: Callable[[], None], **what) -> dict:
        """Heal a channel fault or a partition at ``until=PHASE`` (``UNTIL_MAX_S`` at the latest), else after its
        duration (default ``CHANNEL_DEFAULT_DURATION``); returns what the history records of it."""
        if fault.until is not None:
            reached = threading.Event()
            self._until.append((fault, reached))
            self._heal_later(fault, UNTIL_MAX_S, heal, until=fault.until, event=reached, **what)
            return {**what, "until": fault.until}
        duration = fault.duration if fault.duration is not None else CHANNEL_DEFAULT_DURATION
        self._heal_later(fault, duration, heal, **what)
        return {**what, "duration": duration}

    def on_phase(self, batch: int, phase: str) -> None:
        """Controller listener: a fault ``until=PHASE`` heals at PHASE of its batch or a later one."""
        for fault, reached in self._until:
            if phase == fault.until and batch >= fault.batch and not (batch == fault.batch and phase == fault.phase):
                reached.set()

    def _heal_later(self, fault: Fault, after: float, action: Callable[[], None],
                    event: threading.Event | None = None, **detail) -> None:
        """Heal after ``after`` seconds, or as soon as ``event`` is set (``after`` then bounds the wait)."""
        done = event or threading.Event()

        def heal() -> None:
            done.wait(after)
            try:
                action()
                self.history.add("heal", fault.batch, fault.phase, spec=fault.spec, **detail)
            except Exception as exc:
                self.history.add("heal", fault.batch, fault.phase, spec=fault.spec, error=str(exc), **detail)

        thread = threading.Thread(target=heal, name=f"heal {fault.spec}", daemon=True)
        self.heals.append(thread)
        thread.start()


def damage_checkpoint(checkpoint: Path, mode: str) -> dict:
    """Do ``mode`` (``chaos.scenario.faults.DAMAGE_MODES``) to the checkpoint; what was damaged, for the history."""
    how, what = mode.split("-", 1)
    if mode == "delete-metadata":
        target = checkpoint / "metadata"
        if not target.exists():
            raise LookupError("no metadata file in the checkpoint yet")
        target.unlink()
        return {"file": "metadata", "how": how}
    if how == "retain":  # every offsets/commits file but the newest: a retention that kept too little
        folder = checkpoint / what
        numbers = sorted(int(n) for n in os.listdir(folder) if n.isdigit()) if folder.is_dir() else []
        if len(numbers) < 2:
            raise LookupError(f"fewer than two {what} files in the checkpoint yet")
        for n in numbers[:-1]:
            (folder / str(n)).unlink()
            crc = folder / f".{n}.crc"
            crc.unlink(missing_ok=True)
        return {"files": [f"{what}/{n}" for n in numbers[:-1]], "how": how}
    if how == "unrename":  # a writer killed between createAtomic's create and its rename of the file
        return unrenamed(checkpoint, what)
    target = newest_checkpoint_file(checkpoint, "state" if what == "operator" else what)
    if target is None:
        raise LookupError(f"no {'state' if what == 'operator' else what} file in the checkpoint yet")
    rel = target.relative_to(checkpoint)
    if what == "operator":  # state/<operator>/...: the whole operator's directory
        operator = checkpoint / rel.parts[0] / rel.parts[1]
        # Spark may be writing into it (temp files renamed or removed under the walk): a FileNotFoundError half way
        # would leave the damage done but the fault recorded as not fired. Whatever Spark writes after stays.
        for _ in range(3):
            shutil.rmtree(operator, ignore_errors=True)
            if not operator.exists():
                break
        return {"file": str(operator.relative_to(checkpoint)), "how": how,
                **({"rewritten": True} if operator.exists() else {})}
    if how == "truncate":
        with open(target, "r+b") as fh:
            fh.truncate(target.stat().st_size // 2)
    elif how == "flip":  # 16 bytes in the middle of the file, inverted: a bit rot the file's format must catch
        with open(target, "r+b") as fh:
            middle = max(0, target.stat().st_size // 2 - 8)
            fh.seek(middle)
            data = fh.read(16)
            fh.seek(middle)
            fh.write(bytes(b ^ 0xFF for b in data))
    else:
        target.unlink()
    return {"file": str(rel), "how": how}


def unrenamed(checkpoint: Path, what: str) -> dict:
    """The newest ``offsets/N`` or ``commits/N`` (and its checksum) back under the temporary names Spark's
    ``CheckpointFileManager.createAtomic`` writes it as, ``.N.<uuid>.tmp`` and ``..N.<uuid>.tmp.crc``: what a
    driver killed before the rename leaves (paired with a ``kill-driver`` at the same phase)."""
    target = newest_checkpoint_file(checkpoint, what)
    if target is None:
        raise LookupError(f"no {what} file in the checkpoint yet")
    temp = target.with_name(f".{target.name}.{uuid.uuid4()}.tmp")
    target.rename(temp)
    crc = target.with_name(f".{target.name}.crc")
    if crc.exists():
        crc.rename(temp.with_name(f".{temp.name}.crc"))
    return {"file": str(target.relative_to(checkpoint)), "how": "unrename", "left": temp.name}


def newest_checkpoint_file(checkpoint: Path, what: str) -> Path | None:
    """The newest offsets/N, commits/N or state file (by batch number / state version)."""
    if what in ("offsets", "commits"):
        folder = checkpoint / what
        numbers = [int(n) for n in os.listdir(folder) if n.isdigit()] if folder.is_dir() else []
        return folder / str(max(numbers)) if numbers else None
    state = checkpoint / "state"
    if not state.is_dir():
        return None
    files = [p for p in state.rglob("*") if p.is_file() and state_version(p) is not None]
    return max(files, key=lambda p: (state_version(p), p.stat().st_mtime_ns), default=None)


def state_version(path: Path) -> int | None:
    """Version number of a state store file: ``12.delta``, ``12.snapshot``, ``12.zip``, ``12.changelog``, and
    with checkpoint format v2 (RocksDB) ``12_<unique id>.zip`` / ``12_<unique id>.changelog``."""
    return state_version_of(path.name)


def state_version_of(name: str) -> int | None:
    """``state_version`` of a bare file name (the watcher's scan builds no Path per file)."""
    stem, _, ext = name.partition(".")
    version = stem.split("_", 1)[0]
    if ext in ("delta", "snapshot", "zip", "changelog") and version.isdigit():
        return int(version)
    return None
