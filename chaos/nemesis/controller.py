"""The harness's controller: the server side of the phase barriers, and the keeper of the history.

Every phase report (from the source, the sinks, the checkpoint watcher) goes through ``report``.
It appends a history record and, if a fault is armed for that (batch, phase) and has not fired,
fires it through the nemesis *before* answering, so the reporting process is held exactly at the
phase while the fault happens. Each fault fires once: a replayed batch passes its phase freely.
"""

from __future__ import annotations

import json
import socketserver
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from chaos.machine.spark import executor_of
from chaos.scenario.faults import Fault
from chaos.store.checkpoint import read_offsets_file


@dataclass
class ArmedFault:
    fault: Fault
    fired: bool = False
    record: dict = field(default_factory=dict)


class History:
    """The timeline of a trial: records ``{t, kind, batch, phase, detail}``, t in seconds from start."""

    def __init__(self, path: Path | None = None) -> None:
        self.t0 = time.monotonic()
        self.records: list[dict] = []
        self.lock = threading.Lock()
        # Appended as it happens: a harness that dies mid-trial still leaves its timeline.
        self.file = open(path, "a") if path else None  # noqa: SIM115
        # The first write that failed (a full disk): records are kept in memory from then on, and the trial
        # raises it when it ends (``raise_write_error``), in its own thread, not in the controller's server thread
        # that reported a phase (socketserver would print its traceback and drop the reply).
        self.write_error: OSError | None = None

    def add(self, kind: str, batch: int | None = None, phase: str | None = None, **detail) -> dict:
        with self.lock:
            record = {
                "t": round(time.monotonic() - self.t0, 3),
                "kind": kind,
                "batch": batch,
                "phase": phase,
                "detail": detail,
            }
            self.records.append(record)
            if self.file:
                try:
                    self.file.write(json.dumps(record, default=str) + "\n")
                    self.file.flush()
                except OSError as exc:
                    self.write_error = exc
                    self._close_file()
            return record

    def close(self) -> None:
        with self.lock:
            self._close_file()

    def _close_file(self) -> None:
        if self.file:
            try:
                self.file.close()
            except OSError as exc:  # the buffered rest could not be written either
                self.write_error = self.write_error or exc
            self.file = None

    def raise_write_error(self) -> None:
        """The history file is incomplete: the trial says nothing (a full disk is the harness's failure)."""
        if self.write_error is not None:
            raise self.write_error

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.records)


Fire = Callable[[Fault, dict], dict]


class Controller:
    """Serves barrier requests on 127.0.0.1 (or ``host``, ``Cluster.host``) and fires armed faults through ``fire``."""

    def __init__(self, history: History, faults: list[Fault], fire: Fire, host: str = "127.0.0.1",
                 peers: bool = False, executor_phases: tuple[str, ...] = (), checkpoint: Path | None = None) -> None:
        self.history = history
        # The trial's checkpoint: a batch planned from ``offsets/N`` (the watcher's report) is recorded with the ends
        # that file names, read before any fault of the phase fires (one may damage it: chaos.store.result).
        self.checkpoint = checkpoint
        # Phases a task reports too, after the driver did (``Pipeline.executor_phases``): an executor's fault waits
        # for a task's report (one with a partition), so it lands in the task.
        self.executor_phases = executor_phases
        # Record each reporter's address (``peer``): on a cluster of hosts, where a pid alone names no process.
        self.peers = peers
        self.armed = [ArmedFault(f) for f in faults]
        self.disarmed = False  # after the drain: phases are still recorded, no fault fires any more
        self.fire = fire
        self.fire_lock = threading.Lock()
        self.attempts: dict[tuple, int] = {}
        self.incarnation = 0
        self.app_id: str | None = None
        self.standby_ready: set[int] = set()  # standby driver incarnations booted and warm
        self.booted = threading.Event()  # a driver reported its session up (the trial's stall clock restarts)
        self.running = threading.Event()  # a driver's query runs and its stop (SIGUSR2) is handled
        # The end offsets of the last batch a driver's query finished, as its progress report has them: told
        # under asynchronous progress tracking, whose checkpoint may lag (chaos.driver.process.tell_progress).
        self.finished_ends: list | None = None
        self.listeners: list[Callable[[int, str], None]] = []  # told of every phase (e.g. heals "until PHASE")
        self.last_point: tuple[int | None, str | None] = (None, None)  # where a timed fault lands
        self.stopped = threading.Event()
        controller = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline()
                if not line:
                    return
                message = json.loads(line)
                if controller.peers and message.get("type") == "phase":
                    message.setdefault("detail", {})["peer"] = self.client_address[0]
                reply = controller.handle(message)
                try:
                    self.wfile.write(json.dumps(reply).encode() + b"\n")
                except OSError:
                    pass  # the reporter died at its phase (the fault was aimed at it)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server((host, 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="controller", daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host}:{port}"

    def handle(self, message: dict) -> dict:
        if message.get("type") == "driver":
            if message.get("event") == "standby-ready":
                self.standby_ready.add(message.get("incarnation"))
            else:
                self.app_id = message.get("app_id") or self.app_id
                if message.get("event") == "booted":
                    self.booted.set()
                elif message.get("event") == "running":
                    self.running.set()
                elif message.get("event") == "progress":  # a batch finished, its offsets maybe not yet written
                    self.finished_ends = message.get("ends") or []
            self.history.add("driver", **_drop(message, "type"))
            return {"ok": True}
        detail = dict(message.get("detail") or {})
        detail["pid"] = message.get("pid")
        if (self.checkpoint is not None and detail.get("source") == "checkpoint" and "end" not in detail
                and detail.get("after") == f"offsets/{int(message['batch'])}"):
            ends = read_offsets_file(str(self.checkpoint / detail["after"]))
            if ends:
                detail["end"] = ends[0]
        executor = executor_of(int(detail["pid"])) if detail["pid"] else None
        if executor is not None:
            detail["executor"] = executor.executor_id
        self.report(int(message["batch"]), message["phase"], **detail)
        return {"ok": True}

    def report(self, batch: int, phase: str, **detail) -> None:
        """Record a phase and fire every fault armed for it (once each); return when they fired."""
        with self.fire_lock:
            key = (batch, phase, detail.get("partition"))  # a read attempt is per partition
            self.attempts[key] = self.attempts.get(key, 0) + 1
            detail.setdefault("incarnation", self.incarnation)
            self.history.add("phase", batch, phase, attempt=self.attempts[key], **detail)
            self.last_point = (batch, phase)
            for listener in self.listeners:
                listener(batch, phase)
            for armed in self.armed:
                f = armed.fault
                if self.disarmed or armed.fired or f.timed or f.batch != batch or f.phase != phase:
                    continue
                if f.target == "executor" and phase in self.executor_phases and "partition" not in detail:
                    continue
                self._fire(armed, detail, batch, phase)

    def _fire(self, armed: ArmedFault, detail: dict, batch: int | None, phase: str | None, **extra) -> None:
        """Fire one armed fault (under ``fire_lock``) and record it where it landed."""
        armed.fired = True
        try:
            outcome = self.fire(armed.fault, detail)
        except Exception as exc:  # a fault that could not be carried out is recorded, not raised
            outcome = {"done": False, "error": f"{type(exc).__name__}: {exc}"}
        armed.record = self.history.add("fault", batch, phase, spec=armed.fault.spec, **extra, **outcome)

    def start_clock(self) -> None:
        """Fire the timed faults (``kill-driver@12.5s``) at their seconds from now, as time-based chaos does: each
        lands wherever the stream happens to be, recorded as the batch and phase last reported."""
        timed = sorted((a for a in self.armed if a.fault.timed), key=lambda a: a.fault.at_s)
        if timed:
            threading.Thread(target=self._clock, args=(time.monotonic(), timed), name="fault-clock",
                             daemon=True).start()

    def _clock(self, origin: float, timed: list[ArmedFault]) -> None:
        for armed in timed:
            if self.stopped.wait(max(0.0, origin + armed.fault.at_s - time.monotonic())):
                return
            with self.fire_lock:
                if self.disarmed:
                    return
                self._fire(armed, {}, *self.last_point, timed=True)

    def unfired(self) -> list[Fault]:
        return [a.fault for a in self.armed if not a.fired]

    def close(self) -> None:
        self.stopped.set()
        self.server.shutdown()
        self.server.server_close()


def _drop(d: dict, *keys: str) -> dict:
    return {k: v for k, v in d.items() if k not in keys}
