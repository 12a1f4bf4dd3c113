"""No process outlives the harness: after Ctrl-C, and after SIGKILL once the next start reaps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest

from chaos.machine.processes import wait_until
from tests.conftest import cli, left_by

pytestmark = pytest.mark.spark


def start_trial(tmp_path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "chaos", "trial", "passthrough-append", "--cluster", "standalone",
         "--events", "20000", "--keep", str(tmp_path / "run")],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def driver_running(pid: int) -> bool:
    """The trial is in full swing: its cluster and a driver JVM are up."""
    cmds = []
    for p in left_by(pid):
        try:
            cmds.append(" ".join(p.cmdline()))
        except psutil.Error:  # exited (or a zombie) since it was listed: spark-class's shells come and go
            continue
    return any("chaos.driver" in c for c in cmds) and any("deploy.worker.Worker" in c for c in cmds)


def test_ctrl_c_stops_every_process_the_harness_started(tmp_path):
    harness = start_trial(tmp_path)
    try:
        assert wait_until(lambda: driver_running(harness.pid), 180, 0.5), "the trial never got going"
        harness.send_signal(signal.SIGINT)
        _, err = harness.communicate(timeout=120)
        assert harness.returncode == 130
        assert "interrupted" in err and "Traceback" not in err
        assert left_by(harness.pid) == []
    finally:
        if harness.poll() is None:
            harness.kill()


def test_sigkilled_harness_leaves_processes_that_the_next_start_reaps(tmp_path):
    harness = start_trial(tmp_path)
    try:
        assert wait_until(lambda: driver_running(harness.pid), 180, 0.5), "the trial never got going"
        os.kill(harness.pid, signal.SIGKILL)
        harness.wait(30)
        orphans = left_by(harness.pid)
        assert len(orphans) >= 4, "master, workers and driver survive a SIGKILLed harness"
        run = cli("reap", cwd=tmp_path)
        assert run.rc == 0 and "reaped" in run.stdout
        gone = wait_until(lambda: left_by(harness.pid) == [], 30)
        assert gone, [p.cmdline()[:3] for p in left_by(harness.pid) if p.is_running()]
        assert not any(psutil.pid_exists(p.pid) and p.status() != psutil.STATUS_ZOMBIE for p in orphans)
    finally:
        if harness.poll() is None:
            harness.kill()
