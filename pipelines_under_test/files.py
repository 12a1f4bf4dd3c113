"""The parquet file sink, judged two ways: through its ``_spark_metadata`` log, and raw.

``passthrough-file`` writes every event with Spark's own file sink. Tasks write part files straight
into the table directory; the driver then appends the batch's file list to ``_spark_metadata/N``
(the sink's own commit log) and, on a replay, skips a batch id the log already holds. A reader that
honours the log (Spark does; ``read_through_log`` is the same rule) sees every event once:
exactly-once, as Spark documents for the file sink.

``passthrough-file-raw`` reads the same directory the way a tool unaware of the log does (polars
over ``*.parquet``): after a driver dies between the part files and the log entry (``sink-write``,
reported by the JVM commit-protocol hook ``chaos/machine/jvm``), the replay writes the batch again under new
file names and the raw view holds it twice: at-least-once. It also reports the 0-byte/unreadable
files that killed tasks leave behind (orphans).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipelines_under_test.base import DriverContext
from pipelines_under_test.passthrough import RowPassthrough

TABLE = "table"
COLUMNS = ("id", "key", "value", "event_time", "partition", "offset")
SCHEMA = {"id": pl.Int64, "key": pl.Utf8, "value": pl.Int64}


def log_files(table: Path) -> list[Path]:
    """The part files the sink's ``_spark_metadata`` log lists as added (latest compaction + later deltas)."""
    log = Path(table) / "_spark_metadata"
    if not log.is_dir():
        return []
    entries = {}
    for p in log.iterdir():
        stem = p.name.removesuffix(".compact")
        if stem.isdigit():
            entries[int(stem)] = p
    compacts = [n for n, p in entries.items() if p.name.endswith(".compact")]
    first = max(compacts) if compacts else 0
    files: dict[str, bool] = {}
    for n in sorted(b for b in entries if b >= first):
        for line in entries[n].read_text().splitlines()[1:]:  # line 1 is the log version
            if line.strip():
                entry = json.loads(line)
                files[entry["path"]] = entry.get("action", "add") == "add"
    # The log holds absolute URIs; a stored run may have moved since: the file's place in this table counts, its
    # name and the partition directories above it (``date=2026-01-01/symbol=A/part-...``, a ``partitionBy`` sink).
    return [Path(table).joinpath(*in_table(path)) for path, added in files.items() if added]


def in_table(uri: str) -> list[str]:
    """A part file's path under its table: its name and the ``column=value`` directories above it, as on disk (the
    log's URI escapes them once more: a value ``A B`` is ``A%20B`` there, Spark's own ``%3A`` is ``%253A``)."""
    from urllib.parse import unquote

    parts = [unquote(part) for part in uri.split("/")]
    kept = [parts[-1]]
    for part in reversed(parts[:-1]):
        if "=" not in part:
            break
        kept.insert(0, part)
    return kept


def partition_values(path: Path, table: Path) -> dict[str, str | None]:
    """The ``partitionBy`` columns of a part file, from its directories under ``table`` (as Spark writes them:
    escaped, ``__HIVE_DEFAULT_PARTITION__`` for null)."""
    from urllib.parse import unquote

    values: dict[str, str | None] = {}
    for part in path.relative_to(table).parts[:-1]:
        name, _, value = part.partition("=")
        values[unquote(name)] = None if value == "__HIVE_DEFAULT_PARTITION__" else unquote(value)
    return values


def _read(paths: list[Path]) -> pl.DataFrame:
    frames = [pl.read_parquet(p, columns=list(COLUMNS)) for p in paths]
    if not frames:
        return pl.DataFrame(schema=SCHEMA)
    return pl.concat(frames, how="vertical_relaxed").select(*(pl.col(c).cast(t) for c, t in SCHEMA.items()))


def raw_files(table: Path) -> tuple[list[Path], list[dict]]:
    """Every part file in the directory: the readable ones, and orphans (0 bytes or no parquet footer)."""
    readable, orphans = [], []
    for p in sorted(Path(table).glob("part-*.parquet")):
        size = p.stat().st_size
        with p.open("rb") as fh:
            whole = size >= 12 and fh.read(4) == b"PAR1" and (fh.seek(-4, 2) or True) and fh.read(4) == b"PAR1"
        if whole:
            readable.append(p)
        else:
            orphans.append({"file": p.name, "bytes": size})
    return readable, orphans


class FilePassthrough(RowPassthrough):
    """Every event into a parquet table through Spark's file sink."""

    def __init__(self, name: str, guarantee: str, raw: bool, description: str) -> None:
        super().__init__(name, "file", guarantee, description)
        self.raw = raw

    def unavailable(self) -> str | None:
        from chaos.machine.jvm import hooks_unavailable

        return hooks_unavailable()

    def boot_conf(self) -> dict[str, str]:
        from chaos.machine.jvm import hooks_jar

        jar = str(hooks_jar())
        return {"spark.driver.extraClassPath": jar, "spark.executor.extraClassPath": jar}

    def prepare_sink(self, sink_dir: Path) -> None:
        from chaos.machine.jvm import hooks_jar

        hooks_jar()  # built here, in the harness: a missing javac is one clear line before any JVM
        (Path(sink_dir) / TABLE).mkdir(parents=True, exist_ok=True)

    def start(self, ctx: DriverContext):
        from chaos.machine.jvm import COMMIT_PROTOCOL_CLASS

        ctx.spark.conf.set("spark.sql.streaming.commitProtocolClass", COMMIT_PROTOCOL_CLASS)
        return (
            self.transform(ctx.source).select(*COLUMNS).writeStream.format("parquet")
            .option("path", str(Path(ctx.sink_dir) / TABLE))
            .option("checkpointLocation", ctx.checkpoint)
            .queryName(self.query_name)
            .start()
        )

    def read_output(self, sink_dir: Path) -> pl.DataFrame:
        table = Path(sink_dir) / TABLE
        return _read(raw_files(table)[0] if self.raw else log_files(table))

    def sink_findings(self, sink_dir: Path) -> dict:
        table = Path(sink_dir) / TABLE
        readable, orphans = raw_files(table)
        listed = {p.name for p in log_files(table)}
        return {"part_files": len(readable) + len(orphans), "in_log": len(listed),
                "not_in_log": sorted(p.name for p in readable if p.name not in listed)[:50], "orphans": orphans[:50]}

    def batch_output(self, result) -> pl.DataFrame:
        rows = result.select("id", "key", "value").collect()
        return pl.DataFrame([tuple(r) for r in rows], schema=SCHEMA, orient="row")


PASSTHROUGH_FILE = FilePassthrough(
    "passthrough-file", "exactly-once", False,
    "parquet file sink read through its _spark_metadata log (as Spark reads it): exactly-once.")
PASSTHROUGH_FILE_RAW = FilePassthrough(
    "passthrough-file-raw", "at-least-once", True,
    "the same parquet table read raw (every part file, log ignored): replays show twice; orphans reported.")
