"""The class archives' three states as ``doctor`` reports them, and the bounded retry of a failed build. No JVM."""

from __future__ import annotations

import json
import time

import pytest

from chaos.cli import doctor
from chaos.machine.jvm import archive
from chaos.machine.jvm.unsigned import quick_class_path
from chaos.machine.spark import QUICK_JVM_OPTIONS


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(archive, "_java_identity", lambda: b"a JDK")
    return tmp_path / "streamchaos"


def paths() -> dict[str, object]:
    class_path = quick_class_path(build=False)
    return {role: archive.archive_path(QUICK_JVM_OPTIONS, role, class_path) for role in ("driver", "executor")}


def test_doctor_tells_built_failed_and_not_built_apart_for_both_archives(cache):
    check = doctor.check_class_archive()
    assert check.status == "ok" and check.detail.count("not built yet") == 2

    p = paths()
    p["driver"].parent.mkdir(parents=True)
    p["driver"].write_bytes(b"\0" * (3 << 20))
    p["executor"].with_suffix(".failed").write_text(json.dumps(
        {"tries": 1, "reason": "the dumping JVM wrote no archive (it did not exit normally)", "at": time.time()}))
    check = doctor.check_class_archive()
    assert check.status == "warn"
    assert "driver: built (3 MiB, key" in check.detail
    assert "executor: FAILED at" in check.detail and "did not exit normally" in check.detail
    assert "(1 of 3 tries)" in check.detail
    assert "streamchaos doctor --rebuild-archives" in check.fix

    # A record of an older streamchaos (plain text) reads as one try with its text as the reason.
    p["executor"].with_suffix(".failed").write_text("exit 0, finished True\n")
    assert "FAILED at" in doctor.check_class_archive().detail and "exit 0, finished True" in \
        doctor.check_class_archive().detail

    assert doctor.clear_archive_failures() == [p["executor"].with_suffix(".failed")]
    assert "executor: not built yet" in doctor.check_class_archive().detail


def test_a_failed_build_is_retried_on_an_idle_machine_a_bounded_number_of_times(cache, monkeypatch):
    path = paths()["executor"]
    path.parent.mkdir(parents=True)
    assert archive._may_try(path)  # never tried
    failed = path.with_suffix(".failed")
    failed.write_text(json.dumps({"tries": 1, "reason": "x", "at": time.time()}))
    monkeypatch.setattr(archive.os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    assert archive._may_try(path)  # the next start, idle: again
    monkeypatch.setattr(archive.os, "getloadavg", lambda: (50.0, 50.0, 50.0))
    assert not archive._may_try(path)  # loaded: not now (the try is not spent)
    monkeypatch.setattr(archive.os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    failed.write_text(json.dumps({"tries": archive.MAX_TRIES, "reason": "x", "at": time.time()}))
    assert not archive._may_try(path)  # tries spent: until doctor --rebuild-archives
    # Without a harness (no owned processes) nothing is built, the failure stays as it was.
    assert archive._archive(path, None, lambda out: []) is None and failed.exists()
