"""A two-phase-commit streaming sink into PostgreSQL: a Python ``DataSourceStreamWriter``.

A two-phase commit, in Spark's own sink API:

* phase 1, ``write`` (each task, on executors): stage the task's rows in ``staging`` under
  (batch id, partition) — replacing whatever an earlier attempt of the same task staged — and
  return a commit message. The batch id is not an argument: it is read from the task's local
  property ``streaming.sql.batchId``.
* phase 2, ``commit(messages, batchId)`` (driver, before Spark writes commits/N): in one
  transaction, record the batch id in ``sink_batches`` and, if it was new, move the batch's staged
  rows into ``output``; drop the staging rows either way. Spark can call ``commit`` twice for the
  same batch after a driver crash (once before the crash, once on replay): the second finds its id
  recorded and publishes nothing.
* ``abort(messages, batchId)`` gets messages that may all be None, so it cleans staging by batch id.

Exactly-once end to end, as long as the database keeps its transactions.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, WriterCommitMessage

from chaos.nemesis import barrier
from chaos.stream.sinks.postgres import in_transaction

SINK_NAME = "streamchaos_pg_two_phase"
COLUMNS = ("id", "key", "value", "event_time", "partition", "offset")


@dataclass
class Staged(WriterCommitMessage):
    partition: int
    rows: int


class PgTwoPhaseWriter(DataSourceStreamWriter):
    def __init__(self, options: dict) -> None:
        self.dsn = options["dsn"]
        self.controller = options.get("controller")
        self.incarnation = int(options.get("incarnation", 0))

    def _phase(self, batch: int, name: str, **detail) -> None:
        if self.controller:
            barrier.report(self.controller, batch, name, incarnation=self.incarnation, **detail)

    def write(self, iterator) -> Staged:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch = int(ctx.getLocalProperty("streaming.sql.batchId"))
        part = ctx.partitionId()
        rows = [(batch, part, *(r[c] for c in COLUMNS)) for r in iterator]
        self._phase(batch, "sink-write", partition=part, rows=len(rows), mode="two-phase")

        def stage(conn) -> None:
            conn.execute("DELETE FROM staging WHERE batch_id = %s AND part = %s", (batch, part))
            if rows:
                with conn.cursor() as cur:
                    cur.executemany("INSERT INTO staging VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", rows)

        in_transaction(self.dsn, stage)
        return Staged(part, len(rows))

    def commit(self, messages, batchId: int) -> None:  # noqa: N803 - Spark's parameter name
        rows = sum(m.rows for m in messages if m is not None)

        def publish(conn) -> bool:
            new = conn.execute("INSERT INTO sink_batches VALUES (%s) ON CONFLICT DO NOTHING RETURNING batch_id",
                               (batchId,)).fetchone() is not None
            if new:
                conn.execute('INSERT INTO output SELECT batch_id, id, key, value, event_time, partition, "offset"'
                             " FROM staging WHERE batch_id = %s", (batchId,))
            conn.execute("DELETE FROM staging WHERE batch_id = %s", (batchId,))
            conn.execute("INSERT INTO deliveries VALUES (%s, %s, %s, %s)", (batchId, self.incarnation, rows, new))
            return new

        published, _ = in_transaction(self.dsn, publish)
        self._phase(batchId, "sink-done", rows=rows, published=published)

    def abort(self, messages, batchId: int) -> None:  # noqa: N803
        in_transaction(self.dsn, lambda conn: conn.execute("DELETE FROM staging WHERE batch_id = %s", (batchId,)))


class PgTwoPhaseSink(DataSource):
    @classmethod
    def name(cls) -> str:
        return SINK_NAME

    def streamWriter(self, schema, overwrite: bool) -> PgTwoPhaseWriter:  # noqa: N802 - PySpark's API
        return PgTwoPhaseWriter(self.options)
