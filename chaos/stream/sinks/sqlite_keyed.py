"""foreachBatch sinks of per-key aggregates into SQLite: an access counter per API key, three ways.

* ``upsert``: the batch holds the new *totals* of the keys it changed (a streaming aggregation in
  update mode); INSERT OR REPLACE by key. Writing a replayed batch again writes the same totals:
  idempotent, so the sink inherits the state store's exactly-once.
* ``increment``: the batch holds per-batch *deltas* (a plain ``groupBy`` inside foreachBatch, no
  streaming state); ``n = n + delta``. A replayed batch adds its deltas twice: at-least-once, the
  everyday bug of counters fed from a stream.
* ``two-phase``: a two-phase commit in foreachBatch. Pre-commit: stage the batch's totals
  under its batch id (replacing an earlier attempt's) in one transaction, then ``sink-write``.
  Commit: in a second transaction, record the batch id and, if it was new, publish the staged
  totals; a batch id already recorded publishes nothing. A crash between the two leaves only
  staged rows, which the replay replaces and publishes once.

Both keep the same ``deliveries`` history as the row sinks (batch id, incarnation, rows) in the
same transaction, and report the ``sink-write`` / ``sink-done`` phases.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import polars as pl

from chaos.stream.sinks.sqlite import read_deliveries

__all__ = ["SqliteKeyedSink", "create", "read_counts", "read_deliveries"]

Phase = Callable[..., None]


def create(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS counts (key TEXT PRIMARY KEY, n INTEGER, total INTEGER,"
                     " ids TEXT, batch_id INTEGER)")
        conn.execute("CREATE TABLE IF NOT EXISTS deliveries (batch_id INTEGER, incarnation INTEGER, rows INTEGER)")
        conn.execute("CREATE TABLE IF NOT EXISTS staging (batch_id INTEGER, key TEXT, n INTEGER, total INTEGER)")
        conn.execute("CREATE TABLE IF NOT EXISTS sink_batches (batch_id INTEGER PRIMARY KEY)")


class SqliteKeyedSink:
    """A foreachBatch function writing rows ``(key, n, total[, ids])`` by key."""

    def __init__(self, path: Path, mode: str, phase: Phase, incarnation: int, with_ids: bool) -> None:
        if mode not in ("upsert", "increment", "two-phase"):
            raise ValueError(mode)
        self.path = str(path)
        self.mode = mode
        self.phase = phase
        self.incarnation = incarnation
        self.with_ids = with_ids

    def __call__(self, batch_df, batch_id: int) -> None:
        columns = ["key", "n", "total"] + (["ids"] if self.with_ids else [])
        rows = [tuple(r) for r in batch_df.select(*columns).collect()]
        if self.mode == "two-phase":
            self._two_phase(batch_id, rows)
            return
        self.phase(batch_id, "sink-write", rows=len(rows), mode=self.mode)
        conn = sqlite3.connect(self.path, timeout=60)
        try:
            with conn:
                for row in rows:
                    key, n, total = row[0], int(row[1]), int(row[2])
                    ids = json.dumps(sorted(int(i) for i in row[3])) if self.with_ids else None
                    if self.mode == "upsert":
                        conn.execute("INSERT OR REPLACE INTO counts VALUES (?, ?, ?, ?, ?)",
                                     (key, n, total, ids, batch_id))
                    else:
                        conn.execute(
                            "INSERT INTO counts VALUES (?, ?, ?, NULL, ?) ON CONFLICT(key) DO UPDATE SET"
                            " n = n + excluded.n, total = total + excluded.total, batch_id = excluded.batch_id",
                            (key, n, total, batch_id),
                        )
                conn.execute("INSERT INTO deliveries VALUES (?, ?, ?)", (batch_id, self.incarnation, len(rows)))
        finally:
            conn.close()
        self.phase(batch_id, "sink-done", rows=len(rows))


    def _two_phase(self, batch_id: int, rows: list[tuple]) -> None:
        conn = sqlite3.connect(self.path, timeout=60)
        try:
            with conn:  # pre-commit: staged, invisible to readers of ``counts``
                conn.execute("DELETE FROM staging WHERE batch_id = ?", (batch_id,))
                conn.executemany("INSERT INTO staging VALUES (?, ?, ?, ?)",
                                 [(batch_id, r[0], int(r[1]), int(r[2])) for r in rows])
            self.phase(batch_id, "sink-write", rows=len(rows), mode=self.mode, staged=True)
            with conn:  # commit: publish once per batch id
                new = conn.execute("INSERT OR IGNORE INTO sink_batches VALUES (?)", (batch_id,)).rowcount == 1
                if new:
                    conn.execute("INSERT OR REPLACE INTO counts SELECT key, n, total, NULL, batch_id FROM staging"
                                 " WHERE batch_id = ?", (batch_id,))
                conn.execute("DELETE FROM staging WHERE batch_id = ?", (batch_id,))
                conn.execute("INSERT INTO deliveries VALUES (?, ?, ?)", (batch_id, self.incarnation, len(rows)))
        finally:
            conn.close()
        self.phase(batch_id, "sink-done", rows=len(rows), published=new)


def read_counts(path: Path) -> pl.DataFrame:
    """Final contents: ``key, n, total, ids`` (ids is a list, or null for sinks without provenance)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT key, n, total, ids FROM counts").fetchall()
    return pl.DataFrame(
        [(k, n, t, json.loads(i) if i is not None else None) for k, n, t, i in rows],
        schema={"key": pl.Utf8, "n": pl.Int64, "total": pl.Int64, "ids": pl.List(pl.Int64)},
        orient="row",
    )
