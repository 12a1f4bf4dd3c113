"""A class-data-sharing (AppCDS) archive of a Spark driver's classes, built once per machine.

A trial boots a driver JVM for every incarnation (and one per standby). Most of a boot is loading and
verifying the same ~15,000 classes from Spark's jars; a dynamic CDS archive (JDK 13+) keeps them
parsed in a file every driver maps instead. ``driver_archive()`` returns the archive for this JDK,
PySpark and flag set, building it on first use: one driver runs a small batch and streaming workload
with ``-XX:ArchiveClassesAtExit`` and the JVM writes the archive as it exits (~20 s, ~150 MB under
``~/.cache/streamchaos``). Drivers then start with ``-XX:SharedArchiveFile``; the JVM's default
``-Xshare:auto`` ignores an archive that does not match (another class path, e.g. a pipeline's hooks
jar), so a stale or foreign archive costs nothing but its benefit. ``benchmarks/jvm_boot.py`` measures
what it saves.

Executors get an archive of their own (``executor_archive()``): their class path is not the driver's
(the worker puts ``slf4j-api`` first), so the driver's archive does not match them. It is dumped by
one executor of a small application on the harness's own cluster, as that executor exits; executors
then start with ~40 % less CPU (here: 4.5 -> 2.8 CPU-s to the end of their first jobs).

    python -m chaos.jvm.archive OUT.jsa JAVA_OPTIONS            # the dumping driver (driver_archive)
    python -m chaos.jvm.archive --executor OUT.jsa JAVA_OPTIONS MASTER   # its executor dumps (executor_archive)
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from chaos.jvm import cache_dir
from chaos.procs import Owned, wait_until

BUILD_TIMEOUT = 300.0


def _java_identity() -> bytes:
    from chaos.java import java_binary

    binary = java_binary()
    if binary is None:
        return b""
    try:
        done = subprocess.run([binary, "-version"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return b""
    return binary.encode() + done.stderr + done.stdout


# Bumped when the dumping workload changes, so archives built by an older one are rebuilt.
WORKLOAD = b"2"


def archive_path(java_options: str, role: str = "driver", class_path: str = "") -> Path:
    """Where the archive for JVMs started with ``java_options`` and ``class_path`` first on their class
    path lives: the JVM uses an archive only with the class path it was dumped with."""
    import pyspark

    key = hashlib.sha256(_java_identity() + pyspark.__version__.encode() + java_options.encode()
                         + class_path.encode() + WORKLOAD).hexdigest()[:16]
    return cache_dir() / f"{role}-classes-{key}.jsa"


def driver_archive(java_options: str, class_path: str = "", master: str = "local[1]",
                   owned: Owned | None = None) -> Path | None:
    """The archive for drivers started with ``java_options`` (and ``class_path`` first), built if missing
    when ``owned`` (the harness's process set, so an interrupted build leaves no JVM behind) is given,
    by a driver of ``master`` (the harness's cluster: the client's classes too). None when it cannot be
    built: drivers then simply start without it."""
    return _archive(archive_path(java_options, "driver", class_path), owned,
                    lambda out: [out, java_options, class_path, master])


def executor_archive(java_options: str, class_path: str, master: str, owned: Owned | None = None) -> Path | None:
    """The archive for executors started with ``java_options`` (and ``class_path`` first), built if
    missing by an application on ``master`` (the harness's cluster, with a free core); None when it
    cannot be built."""
    return _archive(archive_path(java_options, "executor", class_path), owned,
                    lambda out: ["--executor", out, java_options, class_path, master])


def _archive(path: Path, owned: Owned | None, args: Callable[[str], list[str]]) -> Path | None:
    """Build ``path`` with ``python -m chaos.jvm.archive *args(partial)``, atomically. A failed build is
    not retried for a day (``.failed`` beside it): every harness start would pay its timeout again."""
    failed = path.with_suffix(".failed")
    if path.exists() or owned is None or (failed.exists() and time.time() - failed.stat().st_mtime < 86400):
        return path if path.exists() else None
    from chaos.cluster import spark_env

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:  # an unwritable cache: JVMs start without the archive
        return None
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    group = owned.spawn(path.stem, [sys.executable, "-m", "chaos.jvm.archive", *args(str(partial))], env=spark_env())
    # Python exits first; the JVM that dumps writes the archive as it exits, after it: wait for the
    # whole group (the driver's JVM), and for any executor still writing (a child of the worker).
    done = wait_until(lambda: not group.alive() and not group.members() and not _dumping(partial),
                      BUILD_TIMEOUT, 0.2)
    ok = done and group.proc.returncode == 0
    group.kill()
    owned.forget(group)
    if not ok or not partial.exists() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        failed.write_text(f"exit {group.proc.returncode}, finished {done}\n")
        return None
    partial.replace(path)  # atomic: a concurrent build of the same archive is harmless
    return path


def _dumping(partial: Path) -> bool:
    """Is a JVM that dumps to ``partial`` still alive (an executor, which the worker started)?"""
    import psutil

    flag = f"-XX:ArchiveClassesAtExit={partial}"
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if flag in (proc.info["cmdline"] or []):
                return True
        except psutil.Error:
            continue
    return False


def _stream_probe(spark) -> None:
    """What a trial's query runs, in miniature: a Python data source's micro-batches (its planner in the
    driver, Arrow batches from the executors' Python workers), a stateful aggregation and a foreachBatch
    sink that collects each batch; then a rate source's, for the JVM-only pipelines."""
    import tempfile

    from chaos.jvm.probe_source import PROBE_SOURCE_NAME, ProbeSource

    spark.dataSource.register(ProbeSource)
    with tempfile.TemporaryDirectory(prefix="streamchaos-archive-") as tmp:
        python = (spark.readStream.format(PROBE_SOURCE_NAME).load()
                  .groupBy("k").agg({"*": "count", "v": "sum"})
                  .writeStream.outputMode("update").foreachBatch(lambda df, _: df.collect())
                  .option("checkpointLocation", f"{tmp}/python").start())
        rate = (spark.readStream.format("rate").option("rowsPerSecond", "50").load()
                .selectExpr("value % 5 AS k").groupBy("k").count()
                .writeStream.outputMode("update").format("memory").queryName("archive_probe")
                .option("checkpointLocation", f"{tmp}/rate").start())
        for query in (python, rate):
            deadline = time.monotonic() + 120
            while (time.monotonic() < deadline and query.isActive
                   and (query.lastProgress or {}).get("batchId", -1) < 2):
                time.sleep(0.2)
            query.stop()


def _session(name: str, master: str, conf: dict[str, str]):
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(name)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2"))
    for key, value in conf.items():
        if value:
            builder = builder.config(key, value)
    return builder.getOrCreate()


def _dump(out: str, java_options: str, class_path: str = "", master: str = "local[1]") -> None:
    """Run what a trial's driver runs (session, a batch aggregation, the streaming probe) so the archive
    holds those classes; the JVM writes it when this process's gateway exits."""
    spark = _session("streamchaos-class-archive", master, {
        "spark.cores.max": "2",
        "spark.driver.extraJavaOptions": f"-Xss16m {java_options} -XX:ArchiveClassesAtExit={out}",
        "spark.driver.extraClassPath": class_path, "spark.executor.extraClassPath": class_path})
    spark.range(100).selectExpr("id % 7 AS k").groupBy("k").count().collect()
    _stream_probe(spark)
    spark.stop()


def _dump_executor(out: str, java_options: str, class_path: str, master: str) -> None:
    """One executor (one core) runs what trials' executors run: Python workers, a shuffle, the streaming
    probe; it dumps the archive when the application stops and it exits."""
    spark = _session("streamchaos-executor-archive", master, {
        "spark.cores.max": "1",
        "spark.executor.extraJavaOptions": f"{java_options} -XX:ArchiveClassesAtExit={out}",
        "spark.driver.extraClassPath": class_path, "spark.executor.extraClassPath": class_path})
    spark.sparkContext.parallelize(range(100), 2).mapPartitions(lambda it: [sum(it)]).collect()
    spark.createDataFrame([(i % 7, str(i)) for i in range(100)], "k long, v string").groupBy("k").count().toPandas()
    _stream_probe(spark)
    spark.stop()


if __name__ == "__main__":
    if sys.argv[1] == "--executor":
        _dump_executor(*sys.argv[2:6])
    else:
        _dump(*sys.argv[1:5])
