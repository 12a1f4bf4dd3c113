"""The harness's processes and iptables rules on a host it reaches over SSH, each tagged as its own.

On this machine a process is the harness's when its environment carries ``STREAMCHAOS_OWNER`` = the owner tag
of the harness process (chaos/machine/processes.py). A host is shared with other control machines and other users, so
there the tag is prefixed with this machine's id: ``<machine>/<pid>:<start time>``. A process is started detached (its
own session, ``setsid``, stdin closed, output to a log) so that it outlives the SSH channel that started it and can be
found again by its tag alone. An iptables rule carries the same tag in a comment (``-m comment --comment
streamchaos:<machine>/<tag>``). At every start the harness lists both on each host and removes what belongs to a harness
of this machine that is gone (``reap``); what another machine or nobody tagged is never touched.
"""

from __future__ import annotations

import shlex
import socket
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from chaos.clusters.ssh.client import Remote
from chaos.errors import HarnessError
from chaos.machine.processes import OWNER_VAR, my_tag, owner_alive, wait_until

RULE_PREFIX = "streamchaos:"
# A directory of a harness on a host (a database's data) holds its remote tag in this file; reaping reads it.
OWNED_DIRS = "/var/tmp/streamchaos"
OWNER_FILE = "owner"
# Each tagged process as "PID TAG", found by its environment (readable by root, as the file's user must be).
LIST_TAGGED = f"""for p in /proc/[0-9]*; do
  t=$(tr '\\0' '\\n' < "$p/environ" 2>/dev/null | sed -n 's/^{OWNER_VAR}=//p' | head -n 1)
  [ -n "$t" ] && echo "${{p#/proc/}} $t"
done; true"""


# A slowed host (``HostProcs.throttle``): every process of the harness there is stopped for most of each 100 ms and
# runs for the rest, as cpulimit does; the list is read again every second (executors come and go). On SIGTERM
# every one gets SIGCONT. Argument: the share of time they run, the tag, the tag's variable.
THROTTLE = """
import os, signal, sys, time
share, mark, me = float(sys.argv[1]), f"{sys.argv[3]}={sys.argv[2]}".encode(), os.getpid()
def tagged():
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    if mark in f.read().split(b"\\0"):
                        found.append(int(name))
            except OSError:
                pass
    return found
def send(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
running = [True]
signal.signal(signal.SIGTERM, lambda *_: running.clear())
pids, listed = [], 0.0
while running:
    if time.monotonic() - listed > 1:
        pids, listed = tagged(), time.monotonic()
    send(pids, signal.SIGSTOP)
    time.sleep(0.1 * (1 - share))
    send(pids, signal.SIGCONT)
    time.sleep(0.1 * share)
send(tagged(), signal.SIGCONT)
"""


@cache
def machine_id() -> str:
    """This control machine among others driving the same hosts: its systemd machine id, else its host name."""
    try:
        text = Path("/etc/machine-id").read_text().strip()
        if text:
            return text[:12]
    except OSError:
        pass
    return socket.gethostname()


def remote_tag(tag: str | None = None) -> str:
    return f"{machine_id()}/{tag or my_tag()}"


def ours(tag: str) -> str | None:
    """The local owner tag inside a host's tag, if this machine made it; None for another machine's."""
    machine, sep, local = tag.partition("/")
    return local if sep and machine == machine_id() else None


@dataclass(frozen=True)
class HostProcess:
    host: str
    pid: int
    tag: str


class HostProcs:
    """Start, find, signal and kill the harness's processes on one host."""

    def __init__(self, remote: Remote, tag: str | None = None) -> None:
        self.remote = remote
        self.tag = remote_tag(tag)

    def start(self, command: list[str], log: str, env: dict[str, str] | None = None, cwd: str | None = None) -> int:
        """Run ``command`` detached on the host with the owner tag in its environment; its pid."""
        assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**(env or {}), OWNER_VAR: self.tag}.items())
        script = (f"{f'cd {shlex.quote(cwd)} && ' if cwd else ''}"
                  f"env {assigns} setsid {shlex.join(command)} > {shlex.quote(log)} 2>&1 < /dev/null & echo $!")
        ran = self.remote.run(["sh", "-c", script], check=True)
        try:
            return int(ran.out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise HarnessError(f"host {self.remote.host}: starting {command[0]} printed no pid: {ran.out!r}") from None

    def tagged(self, tag: str | None = None) -> list[HostProcess]:
        """Processes on the host with ``tag`` (default: this harness's), or with any tag when ``tag`` is ''."""
        ran = self.remote.run(["sh", "-c", LIST_TAGGED], check=True)
        found = []
        for line in ran.out.splitlines():
            pid, _, value = line.partition(" ")
            if pid.isdigit() and (tag == "" or value == (tag or self.tag)):
                found.append(HostProcess(self.remote.host.name, int(pid), value))
        return found

    def signal(self, pids: list[int], sig: str) -> None:
        """``kill -SIG`` the pids on the host (those already gone are not an error)."""
        if pids:
            self.remote.run(["sh", "-c", f"kill -{sig} {' '.join(str(p) for p in pids)} 2>/dev/null; true"])

    def signal_session(self, sid: int, sig: str) -> None:
        """``pkill -SIG -s SID``: a server ``start`` began and every child of it (PostgreSQL's backends), at once."""
        self.remote.run(["sh", "-c", f"pkill -{sig} -s {int(sid)}; true"])

    def session_gone(self, sid: int) -> bool:
        return self.remote.run(["pgrep", "-s", str(int(sid))]).rc != 0

    def kill_session(self, sid: int) -> None:
        """SIGKILL a server's session and wait until none of it is left: a restart binds the same ports."""
        self.signal_session(sid, "KILL")
        wait_until(lambda: self.session_gone(sid), timeout=10, interval=0.1)

    def stop_session(self, sid: int, grace: float) -> None:
        """Stop a server's session cleanly if it can within ``grace`` seconds (SIGCONT first: a paused one cannot),
        then SIGKILL what is left."""
        self.signal_session(sid, "CONT")
        self.signal_session(sid, "TERM")
        wait_until(lambda: self.session_gone(sid), timeout=grace, interval=0.2)
        self.signal_session(sid, "KILL")

    def throttle(self, python: str, share: float) -> int:
        """Let every process of this harness on the host run ``share`` of the time (``THROTTLE``); the pid of the
        throttle, which ``unthrottle`` ends."""
        return self.start([python, "-c", THROTTLE, str(share), self.tag, OWNER_VAR], log="/dev/null")

    def unthrottle(self, pid: int) -> None:
        """End the throttle: it lets every process run again; SIGCONT to all once more, for one it missed."""
        self.signal([pid], "TERM")
        self.remote.run(["sh", "-c", f"for i in $(seq 50); do kill -0 {int(pid)} 2>/dev/null || break; sleep 0.1; "
                                     "done; true"])
        self.signal([pid], "KILL")
        self.signal([p.pid for p in self.tagged()], "CONT")

    def kill_all(self, rounds: int = 10) -> int:
        """SIGKILL every process of this harness on the host (stopped ones too: SIGKILL needs no SIGCONT), until
        none is left: a worker killed while it launched an executor leaves that child to the next round."""
        killed: set[int] = set()
        for _ in range(rounds):
            pids = [p.pid for p in self.tagged()]
            if not pids:
                break
            self.signal(pids, "KILL")
            killed.update(pids)
            time.sleep(0.2)
        return len(killed)


class HostRules:
    """iptables rules of the harness on one host, each with its owner tag in a comment."""

    def __init__(self, remote: Remote, tag: str | None = None) -> None:
        self.remote = remote
        self.comment = RULE_PREFIX + remote_tag(tag)

    def drop_from(self, source: str) -> list[str]:
        """Drop every packet from ``source`` (an address) arriving at this host; the rule, to delete at the heal."""
        rule = ["INPUT", "-s", source, "-j", "DROP", "-m", "comment", "--comment", self.comment]
        self.remote.run(["iptables", "-w", "-I", *rule], check=True)
        return rule

    def drop_to(self, destination: str) -> list[str]:
        """Drop every packet this host sends to ``destination``; the rule."""
        rule = ["OUTPUT", "-d", destination, "-j", "DROP", "-m", "comment", "--comment", self.comment]
        self.remote.run(["iptables", "-w", "-I", *rule], check=True)
        return rule

    def drop_port(self, port: int, peer: str | None = None) -> list[list[str]]:
        """Drop every packet to TCP ``port`` on this host and every one it sends from it (from and to ``peer``
        only, if given); the rules."""
        source = ["-s", peer] if peer else []
        destination = ["-d", peer] if peer else []
        made = []
        for rule in (["INPUT", *source, "-p", "tcp", "--dport", str(port), "-j", "DROP"],
                     ["OUTPUT", *destination, "-p", "tcp", "--sport", str(port), "-j", "DROP"]):
            rule = [*rule, "-m", "comment", "--comment", self.comment]
            self.remote.run(["iptables", "-w", "-I", *rule], check=True)
            made.append(rule)
        return made

    def keep_ssh(self, control: str) -> list[list[str]]:
        """Accept this machine's SSH to the host ahead of any DROP (inserted last, so first): a host cut off
        from everything is still healed over SSH. The rules."""
        made = []
        for rule in (["INPUT", "-s", control, "-p", "tcp", "--dport", "22", "-j", "ACCEPT"],
                     ["OUTPUT", "-d", control, "-p", "tcp", "--sport", "22", "-j", "ACCEPT"]):
            rule = [*rule, "-m", "comment", "--comment", self.comment]
            self.remote.run(["iptables", "-w", "-I", *rule], check=True)
            made.append(rule)
        return made

    def delete(self, rule: list[str]) -> None:
        self.remote.run(["sh", "-c", f"iptables -w -D {shlex.join(rule)} 2>/dev/null; true"])

    def listed(self) -> list[tuple[str, list[str]]]:
        """Every rule with a harness's comment: (its tag, the rule as ``-D`` takes it)."""
        ran = self.remote.run(["iptables-save", "-t", "filter"], check=True)
        found = []
        for line in ran.out.splitlines():
            if not line.startswith("-A ") or RULE_PREFIX not in line:
                continue
            words = shlex.split(line)[1:]
            comment = words[words.index("--comment") + 1] if "--comment" in words else ""
            if comment.startswith(RULE_PREFIX):
                found.append((comment[len(RULE_PREFIX):], words))
        return found

    def remove_mine(self) -> int:
        mine = [rule for tag, rule in self.listed() if RULE_PREFIX + tag == self.comment]
        for rule in mine:
            self.delete(rule)
        return len(mine)


def gone(tag: str) -> bool:
    """A host's tag names a harness of this machine that no longer runs (another machine's is never gone)."""
    local = ours(tag)
    return local is not None and not owner_alive(local)


def reap(remote: Remote) -> tuple[int, int]:
    """Kill the processes, delete the iptables rules and remove the directories (``OWNED_DIRS``) on a host that a
    harness of this machine left when it was killed (its owner no longer runs here). Returns (processes, rules)."""
    procs = HostProcs(remote)
    dead = [p.pid for p in procs.tagged("") if gone(p.tag)]
    procs.signal(dead, "KILL")
    rules = HostRules(remote)
    stale = [rule for tag, rule in rules.listed() if gone(tag)]
    for rule in stale:
        rules.delete(rule)
    owned = remote.run(["sh", "-c", f"for f in {OWNED_DIRS}/*/{OWNER_FILE}; do "
                                    '[ -f "$f" ] && echo "$(dirname "$f") $(cat "$f")"; done; true'])
    for line in owned.out.splitlines():
        folder, _, tag = line.partition(" ")
        if folder.startswith(f"{OWNED_DIRS}/") and tag.strip() and gone(tag.strip()):
            remote.run(["rm", "-rf", folder])
    return len(dead), len(stale)
