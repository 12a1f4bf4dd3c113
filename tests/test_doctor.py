"""``doctor``'s check that Spark's Python workers import the harness from where this process does. No JVM."""

from __future__ import annotations

import sys

from chaos.cli import doctor


def test_doctor_fails_when_spark_python_workers_cannot_import_the_harness(tmp_path, monkeypatch):
    """Workers are this interpreter started in an executor's directory: one that finds no harness there
    (here: without site-packages, as with an editable install pointing at a removed checkout) fails."""
    assert doctor.check_worker_imports().status == "ok"
    bare = tmp_path / "python-without-site"
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    bare.chmod(0o755)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setattr(sys, "executable", str(bare))
    check = doctor.check_worker_imports()
    assert check.status == "fail" and "cannot import the harness" in check.detail and "pip install -e" in check.fix
