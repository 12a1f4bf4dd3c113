"""Delta tables the job names by path are the trial's: its streaming Delta sink, its batch writes and its MERGEs.

Lakehouse jobs write ``writeStream.format("delta").start("/lake/silver/orders")``, or in a foreachBatch
``batch.write.format("delta").mode("append").save(path)``, ``DeltaTable.forPath(spark, path).merge(...)`` or
``spark.sql(f"MERGE INTO delta.`{path}` ...")``. Run as written they would write wherever the job's author keeps
the lake. As the checkpoint and the file sink are, those paths are rerouted while the job runs: the table under
test (``--sink delta:PATH``, or the first Delta table the job writes with ``--sink delta``) to ``files`` in the
run's folder (the trial's sink directory, the oracle's), every other table the job names to a folder of its own
beside it (``delta-<its path>``). The folder is the one of the run at the moment of the call
(``STREAMCHAOS_DELTA_ROOT``), so the oracle's run writes its own tables. The job's code is not changed.

Tables named through the catalog (``toTable``, ``saveAsTable``, ``DeltaTable.forName``) are one line: the trial
could not give them a folder of their own without the job's metastore.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from chaos.errors import UserError

ROOT_VAR = "STREAMCHAOS_DELTA_ROOT"  # the run's folder: its table under test is ROOT/files
TESTED_VAR = "STREAMCHAOS_DELTA_TESTED"  # the job's path of the table under test ("" until the first write)
UPSTREAM_VAR = "STREAMCHAOS_DELTA_UPSTREAM"  # the job's path of a table its query under test reads from another
TESTED_FOLDER = "files"
# ``delta.`/some/path``` in the job's SQL (MERGE INTO, SELECT ... FROM, DESCRIBE HISTORY).
SQL_PATH = re.compile(r"(?i)\bdelta\.`([^`]+)`")
NONE_TESTED = "<none>"  # a job whose sink under test is not a Delta table: every table it names is a side one


def begin(root: Path, tested: str | None, upstream: str | None = None) -> None:
    """From now on (this run: the trial's stream, then the oracle's), Delta paths route under ``root``;
    ``tested``: the job's path of the table under test, "" for the first one it writes, None for none;
    ``upstream``: a table another query writes for the one under test to read, never the table under test."""
    os.environ[ROOT_VAR] = str(root)
    os.environ[TESTED_VAR] = NONE_TESTED if tested is None else normalized(tested) if tested else ""
    os.environ[UPSTREAM_VAR] = normalized(upstream) if upstream else ""


def normalized(path: str) -> str:
    path = str(path)
    for scheme in ("file://", "file:"):
        if path.startswith(scheme):
            path = path[len(scheme):]
    return os.path.normpath(path) if path else path


def _side_name(path: str) -> str:
    return "delta-" + (re.sub(r"[^\w.-]+", "_", normalized(path)).strip("_") or "table")


def route(path: str, writing: bool = False) -> str:
    """Where the job's Delta ``path`` is in this run: the table under test (the first written when none was named)
    at ``ROOT/files``, another at ``ROOT/delta-<path>``; the path itself when no run is under way, or when it is
    already one of the run's (a path the job got back from a table it was given)."""
    root = os.environ.get(ROOT_VAR)
    if not root or not path:
        return path
    norm = normalized(path)
    if norm == root or norm.startswith(root.rstrip("/") + "/"):
        return path
    if writing and not os.environ.get(TESTED_VAR) and norm != os.environ.get(UPSTREAM_VAR):
        os.environ[TESTED_VAR] = norm
    if norm == os.environ.get(TESTED_VAR):
        return str(Path(root) / TESTED_FOLDER)
    return str(Path(root) / _side_name(norm))


def under_test(path: str) -> bool:
    """Whether a streaming Delta sink at ``path`` is the one under test (taking that role if none was named)."""
    return route(path, writing=True) == str(Path(os.environ.get(ROOT_VAR, "")) / TESTED_FOLDER)


def rewritten_sql(text: str) -> str:
    """The job's SQL with every ``delta.`PATH``` routed."""
    return SQL_PATH.sub(lambda m: f"delta.`{route(m.group(1), writing=True)}`", text)


def _by_catalog(what: str) -> UserError:
    return UserError(f"the job names a Delta table through the catalog ({what}): streamchaos reroutes Delta tables "
                     "named by path (save(PATH), start(PATH), DeltaTable.forPath); write the table by its path")


def _reroute_writer() -> None:
    """``batch.write.format("delta")...save(path)`` (and ``.option("path", ...)``) write the run's table."""
    from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter

    if getattr(DataFrameWriter, "_streamchaos_delta", False):
        return
    fmt, save, save_as = (DataFrameWriter.__dict__[n] for n in ("format", "save", "saveAsTable"))
    option, options = DataFrameWriter.__dict__["option"], DataFrameWriter.__dict__["options"]
    read_fmt, load = DataFrameReader.__dict__["format"], DataFrameReader.__dict__["load"]

    def noted_format(self, source):
        self.__dict__["_streamchaos_format"] = source
        return fmt(self, source)

    def routed_save(self, path=None, format=None, mode=None, partitionBy=None, **opts):  # noqa: A002, N803
        if (format or self.__dict__.get("_streamchaos_format") or "").lower() == "delta":
            if path or "path" in opts:  # save(PATH): Spark refuses a path option beside it
                path = route(str(path or opts.pop("path")), writing=True)
            elif self.__dict__.get("_streamchaos_path"):
                option(self, "path", route(self.__dict__["_streamchaos_path"], writing=True))
        return save(self, path, format, mode, partitionBy, **opts)

    def noted_option(self, key, value):
        if str(key).lower() == "path":
            self.__dict__["_streamchaos_path"] = str(value)
        return option(self, key, value)

    def noted_options(self, **opts):
        if "path" in opts:
            self.__dict__["_streamchaos_path"] = str(opts["path"])
        return options(self, **opts)

    def refused_save_as(self, name, format=None, mode=None, partitionBy=None, **opts):  # noqa: A002, N803
        if (format or self.__dict__.get("_streamchaos_format") or "").lower() == "delta" and os.environ.get(ROOT_VAR):
            raise _by_catalog(f"saveAsTable({name!r})")
        return save_as(self, name, format, mode, partitionBy, **opts)

    def noted_read_format(self, source):
        self.__dict__["_streamchaos_format"] = source
        return read_fmt(self, source)

    def routed_load(self, path=None, format=None, schema=None, **opts):  # noqa: A002
        if (format or self.__dict__.get("_streamchaos_format") or "").lower() == "delta" and isinstance(path, str):
            path = route(path)
        return load(self, path, format, schema, **opts)

    DataFrameWriter.format, DataFrameWriter.save, DataFrameWriter.saveAsTable = noted_format, routed_save, \
        refused_save_as
    DataFrameWriter.option, DataFrameWriter.options = noted_option, noted_options
    DataFrameReader.format, DataFrameReader.load = noted_read_format, routed_load
    DataFrameWriter._streamchaos_delta = True


def _reroute_sql() -> None:
    """``spark.sql("MERGE INTO delta.`PATH` ...")`` runs on the run's table."""
    from pyspark.sql import SparkSession

    if getattr(SparkSession, "_streamchaos_delta", False):
        return
    sql = SparkSession.__dict__["sql"]

    def routed(self, sqlQuery, args=None, **kwargs):  # noqa: N803 - PySpark's parameter name
        if os.environ.get(ROOT_VAR) and isinstance(sqlQuery, str):
            sqlQuery = rewritten_sql(sqlQuery)
        return sql(self, sqlQuery, args, **kwargs)

    SparkSession.sql = routed
    SparkSession._streamchaos_delta = True


def _reroute_delta_tables() -> None:
    """``DeltaTable.forPath`` / ``isDeltaTable`` (delta-spark's Python API, where the job has it) on the run's
    table; ``DeltaTable.forName`` is one line."""
    try:
        from delta.tables import DeltaTable  # type: ignore[import-not-found]
    except ImportError:
        return
    if getattr(DeltaTable, "_streamchaos_delta", False):
        return
    for_path, is_delta = DeltaTable.__dict__["forPath"].__func__, DeltaTable.__dict__["isDeltaTable"].__func__
    for_name = DeltaTable.__dict__["forName"].__func__

    def routed_for_path(cls, sparkSession, path, hadoopConf=None):  # noqa: N803
        return for_path(cls, sparkSession, route(path, writing=True), hadoopConf or {})

    def routed_is_delta(cls, sparkSession, identifier):  # noqa: N803
        return is_delta(cls, sparkSession, route(identifier))

    def refused_for_name(cls, sparkSession, tableOrViewName):  # noqa: N803
        if os.environ.get(ROOT_VAR):
            raise _by_catalog(f"DeltaTable.forName({tableOrViewName!r})")
        return for_name(cls, sparkSession, tableOrViewName)

    DeltaTable.forPath = classmethod(routed_for_path)
    DeltaTable.isDeltaTable = classmethod(routed_is_delta)
    DeltaTable.forName = classmethod(refused_for_name)
    DeltaTable._streamchaos_delta = True


def reroute() -> None:
    """From now on in this driver, a Delta table the job names by path is the run's: installed before the job's
    module is imported, for the driver's life (its foreachBatch writes come long after its start returned)."""
    _reroute_writer()
    _reroute_sql()
    _reroute_delta_tables()


def end() -> None:
    """No run's tables any more: a driver that ran a job and then runs another pipeline writes its paths as given."""
    for name in (ROOT_VAR, TESTED_VAR, UPSTREAM_VAR):
        os.environ.pop(name, None)
