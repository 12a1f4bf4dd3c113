"""The JVM settings a driver starts with: flags, stack, class archive (no JVM started here)."""

from __future__ import annotations

from chaos.driver.jvm_options import driver_java_options, executor_java_options
from chaos.machine.jvm.archive import archive_path, driver_archive, executor_archive
from chaos.machine.spark import APP_HEAP_START, QUICK_JVM_OPTIONS, spark_env


def test_driver_options_carry_flags_and_archive_only_when_given():
    assert driver_java_options({}) == "-Xss16m"
    quick = driver_java_options({"java_options": QUICK_JVM_OPTIONS, "class_archive": "/c/a.jsa"})
    assert quick == f"-Xss16m {QUICK_JVM_OPTIONS} {APP_HEAP_START} -XX:SharedArchiveFile=/c/a.jsa"
    assert "SharedArchiveFile" not in driver_java_options({"java_options": QUICK_JVM_OPTIONS, "class_archive": None})


def test_executors_get_their_own_archive_not_the_drivers():
    assert executor_java_options({}) == ""
    config = {"java_options": QUICK_JVM_OPTIONS, "class_archive": "/c/d.jsa", "executor_archive": "/c/e.jsa"}
    assert executor_java_options(config) == f"{QUICK_JVM_OPTIONS} {APP_HEAP_START} -XX:SharedArchiveFile=/c/e.jsa"
    assert executor_java_options({**config, "executor_archive": None}) == f"{QUICK_JVM_OPTIONS} {APP_HEAP_START}"


def test_daemon_options_reach_master_and_workers_only_when_asked(monkeypatch):
    monkeypatch.delenv("SPARK_DAEMON_JAVA_OPTS", raising=False)
    assert "SPARK_DAEMON_JAVA_OPTS" not in spark_env()
    assert spark_env(QUICK_JVM_OPTIONS)["SPARK_DAEMON_JAVA_OPTS"] == QUICK_JVM_OPTIONS
    monkeypatch.setenv("SPARK_DAEMON_JAVA_OPTS", "-Dmine=1")  # the user's own flags are kept
    assert spark_env(QUICK_JVM_OPTIONS)["SPARK_DAEMON_JAVA_OPTS"] == f"-Dmine=1 {QUICK_JVM_OPTIONS}"


def test_every_jvm_keeps_its_temporary_files_in_the_harness_folder(tmp_path, monkeypatch):
    """A SIGKILLed JVM deletes none of its temporary files (lz4's native library, spark-*, blockmgr-*,
    artifacts-*): they go to a folder the harness or cluster removes, not to /tmp, and the class archives
    (keyed by ``java_options``) stay the same for every folder."""
    monkeypatch.delenv("SPARK_DAEMON_JAVA_OPTS", raising=False)
    config = {"java_options": QUICK_JVM_OPTIONS, "tmp_dir": str(tmp_path / "tmp")}
    assert driver_java_options(config) == \
        f"-Xss16m {QUICK_JVM_OPTIONS} {APP_HEAP_START} -Djava.io.tmpdir={tmp_path / 'tmp'}"
    assert executor_java_options(config) == f"{QUICK_JVM_OPTIONS} {APP_HEAP_START} -Djava.io.tmpdir={tmp_path / 'tmp'}"
    env = spark_env(QUICK_JVM_OPTIONS, tmp_path / "cluster-tmp")
    # Master and workers, the executors' local directories and their Python workers' tempfile.
    assert env["SPARK_DAEMON_JAVA_OPTS"] == f"{QUICK_JVM_OPTIONS} -Djava.io.tmpdir={tmp_path / 'cluster-tmp'}"
    assert env["SPARK_LOCAL_DIRS"] == env["TMPDIR"] == str(tmp_path / "cluster-tmp")
    plain = spark_env()
    assert "SPARK_LOCAL_DIRS" not in plain and "java.io.tmpdir" not in plain.get("SPARK_DAEMON_JAVA_OPTS", "")


def test_archive_is_per_flag_set_and_not_built_without_an_owner(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert archive_path("") != archive_path(QUICK_JVM_OPTIONS)
    assert archive_path(QUICK_JVM_OPTIONS).parent == tmp_path / "streamchaos"
    assert archive_path(QUICK_JVM_OPTIONS, "executor") != archive_path(QUICK_JVM_OPTIONS)
    # The JVM maps an archive only with the class path it was dumped with: one archive per class path.
    assert archive_path(QUICK_JVM_OPTIONS, "driver", "/c/janino.jar") != archive_path(QUICK_JVM_OPTIONS)
    assert driver_archive(QUICK_JVM_OPTIONS) is None  # no process set to build it in: none, nothing written
    assert executor_archive(QUICK_JVM_OPTIONS, "", "spark://127.0.0.1:1") is None
    assert not (tmp_path / "streamchaos").exists()
