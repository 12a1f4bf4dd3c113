"""Process ownership with real processes: groups die with the harness, orphans are reaped."""

import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time

import psutil

from chaos.machine.processes import (
    OWNER_VAR,
    Owned,
    dead,
    kill_tree,
    reap_orphans,
    tagged_processes,
    wait_dead,
    wait_until,
)

SLEEPER = [sys.executable, "-c", "import subprocess, sys, time; "
           "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); time.sleep(300)"]


def test_spawned_groups_carry_the_tag_and_stop_all_kills_them_and_their_children(tmp_path):
    owned = Owned()
    group = owned.spawn("sleeper", SLEEPER, log_path=tmp_path / "log")
    assert wait_until(lambda: len(group.members()) == 2, 10)
    assert os.getpgid(group.pid) == group.pid, "each child leads its own process group"
    pids = [p.pid for p in group.members()]
    assert {p.pid for p in tagged_processes(owned.tag)} >= set(pids)
    owned.stop_all()
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert tagged_processes(owned.tag) == []


def test_a_killed_group_reports_the_signal_not_a_clean_exit(tmp_path):
    """The trial records a killed driver's exit code: psutil must not reap the leader before its Popen."""
    for _ in range(5):  # the race it guards against was one kill in a few
        owned = Owned()
        group = owned.spawn("sleeper", SLEEPER, log_path=tmp_path / "log")
        assert wait_until(lambda g=group: len(g.members()) == 2, 10)
        group.kill()
        assert group.proc.returncode == -signal.SIGKILL
        owned.stop_all()


def test_reap_kills_what_a_sigkilled_harness_left(tmp_path):
    # A stand-in harness: a real process that owns a sleeper group, then dies by SIGKILL.
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from chaos.machine.processes import Owned
        owned = Owned()
        owned.spawn("sleeper", {SLEEPER!r})
        print(owned.tag, flush=True)
        time.sleep(300)
    """)
    harness = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    tag = harness.stdout.readline().strip()
    assert wait_until(lambda: len(tagged_processes(tag)) == 2, 10)
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    left = tagged_processes(tag)
    assert len(left) == 2, "the children outlive a SIGKILLed harness..."
    reaped = reap_orphans()
    assert reaped >= 2
    assert wait_until(lambda: tagged_processes(tag) == [], 10), "...until the next start reaps them"


def test_reap_leaves_processes_of_a_live_harness_alone(tmp_path):
    owned = Owned()
    try:
        group = owned.spawn("sleeper", SLEEPER)
        assert wait_until(lambda: len(group.members()) == 2, 10)
        reap_orphans()
        time.sleep(0.2)
        assert group.alive()
        assert group.proc.args and psutil.Process(group.pid).environ()[OWNER_VAR] == owned.tag
    finally:
        owned.stop_all()


def test_two_owners_in_one_process_never_stop_each_others_processes():
    first, second = Owned(), Owned()
    assert first.tag != second.tag
    a = first.spawn("sleeper-a", ["sleep", "30"])
    b = second.spawn("sleeper-b", ["sleep", "30"])
    try:
        second.stop_all()
        assert not b.alive()
        assert a.alive(), "stop_all of one harness killed another harness's process"
        reap_orphans()  # the owner (this process) lives: its processes are no orphans
        assert a.alive()
    finally:
        first.stop_all()


# A parent that forks a child, prints its pid and never reaps it: killed, the child stays a zombie.
NEGLECTFUL = [sys.executable, "-c", "import os, time\npid = os.fork()\nif pid == 0:\n    time.sleep(300)\n"
              "print(pid, flush=True)\ntime.sleep(300)"]


def test_a_killed_process_nobody_reaps_yet_counts_as_dead():
    """An executor's Python workers, orphaned by the kill, wait for init to reap them (1-2 s here): the kill
    is done when they have exited, not when their exit status is collected."""
    owned = Owned()
    parent = subprocess.Popen(NEGLECTFUL, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, OWNER_VAR: owned.tag})
    try:
        child = psutil.Process(int(parent.stdout.readline()))
        assert not dead(child)
        assert not wait_dead([child], timeout=0)
        kill_tree([child])
        assert child.status() == psutil.STATUS_ZOMBIE, "its parent lives and has not reaped it"
        assert dead(child)
        assert wait_dead([child], timeout=0)
    finally:
        parent.kill()
        parent.wait()


class ShellHere:
    """A host's shell run on this machine instead of over SSH: ``HostProcs`` sees the same commands and exit codes."""

    host = type("Host", (), {"name": "here"})()

    def run(self, command, timeout: float = 60.0, check: bool = False):
        from chaos.clusters.ssh.client import Ran

        text = command if isinstance(command, str) else " ".join(shlex.quote(w) for w in command)
        done = subprocess.run(["sh", "-c", text], capture_output=True, text=True, timeout=timeout)
        assert not check or done.returncode == 0, done.stderr
        return Ran(done.returncode, done.stdout, done.stderr)


def test_a_host_server_s_session_is_killed_whole_and_a_stop_kills_what_ignores_sigterm(tmp_path):
    """A server a host's ``HostProcs`` started (its own session, as PostgreSQL or Kafka there) dies with every child
    at a kill; a stop gives it its grace for SIGTERM, then SIGKILLs what ignored it (a paused one gets SIGCONT)."""
    from chaos.clusters.ssh.remote import HostProcs

    procs = HostProcs(ShellHere())
    stubborn = "trap '' TERM; sleep 300 & sleep 300 & wait"
    try:
        sid = procs.start(["sh", "-c", stubborn], log=str(tmp_path / "a.log"))
        assert wait_until(lambda: len(psutil.Process(sid).children()) == 2, 10)
        procs.kill_session(sid)
        assert procs.session_gone(sid)

        sid = procs.start(["sh", "-c", stubborn], log=str(tmp_path / "b.log"))
        assert wait_until(lambda: len(psutil.Process(sid).children()) == 2, 10)
        procs.signal_session(sid, "STOP")
        started = time.monotonic()
        procs.stop_session(sid, grace=1)
        assert wait_until(lambda: procs.session_gone(sid), 5)
        assert time.monotonic() - started >= 1  # the shell ignored SIGTERM: its grace ran out
    finally:
        procs.kill_all()
