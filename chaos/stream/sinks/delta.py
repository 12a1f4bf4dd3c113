"""Delta Lake as a sink: Delta's jars for the running Spark (from Maven), and the table read back without Spark.

Delta publishes one ``delta-spark_X.Y_2.13`` artifact per Spark minor version it supports (Delta 4.4: Spark
4.0-4.2). Where the repositories serve none for the running Spark, the error names the way out: a Spark version
Delta supports (``streamchaos spark add 4.2.0``, then ``streamchaos --spark 4.2.0 ...``).

The verdict reads the table with delta-rs (the ``deltalake`` package), not with the Spark that wrote it, at the
version the trial ended with; the commits (``_delta_log/N.json``, one JSON action per line, as the Delta protocol
lays them out) give the sink's write history: what each commit added, for which batch, in which incarnation.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from chaos.machine.maven import Coordinates, available, first_error, not_served, not_shipped, resolve

DELTA_VERSION = "4.4.0"
# Delta's SQL (MERGE INTO, the txn options' checks) and its catalog: set when the session starts.
SESSION_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Delta rebuilds the table's state from its log in 50 tasks by default, in every batch: sized for a trial's
    # tables of a few thousand rows, as the harness sizes shuffles (2 partitions), it is 2 tasks.
    "spark.databricks.delta.snapshotPartitions": "2",
    # Delta's log of a local table written through DeltaLogBarrier (log_barrier_jar): a streaming write's sink-write.
    "spark.delta.logStore.file.impl": "streamchaos.DeltaLogBarrier",
}
# Each commit's ``commitInfo.userMetadata`` (a session setting Delta copies into every commit): the incarnation
# of the driver that made it, so the write history says which driver wrote a batch twice.
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
WAY_OUT = "run on a Spark Delta supports (streamchaos spark add 4.2.0, then streamchaos --spark 4.2.0 ...)"


def artifact(spark_version: str) -> Coordinates:
    """Delta's Spark artifact for ``spark_version`` (its Scala and Spark jars are the cluster's own)."""
    minor = ".".join(spark_version.split(".")[:2])
    return Coordinates("io.delta", f"delta-spark_{minor}_2.13", DELTA_VERSION,
                       exclusions=(("org.apache.spark", "spark-sql_2.13"),))


def _refusal(what: Coordinates, output: str) -> str:
    if not_served(output):
        return (f"Delta Lake {DELTA_VERSION} for this Spark ({what}) is not served by the Maven repositories this "
                f"machine reaches: {WAY_OUT}")
    return first_error(what, output)


def _running() -> str:
    import pyspark

    return pyspark.__version__


def delta_unavailable(spark_version: str | None = None, *, say=None) -> str | None:
    """None when Delta's jars for ``spark_version`` (default: the running PySpark's) are cached or resolve now,
    else the one line saying why not and the way out."""
    return available(artifact(spark_version or _running()), say=say, refusal=_refusal)


def delta_jars(*, say=None) -> list[Path]:
    """Delta's jars for the running PySpark that its own jars do not already hold."""
    from chaos.machine.spark import spark_home

    folder = resolve(artifact(_running()), say=say, refusal=_refusal)
    return not_shipped(folder, Path(spark_home()) / "jars")


def delta_application_jars(*, say=None) -> list[Path]:
    """Every jar a Delta trial's application holds: Delta's, and the hooks ``SESSION_CONF`` names
    (``DeltaLogBarrier``, built beside the hooks jar whose ``Barrier`` it calls)."""
    from chaos.machine.jvm import hooks_jar

    return [*delta_jars(say=say), hooks_jar(), log_barrier_jar(say=say)]


def log_barrier_jar(*, say=None) -> Path:
    """``streamchaos.DeltaLogBarrier`` (chaos/machine/jvm/delta): Delta's streaming sink's ``sink-write``, built
    against this Spark's and Delta's jars and the hooks' ``Barrier``."""
    from chaos.machine.jvm import built_jar, hooks_jar
    from chaos.machine.spark import spark_home

    delta = resolve(artifact(_running()), say=say, refusal=_refusal) / "jars"
    sources = sorted((Path(__file__).parents[2] / "machine" / "jvm" / "delta").glob("*.java"))
    class_path = ":".join([f"{spark_home()}/jars/*", f"{delta}/*", str(hooks_jar())])
    return built_jar("delta-hooks", sources, class_path, f"{_running()}-{DELTA_VERSION}")


def log_barrier_conf(controller: str, incarnation: int, root: str) -> dict[str, str]:
    """The session settings that make ``DeltaLogBarrier`` report ``sink-write`` of the streaming Delta table at
    ``root`` to ``controller`` (read from each commit's Hadoop configuration, which carries the session's)."""
    return {"spark.streamchaos.delta.controller": controller, "spark.streamchaos.delta.incarnation": str(incarnation),
            "spark.streamchaos.delta.phases": "sink-write", "spark.streamchaos.delta.root": root}


def read_table(path: Path, schema: dict[str, pl.DataType] | None = None) -> pl.DataFrame:
    """The table's ``schema`` columns (every column: None) at its latest version, read by delta-rs; an empty frame
    where no commit was made (the query never wrote)."""
    log = Path(path) / "_delta_log"
    if not log.is_dir() or not any(log.glob("*.json")):
        return pl.DataFrame(schema=schema)
    from deltalake import DeltaTable

    frame = pl.from_arrow(DeltaTable(str(path)).to_pyarrow_table(columns=list(schema) if schema else None))
    assert isinstance(frame, pl.DataFrame)
    return frame.cast(schema) if schema else frame  # type: ignore[arg-type]


def commits(path: Path) -> list[dict]:
    """Every commit of the table, oldest first: ``version``, ``operation``, the rows it wrote (``rows``: its
    metrics' output or source rows, else the added files' ``numRecords``), the streaming batch (``epochId`` of a
    streaming write), the ``txn`` a write carried, and the ``userMetadata`` decoded where it is JSON."""
    log = Path(path) / "_delta_log"
    found = []
    for entry in sorted(log.glob("*.json"), key=lambda p: int(p.stem)) if log.is_dir() else []:
        commit: dict = {"version": int(entry.stem), "rows": -1, "txn": None, "batch": None, "metadata": None,
                        "operation": None}
        added = 0
        for line in entry.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            if "add" in action:
                stats = json.loads(action["add"].get("stats") or "{}")
                added += int(stats.get("numRecords", 0))
            elif "txn" in action:
                commit["txn"] = {"app": action["txn"]["appId"], "version": action["txn"]["version"]}
            elif "commitInfo" in action:
                info = action["commitInfo"]
                commit["operation"] = info.get("operation")
                metrics = info.get("operationMetrics") or {}
                # A MERGE rewrites the files it touches: its rows are the batch's, not the files' records.
                commit["rows"] = int(metrics.get("numSourceRows", metrics.get("numOutputRows", -1)))
                epoch = (info.get("operationParameters") or {}).get("epochId")
                commit["batch"] = int(epoch) if epoch is not None else None
                try:
                    commit["metadata"] = json.loads(info.get("userMetadata") or "null")
                except ValueError:
                    commit["metadata"] = info.get("userMetadata")
        if commit["rows"] < 0:
            commit["rows"] = added
        found.append(commit)
    return found


def deliveries(path: Path) -> pl.DataFrame:
    """The write history as the checker reads it (batch id, incarnation, rows): one row per commit that wrote a
    batch's rows, the batch from the streaming write's epoch or the metadata the writer attached."""
    rows = []
    for commit in commits(path):
        meta = commit["metadata"] if isinstance(commit["metadata"], dict) else {}
        batch = commit["batch"] if commit["batch"] is not None else meta.get("batch")
        if batch is None or commit["operation"] in ("CREATE TABLE", "CREATE OR REPLACE TABLE"):
            continue
        rows.append((int(batch), int(meta.get("incarnation", -1)), commit["rows"]))
    return pl.DataFrame(rows, schema={"batch_id": pl.Int64, "incarnation": pl.Int64, "rows": pl.Int64}, orient="row")


def findings(path: Path) -> dict | None:
    """The table beyond its rows: its version and commits, how many carried a txn id (Delta skips a batch whose
    (appId, version) it has already committed)."""
    found = commits(path)
    if not found:
        return None
    return {"delta": {"version": found[-1]["version"], "commits": len(found),
                      "with_txn": sum(1 for c in found if c["txn"]),
                      "operations": sorted({str(c.get("operation")) for c in found})}}
