"""A project whose own modules bear the harness's package names (``chaos/``, ``reports/``, ``properties.py``,
each raising if imported) runs its job with streamchaos from its directory (drivers get it on their path), or
with itself on ``PYTHONPATH`` (every process gets it, the executors' Python workers too): the harness's
processes import the harness's packages, the job its own module (chaos/machine/own_packages.py). Docker nodes:
tests/test_nodes_spark.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import cli, left_by
from tests.shadow_project import JOB, JOB_ARGS, make_project, marks

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("on_python_path", [False, pytest.param(True, marks=pytest.mark.long)])
def test_a_job_beside_namesakes_of_the_harness_packages_runs_on_the_harness_own(tmp_path, on_python_path):
    project = make_project(tmp_path / "project", chaos=not on_python_path)
    env = {**os.environ, "PYTHONPATH": str(project)} if on_python_path else None
    run = cli("trial", JOB, *JOB_ARGS, "--events", "600", "--fault", "kill-driver@1:sink-done", "--json",
              "--keep", str(project / "runs" / "t"), cwd=project, env=env, script=True)
    assert run.rc == 0, run.stderr[-3000:]
    assert run.json["verdict"] == "exactly-once" and run.json["faults"][0]["fired"]
    assert marks(project / "runs") == []  # no driver, executor or Python worker imported the project's modules
    assert left_by(run.pid) == []


@pytest.mark.long
def test_the_plugin_in_a_project_that_puts_its_root_first_checks_and_reports(tmp_path):
    """``pythonpath = .`` and a root conftest put the project's root ahead of the install in pytest's process;
    ``--chaos-report`` then imports the report's package: the harness's, and the session says which names clash.
    (pytest 9 applies ``pythonpath`` before it loads plugins: a project's own ``chaos/`` package would hide the
    plugin itself, ``chaos.pytest_plugin``, before any code of the harness runs; docs/pipelines.md says so.)"""
    project = make_project(tmp_path / "project", chaos=False)
    (project / "pytest.ini").write_text("[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n")
    (project / "conftest.py").write_text("import sys\n\nPROJECT_FIRST = sys.path[0]\n")
    (project / "test_orders.py").write_text(
        "import pytest\n\n\n"
        "@pytest.mark.consistency(expect='exactly-once', examples=['kill-driver@1:sink-done'])\n"
        "def test_counts_are_exactly_once(chaos_check):\n"
        f"    chaos_check('{JOB.replace('.py', '')}', schema={JOB_ARGS[1]!r}, sink={JOB_ARGS[3]!r}, "
        f"key={JOB_ARGS[5]!r})\n")
    report = tmp_path / "chaos.html"
    script = shutil.which("pytest") or os.path.join(os.path.dirname(sys.executable), "pytest")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, script, "-q", "-W", "default", f"--basetemp={tmp_path / 'base'}", "--chaos-trials", "1",
         "--chaos-events", "600", "--chaos-shrink-trials", "1", f"--chaos-report={report}"],
        cwd=project, env=env, capture_output=True, text=True, timeout=1200)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "1 passed" in out and report.exists() and "streamchaos report:" in out
    assert "has the name of a streamchaos package" in out and "properties, reports" in out
    assert marks(tmp_path / "base") == []
