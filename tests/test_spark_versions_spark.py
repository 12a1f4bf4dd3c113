"""A trial on another PySpark version (``--spark``), and the Spark bug it finds there: SPARK-55058.

Up to 4.1, a query whose checkpoint lost its ``metadata`` file restarts under a new query id, so a sink that
skips a (query id, batch id) it already wrote writes the replayed batch again; 4.2 refuses such a checkpoint
(tests/test_trials_spark.py::test_spark_refuses_a_checkpoint_without_its_metadata_file). The version's
environment is added once (~30 s, ~0.5 GB from PyPI) and kept under the user's cache.
"""

from __future__ import annotations

import sqlite3

import pytest

from chaos.machine.spark_versions import installed
from tests.conftest import cli, left_by
from tests.test_kafka_spark import CONNECTOR_SPARK

pytestmark = pytest.mark.spark

OLD = "4.1.0"
ADDED = CONNECTOR_SPARK  # the Spark the Kafka connector tests add: one download for both


@pytest.mark.long
def test_a_lost_metadata_file_duplicates_a_batch_on_spark_4_1(tmp_path):
    if OLD not in installed():
        added = cli("spark", "add", OLD, cwd=tmp_path)
        assert added.rc == 0, added.stderr[-2000:]
    run = cli("--spark", OLD, "trial", "query-batch-dedup", "--events", "1000", "--seed", "5",
              "--keep", str(tmp_path / "run"), "--fault", "damage-checkpoint@2:committed/delete-metadata",
              "--fault", "kill-driver@3:sink-done", "--recovery-timeout", "60", "--json", cwd=tmp_path)
    assert run.rc == 1, run.stderr[-2000:]  # a violation of the declared exactly-once
    r = run.json
    assert r["spark"] == OLD
    assert r["outcome"] == "drained" and r["verdict"] == "at-least-once" and r["meets"] is False
    # The batch the killed driver had written (3) was written again, by the same query under a new id.
    assert {d["batch_id"] for d in r["deliveries"] if d["batch_id"] == 3} == {3}
    assert sum(d["batch_id"] == 3 for d in r["deliveries"]) == 2
    with sqlite3.connect(tmp_path / "run" / "sink" / "sink.sqlite") as conn:
        ids = conn.execute("SELECT query_id, min(batch_id), max(batch_id) FROM applied GROUP BY query_id "
                           "ORDER BY 2").fetchall()
    assert len(ids) == 2 and ids[0][1:] == (0, 3) and ids[1][1] == 3, ids
    assert left_by(run.pid) == []


@pytest.mark.long
def test_a_query_stopped_on_one_spark_resumes_on_another_exactly_once(tmp_path):
    """stop-driver/upgrade=V: a clean stop at a committed batch, then the same checkpoint on the newer version
    (in local mode: the cluster runs the first one); the verdict and the consistent cut cover both. A driver
    killed after the upgrade restarts on the new version, and no standby was booted for it. The upgrade is the
    direction users take (a downgrade runs the same code with the versions swapped)."""
    from chaos.machine.spark_versions import current_version

    if OLD not in installed():
        assert cli("spark", "add", OLD, cwd=tmp_path).rc == 0
    first, second = OLD, current_version()
    run = cli("--spark", OLD, "trial", "key-count", "--events", "2000",
              "--keep", str(tmp_path / "run"), "--fault", f"stop-driver@4:committed/upgrade={second}",
              "--fault", "kill-driver@6:sink-done", "--json", cwd=tmp_path)
    assert run.rc == 0, run.stderr[-2000:]
    r = run.json
    assert r["spark"] == first and r["verdict"] == "exactly-once" and r["consistent_cut"]["ok"] is True
    assert r["drivers"][1]["spark"] == second and "resumes on PySpark" in r["drivers"][1]["why"]
    assert r["drivers"][2]["spark"] == second and "no standby" in r["drivers"][2]["why"]
    logs = [(tmp_path / "run" / "logs" / f"driver-{k}.log").read_text() for k in (0, 1, 2)]
    assert f"streamchaos: Spark {first} (spark://" in logs[0]
    assert all(log.count("streamchaos: Spark ") == 1 and f"Spark {second} (local[2])" in log for log in logs[1:])
    assert left_by(run.pid) == []


def test_an_added_version_imports_this_harness_from_wherever_it_runs(tmp_path):
    """streamchaos in a virtual environment (as users install it): the added environment's interpreter, started
    outside the repository, imports this checkout's harness and its own pyspark, not a base interpreter's."""
    import os
    import subprocess
    from pathlib import Path

    import chaos
    from chaos.machine.spark_versions import BASE_SITE_VAR, python_for

    if ADDED not in installed():
        assert cli("spark", "add", ADDED, cwd=tmp_path).rc == 0
    python = python_for(ADDED)
    assert os.environ[BASE_SITE_VAR]
    code = "import chaos, pyspark; print(chaos.__file__); print(pyspark.__version__)"
    seen = subprocess.run([str(python), "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert seen.returncode == 0, seen.stderr
    where, version = seen.stdout.split()
    assert Path(where).resolve() == Path(chaos.__file__).resolve() and version == ADDED
