"""Side PySpark versions (chaos/machine/spark_versions.py): what is listed, how --spark is read off a command line."""

from __future__ import annotations

import pytest

from chaos.errors import UserError
from chaos.machine import spark_versions as sparkenv


def test_spark_option_is_taken_out_wherever_it_stands():
    assert sparkenv.split_spark_option(["trial", "key-count", "--spark", "4.1.0", "--events", "9"]) == (
        "4.1.0", ["trial", "key-count", "--events", "9"])
    assert sparkenv.split_spark_option(["--spark=4.0.1", "campaign", "run"]) == ("4.0.1", ["campaign", "run"])
    assert sparkenv.split_spark_option(["trial", "x", "--conf", "spark.sql.x=1"]) == (
        None, ["trial", "x", "--conf", "spark.sql.x=1"])


def test_only_finished_environments_are_listed(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert sparkenv.installed() == {}
    for version, ready in (("4.1.0", True), ("4.0.2", False), ("notaversion", True)):
        folder = sparkenv.env_dir(version)
        (folder / "bin").mkdir(parents=True)
        (folder / "bin" / "python").touch()
        if ready:
            (folder / sparkenv.READY).write_text(version)
    # 4.0.2's install did not finish (no ready mark): not listed, and `spark add` starts it again.
    assert sparkenv.installed() == {"4.1.0": sparkenv.python_of("4.1.0")}
    with pytest.raises(UserError, match="is the installed one"):
        sparkenv.add(sparkenv.current_version())


def test_an_unwritable_cache_is_one_line(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    with pytest.raises(UserError, match="set XDG_CACHE_HOME to a writable directory"):
        sparkenv.add("4.0.9")
