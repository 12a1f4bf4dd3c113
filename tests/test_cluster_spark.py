"""The harness's standalone cluster starts in a runs/ directory that an earlier harness used."""

from __future__ import annotations

import pytest

from chaos.clusters.standalone import StandaloneCluster
from chaos.machine.java import require_java
from chaos.machine.processes import Owned

pytestmark = pytest.mark.spark

STALE = "26/01/01 00:00:00 INFO Master: I have been elected leader! New state: ALIVE  (an earlier start)\n"


def test_a_second_start_in_the_same_directory_waits_for_its_own_master(tmp_path):
    # What an earlier harness's master left in the same directory: its "ALIVE" must not count for this one,
    # or the worker starts before this master leads, is refused, and registers only on its retry (10-15 s).
    require_java()
    (tmp_path / "master.log").write_text(STALE)
    owned = Owned()
    cluster = StandaloneCluster(owned, tmp_path, workers=1, worker_cores=1, worker_memory="512m")
    try:
        cluster.start()
        log = (tmp_path / "master.log").read_text()
    finally:
        cluster.stop()
        owned.stop_all()
    assert "an earlier start" not in log
    assert log.count("New state: ALIVE") == 1
    # Started once this master was leader, the worker registered at its first attempt.
    assert log.count("Registering worker") == 1
