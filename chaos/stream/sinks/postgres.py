"""foreachBatch sinks into PostgreSQL (psycopg), reached through the sink channel's proxy.

* ``append``: INSERT the batch's rows: a batch replayed after a crash is written again
  (at-least-once).
* ``upsert-by-batch``: in one transaction, record the batch id in ``sink_batches`` (primary key)
  and insert the rows only if the id was new: a replay finds its id and writes nothing
  (exactly-once; a transactional sink keyed by Spark's batch id).

Both record every delivery (batch id, incarnation, rows, written or skipped) in the same
transaction. Transient connection errors (a cut or reset channel, a killed database) are retried
for up to ``RETRY_FOR`` seconds, as a production sink would; a retry after a connection lost during
COMMIT can write twice in ``append`` mode — that ambiguity is real and is what the harness measures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

Phase = Callable[..., None]
RETRY_FOR = 120.0

DDL = (
    "DROP TABLE IF EXISTS output, deliveries, sink_batches, staging",
    "CREATE TABLE output (batch_id BIGINT, id BIGINT, key TEXT, value BIGINT, event_time TIMESTAMP,"
    " partition INT, \"offset\" BIGINT)",
    "CREATE TABLE deliveries (batch_id BIGINT, incarnation INT, rows INT, written BOOLEAN)",
    "CREATE TABLE sink_batches (batch_id BIGINT PRIMARY KEY)",
    # pg-two-phase: rows staged per (batch, task partition) until the driver's commit publishes them
    "CREATE TABLE staging (batch_id BIGINT, part INT, id BIGINT, key TEXT, value BIGINT, event_time TIMESTAMP,"
    " partition INT, \"offset\" BIGINT)",
)


def create(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for stmt in DDL:
            conn.execute(stmt)


def in_transaction(dsn: str, work: Callable[[Any], Any]) -> tuple[Any, int]:
    """Run ``work(conn)`` in one transaction, retrying transient connection errors (a cut or reset
    channel, a killed database) for up to ``RETRY_FOR`` seconds; returns its result and the attempts."""
    import psycopg

    deadline = time.monotonic() + RETRY_FOR
    attempt = 0
    while True:
        attempt += 1
        try:
            with psycopg.connect(dsn) as conn, conn.transaction():
                return work(conn), attempt
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(min(0.2 * attempt, 2.0))


class PgBatchSink:
    def __init__(self, dsn: str, mode: str, phase: Phase, incarnation: int) -> None:
        if mode not in ("append", "upsert-by-batch"):
            raise ValueError(mode)
        self.dsn = dsn
        self.mode = mode
        self.phase = phase
        self.incarnation = incarnation

    def __call__(self, batch_df, batch_id: int) -> None:
        rows = [tuple(r) for r in batch_df.select("id", "key", "value", "event_time", "partition", "offset").collect()]
        self.phase(batch_id, "sink-write", rows=len(rows), mode=self.mode)
        attempts = self._write(batch_id, rows)
        self.phase(batch_id, "sink-done", rows=len(rows), attempts=attempts)

    def _write(self, batch_id: int, rows: list[tuple]) -> int:
        def write(conn) -> None:
            new = True
            if self.mode == "upsert-by-batch":
                new = conn.execute("INSERT INTO sink_batches VALUES (%s) ON CONFLICT DO NOTHING"
                                   " RETURNING batch_id", (batch_id,)).fetchone() is not None
            if new and rows:
                with conn.cursor() as cur:
                    cur.executemany("INSERT INTO output VALUES (%s, %s, %s, %s, %s, %s, %s)",
                                    [(batch_id, *r) for r in rows])
            conn.execute("INSERT INTO deliveries VALUES (%s, %s, %s, %s)",
                         (batch_id, self.incarnation, len(rows), new))

        return in_transaction(self.dsn, write)[1]


def export(dsn: str, sink_dir) -> None:
    """Copy the final tables to parquet in the run directory, so a stored run is checked without the database."""
    import polars as pl
    import psycopg

    with psycopg.connect(dsn) as conn:
        out = conn.execute("SELECT batch_id, id, key, value FROM output").fetchall()
        dels = conn.execute("SELECT batch_id, incarnation, rows FROM deliveries").fetchall()
    pl.DataFrame(out, schema={"batch_id": pl.Int64, "id": pl.Int64, "key": pl.Utf8, "value": pl.Int64},
                 orient="row").write_parquet(f"{sink_dir}/output.parquet")
    pl.DataFrame(dels, schema={"batch_id": pl.Int64, "incarnation": pl.Int64, "rows": pl.Int64},
                 orient="row").write_parquet(f"{sink_dir}/deliveries.parquet")
