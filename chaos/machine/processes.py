"""Ownership of every process the harness starts, so none outlives it.

Each child is started in a new session (its own process group) and carries the environment
variable STREAMCHAOS_OWNER=<pid>:<start-time>#<n> of the harness that started it. Spark passes its
environment on to what it launches (executor JVMs, Python workers), so the tag reaches every
descendant, even ones that leave the group. Two ways out:

* normal end, Ctrl-C, SIGTERM: the harness kills its groups in ``Owned.stop_all``;
* SIGKILL of the harness: the next harness start calls ``reap_orphans``, which kills every
  process whose tag names an owner that is no longer alive.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import psutil

OWNER_VAR = "STREAMCHAOS_OWNER"
_SERIAL = itertools.count()


def _tag_of(pid: int) -> str:
    return f"{pid}:{psutil.Process(pid).create_time():.3f}"


def my_tag() -> str:
    """The owner tag of this harness process (inherited if we are ourselves a tagged child)."""
    return _tag_of(os.getpid())


def owner_alive(tag: str) -> bool:
    """Whether the harness process an owner tag names still runs (the same pid, started at the same time)."""
    try:
        pid_s, created = tag.split("#", 1)[0].split(":", 1)
        proc = psutil.Process(int(pid_s))
        return f"{proc.create_time():.3f}" == created
    except (ValueError, psutil.Error):
        return False


def tagged_processes(tag: str | None = None) -> list[psutil.Process]:
    """Processes carrying an owner tag (a given one, or any)."""
    found = []
    me = os.getpid()
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        try:
            value = proc.environ().get(OWNER_VAR)
        except (psutil.Error, OSError):
            continue
        if value is not None and (tag is None or value == tag):
            found.append(proc)
    return found


def kill_tree(procs: Iterable[psutil.Process]) -> None:
    """SIGKILL processes and all their descendants, and wait until they are dead (``dead``)."""
    victims: dict[int, psutil.Process] = {}
    for proc in procs:
        try:
            victims[proc.pid] = proc
            for child in proc.children(recursive=True):
                victims[child.pid] = child
        except psutil.Error:
            pass
    for proc in victims.values():
        try:
            proc.kill()
        except psutil.Error:
            pass
    wait_dead(list(victims.values()), timeout=10)


def dead(proc: psutil.Process) -> bool:
    """Gone, or a zombie: it has exited and released its memory, files and sockets; only its exit status
    waits for its parent. Orphans are reparented to init, which may reap them a second or two later (here:
    1.2-2 s, measured): waiting for that held an executor kill's reporting task that long."""
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


def wait_dead(procs: list[psutil.Process], timeout: float) -> bool:
    """Wait until every process is ``dead``; False if some still run after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        procs = [p for p in procs if not dead(p)]
        if not procs:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def reap_orphans() -> int:
    """Kill what earlier harnesses left behind (they were SIGKILLed). Returns how many died."""
    orphans = []
    for proc in tagged_processes():
        try:
            tag = proc.environ().get(OWNER_VAR, "")
        except psutil.Error:
            continue
        if "/" in tag:  # a host's process (chaos/clusters/ssh/remote.py), visible here when the host is a container
            continue
        if not owner_alive(tag):
            orphans.append(proc)
    kill_tree(orphans)
    return len(orphans)


class Group:
    """One started process in its own process group (its session leader is ``proc``)."""

    def __init__(self, name: str, proc: subprocess.Popen, log_path: Path | None) -> None:
        self.name = name
        self.proc = proc
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def members(self) -> list[psutil.Process]:
        """Every live process in the group, plus the leader's descendants that left it."""
        found: dict[int, psutil.Process] = {}
        for proc in psutil.process_iter(["pid"]):
            try:
                if os.getpgid(proc.pid) == self.pid:
                    found[proc.pid] = proc
            except (ProcessLookupError, PermissionError, psutil.Error):
                continue
        try:
            for child in psutil.Process(self.pid).children(recursive=True):
                found[child.pid] = child
        except psutil.Error:
            pass
        return list(found.values())

    def signal(self, sig: int) -> None:
        """Send a signal to the whole group (a host-level event: every process on it)."""
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def signal_leader(self, sig: int) -> None:
        """Send a signal to the group's first process only (a message to the program, not to its host)."""
        try:
            os.kill(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self) -> None:
        """SIGKILL the group and its strays, then reap the leader."""
        # The leader is reaped by its Popen only: psutil reaping it first would leave Popen a returncode of 0.
        members = [p for p in self.members() if p.pid != self.pid]
        self.signal(signal.SIGKILL)
        kill_tree(members)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def terminate(self, grace: float, sig: int | None = None) -> None:
        """``sig`` (default SIGTERM) to the leader, wait up to ``grace`` seconds, then kill the group."""
        if self.alive():
            try:
                self.proc.send_signal(signal.SIGTERM if sig is None else sig)
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


class Owned:
    """The set of process groups one harness owns."""

    def __init__(self) -> None:
        # One tag per Owned, not per process: two harnesses in one process (a test's session cluster
        # and a trial's harness) must never stop each other's processes.
        self.tag = f"{my_tag()}#{next(_SERIAL)}"
        self.groups: list[Group] = []

    def spawn(
        self,
        name: str,
        argv: list[str],
        *,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        cwd: Path | None = None,
        user: str | None = None,
    ) -> Group:
        full_env = dict(os.environ if env is None else env)
        full_env[OWNER_VAR] = self.tag
        out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                argv,
                env=full_env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd,
                start_new_session=True,
                user=user,  # e.g. PostgreSQL refuses to run as root
            )
        finally:
            if log_path:
                out.close()
        group = Group(name, proc, log_path)
        self.groups.append(group)
        return group

    def forget(self, group: Group) -> None:
        if group in self.groups:
            self.groups.remove(group)

    def end(self, group: Group | None, grace: float | None = None) -> int | None:
        """Stop ``group`` (SIGKILL; with ``grace``, SIGTERM first and that long to exit) and forget it: its pid,
        None if there was no group."""
        if group is None:
            return None
        if grace is None:
            group.kill()
        else:
            group.terminate(grace)
        self.forget(group)
        return group.pid

    def stop_all(self) -> None:
        for group in reversed(self.groups):
            group.kill()
        self.groups.clear()
        # Anything that escaped its group but carries our tag goes too.
        kill_tree(tagged_processes(self.tag))


def wait_until(predicate, timeout: float, interval: float = 0.1) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` passes (for readiness, never for faults)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
