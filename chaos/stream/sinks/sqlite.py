"""foreachBatch sinks into a SQLite file, the simplest sinks whose guarantee differs by one line.

* ``append``: INSERT every row of the batch: a batch replayed after a crash is written twice
  (at-least-once, Spark's documented foreachBatch guarantee).
* ``idempotent``: in one transaction, DELETE the rows of this batch id, then INSERT: a replay
  replaces its own earlier write (exactly-once, the docs' "idempotent with the batch id").

* ``query-batch``: in one transaction, skip a batch whose (query id, batch id) is in the ``applied``
  table, else INSERT its rows and that pair: the "have I written this batch of this query already?"
  check of transactional sinks. Exactly-once while the query keeps its id, which lives in the
  checkpoint's ``metadata`` file.

All keep a ``deliveries`` table (batch id, incarnation, rows) written in the same transaction:
the sink's write history, so a trial can say "delivered twice, effective once".
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import polars as pl

COLUMNS = ("id", "key", "value", "event_time", "partition", "offset")
EVENT_TABLE = ("id INTEGER", "key TEXT", "value INTEGER", "event_time TEXT", "partition INTEGER", "offset INTEGER")

Phase = Callable[..., None]


def create(path: Path, columns: tuple[str, ...] = EVENT_TABLE) -> None:
    """The ``output`` table (``batch_id`` + ``columns``, SQL declarations) and the ``deliveries`` history."""
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS output (batch_id INTEGER, {', '.join(columns)})")
        conn.execute("CREATE INDEX IF NOT EXISTS output_batch ON output(batch_id)")
        conn.execute("CREATE TABLE IF NOT EXISTS deliveries (batch_id INTEGER, incarnation INTEGER, rows INTEGER)")
        conn.execute("CREATE TABLE IF NOT EXISTS applied (query_id TEXT, batch_id INTEGER)")


class SqliteBatchSink:
    """A foreachBatch function; ``phase(batch, name, **detail)`` is the barrier reporter."""

    def __init__(self, path: Path, mode: str, phase: Phase, incarnation: int,
                 columns: tuple[str, ...] = COLUMNS) -> None:
        if mode not in ("append", "idempotent", "query-batch"):
            raise ValueError(mode)
        self.path = str(path)
        self.mode = mode
        self.phase = phase
        self.incarnation = incarnation
        self.columns = columns

    def __call__(self, batch_df, batch_id: int) -> None:
        rows = [tuple(_plain(v) for v in r) for r in batch_df.select(*self.columns).collect()]  # executors read here
        query_id = None
        if self.mode == "query-batch":
            # Spark sets the running query's id as a local property of the micro-batch thread, which this
            # call runs on (pinned py4j threads).
            query_id = batch_df.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
            if not query_id:
                raise RuntimeError("no streaming query id on the micro-batch thread: the sink cannot deduplicate")
        self.phase(batch_id, "sink-write", rows=len(rows), mode=self.mode)
        conn = sqlite3.connect(self.path, timeout=60)
        skipped = False
        try:
            with conn:
                if self.mode == "query-batch":
                    # Written before by this query (a replay after a crash): nothing to do.
                    skipped = conn.execute("SELECT 1 FROM applied WHERE query_id = ? AND batch_id = ?",
                                           (query_id, batch_id)).fetchone() is not None
                    if not skipped:
                        conn.execute("INSERT INTO applied VALUES (?, ?)", (query_id, batch_id))
                if self.mode == "idempotent":
                    conn.execute("DELETE FROM output WHERE batch_id = ?", (batch_id,))
                if not skipped:
                    marks = ", ".join("?" * (len(self.columns) + 1))
                    conn.executemany(f"INSERT INTO output VALUES ({marks})", [(batch_id, *row) for row in rows])
                    conn.execute("INSERT INTO deliveries VALUES (?, ?, ?)", (batch_id, self.incarnation, len(rows)))
        finally:
            conn.close()
        self.phase(batch_id, "sink-done", rows=0 if skipped else len(rows), **({"skipped": True} if skipped else {}))


def _plain(value):
    return value.isoformat() if isinstance(value, datetime) else value


def read_output(path: Path) -> pl.DataFrame:
    """The sink's final contents (the "effect" view)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT batch_id, id, key, value FROM output").fetchall()
    return pl.DataFrame(rows, schema={"batch_id": pl.Int64, "id": pl.Int64, "key": pl.Utf8, "value": pl.Int64},
                        orient="row")


def read_table(path: Path, schema: dict) -> pl.DataFrame:
    """The ``output`` table's ``schema`` columns (sinks with other rows than events)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(f"SELECT {', '.join(schema)} FROM output").fetchall()
    return pl.DataFrame(rows, schema=schema, orient="row")


def read_deliveries(path: Path) -> pl.DataFrame:
    """The sink's write history (the "deliveries" view)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT batch_id, incarnation, rows FROM deliveries").fetchall()
    return pl.DataFrame(rows, schema={"batch_id": pl.Int64, "incarnation": pl.Int64, "rows": pl.Int64},
                        orient="row")
