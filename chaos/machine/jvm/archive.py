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

    python -m chaos.machine.jvm.archive OUT.jsa JAVA_OPTIONS            # the dumping driver (driver_archive)
    python -m chaos.machine.jvm.archive --executor OUT.jsa JAVA_OPTIONS MASTER   # its executor dumps (executor_archive)
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from chaos.machine.jvm import cache_dir
from chaos.machine.processes import Owned, wait_until

BUILD_TIMEOUT = 300.0
MAX_TRIES = 3  # builds of one archive before the harness stops trying (doctor --rebuild-archives resets)
IDLE_LOAD = 0.75  # a retry waits for a 1-minute load average below this share of the cores


def _java_identity() -> bytes:
    from chaos.machine.java import java_binary

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


def failure(path: Path) -> dict | None:
    """The record of failed builds of ``path`` (``.failed`` beside it): when, why, how many tries; or None."""
    failed = path.with_suffix(".failed")
    try:
        text = failed.read_text()
    except OSError:
        return None
    try:
        record = json.loads(text)
        if isinstance(record, dict) and "tries" in record:
            return record
    except ValueError:
        pass
    # Written by an older streamchaos: one try, its reason as the text.
    return {"tries": 1, "reason": text.strip(), "at": failed.stat().st_mtime}


def will_build(path: Path) -> bool:
    """Would the next harness start build ``path`` (missing, and not given up on)? The CLI says so first:
    a machine's first start spends about two minutes on its archives."""
    return not path.exists() and _may_try(path)


def _may_try(path: Path) -> bool:
    """A failed build is retried at later harness starts, at most ``MAX_TRIES`` in all, and only on a
    machine idle enough to build it (the load that likely made it fail: a JVM's dump cut short)."""
    record = failure(path)
    if record is None:
        return True
    return int(record.get("tries", 1)) < MAX_TRIES and os.getloadavg()[0] < IDLE_LOAD * (os.cpu_count() or 1)


def _archive(path: Path, owned: Owned | None, args: Callable[[str], list[str]]) -> Path | None:
    """Build ``path`` with ``python -m chaos.machine.jvm.archive *args(partial)``, atomically. A failed build is
    recorded (``.failed``: when, why, tries) and retried by later starts while tries remain (``_may_try``);
    ``streamchaos doctor --rebuild-archives`` clears the record."""
    if path.exists() or owned is None or not _may_try(path):
        return path if path.exists() else None
    from chaos.machine.spark import spark_env

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:  # an unwritable cache: JVMs start without the archive
        return None
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    group = owned.spawn(path.stem, [sys.executable, "-m", "chaos.machine.jvm.archive", *args(str(partial))],
                        env=spark_env())
    # Python exits first; the JVM that dumps writes the archive as it exits, after it: wait for the
    # whole group (the driver's JVM), and for any executor still writing (a child of the worker).
    done = wait_until(lambda: not group.alive() and not group.members() and not _dumping(partial),
                      BUILD_TIMEOUT, 0.2)
    rc = group.proc.returncode
    owned.end(group)
    for leftover in path.parent.glob(f"{partial.name}.*"):  # executors' dumps the build did not keep
        leftover.unlink(missing_ok=True)
    if not done or rc != 0 or not partial.exists() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        reason = (f"the build did not end within {BUILD_TIMEOUT:.0f}s" if not done
                  else f"the dumping process exited with {rc}" if rc != 0
                  else "the dumping JVM wrote no archive (it did not exit normally)")
        tries = int((failure(path) or {}).get("tries", 0)) + 1
        path.with_suffix(".failed").write_text(json.dumps({"tries": tries, "reason": reason, "at": time.time()}))
        return None
    path.with_suffix(".failed").unlink(missing_ok=True)
    partial.replace(path)  # atomic: a concurrent build of the same archive is harmless
    return path


def _dumping(partial: Path, exact: bool = False) -> bool:
    """Is a JVM that dumps to ``partial`` (unless ``exact``, or to ``partial.<executor id>``) still alive?"""
    import psutil

    flag = f"-XX:ArchiveClassesAtExit={partial}"
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(arg == flag or (not exact and arg.startswith(flag)) for arg in proc.info["cmdline"] or []):
                return True
        except psutil.Error:
            continue
    return False


def _stream_probe(spark) -> None:
    """What a trial's query runs, in miniature: a Python data source's micro-batches (its planner in the
    driver, Arrow batches from the executors' Python workers), a stateful aggregation and a foreachBatch
    sink that collects each batch; then a rate source's, for the JVM-only pipelines."""
    import tempfile

    from chaos.machine.jvm.probe_source import PROBE_SOURCE_NAME, ProbeSource

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
    probe; then it is asked to stop while the application still runs, and dumps the archive as it exits.

    Not at the application's end: the worker then kills its executors, SIGKILL 10 s after SIGTERM, and a
    dump that takes longer (a loaded machine) is cut short and writes nothing. Each executor dumps to
    ``out.<executor id>`` (the master starts a new one when the first exits); the first one's is kept."""
    spark = _session("streamchaos-executor-archive", master, {
        "spark.cores.max": "1",
        "spark.executor.extraJavaOptions": f"{java_options} -XX:ArchiveClassesAtExit={out}.{{{{EXECUTOR_ID}}}}",
        "spark.driver.extraClassPath": class_path, "spark.executor.extraClassPath": class_path})
    spark.sparkContext.parallelize(range(100), 2).mapPartitions(lambda it: [sum(it)]).collect()
    spark.createDataFrame([(i % 7, str(i)) for i in range(100)], "k long, v string").groupBy("k").count().toPandas()
    _stream_probe(spark)
    sc = spark.sparkContext._jsc.sc()
    ids = [i for i in sc.getExecutorIds().mkString(",").split(",") if i]
    sc.schedulerBackend().stopExecutors()
    if ids:
        dump = Path(f"{out}.{ids[0]}")
        wait_until(lambda: dump.exists() and not _dumping(dump, exact=True), BUILD_TIMEOUT - 60, 0.2)
        if dump.exists() and not _dumping(dump, exact=True) and dump.stat().st_size:
            dump.replace(out)
    spark.stop()


if __name__ == "__main__":
    if sys.argv[1] == "--executor":
        _dump_executor(*sys.argv[2:6])
    else:
        _dump(*sys.argv[1:5])
