"""Every server a trial starts listens on 127.0.0.1 only: sampled from the kernel's socket table while it runs."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from chaos.clusters.postgres import find_bindir
from tests.conftest import left_by, require_java

pytestmark = pytest.mark.spark
LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


def listening(pids: set[int]) -> dict[tuple[str, int], str]:
    found = {}
    for conn in psutil.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids:
            try:
                what = " ".join(psutil.Process(conn.pid).cmdline())
            except psutil.Error:
                continue
            found[(conn.laddr.ip, conn.laddr.port)] = what
    return found


@pytest.mark.skipif(find_bindir() is None, reason="no PostgreSQL server binaries on this machine")
def test_a_trials_servers_listen_on_loopback_only(tmp_path):
    """pg-append: the Spark master, workers, executors and drivers, the event log, the controller, the embedded
    Toxiproxy and its proxies, PostgreSQL and the Python workers, sampled every half second."""
    require_java()
    trial = subprocess.Popen([sys.executable, "-m", "chaos", "trial", "pg-append", "--events", "1000",
                              "--fault", "kill-driver@3:sink-done", "--keep", str(tmp_path / "run")],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: dict[tuple[str, int], str] = {}
    try:
        while trial.poll() is None:
            seen |= listening({trial.pid, *(p.pid for p in left_by(trial.pid))})
            time.sleep(0.5)
        out, err = trial.communicate(timeout=60)
    finally:
        if trial.poll() is None:
            trial.kill()
    assert trial.returncode == 0, err[-2000:]
    elsewhere = {addr: what[:120] for addr, what in seen.items() if addr[0] not in LOOPBACK}
    assert elsewhere == {}, elsewhere
    kinds = " ".join(seen.values())
    for server in ("deploy.master.Master", "deploy.worker.Worker", "chaos.driver", "postgres", "chaos trial"):
        assert server in kinds, f"no listening socket of {server} was seen: {sorted(set(seen.values()))}"
