"""A user's pipeline whose sink writes from a background thread (``late_writer:PIPELINE``).

foreachBatch hands each batch's rows to a timer thread and returns at once, so Spark commits the batch
before its rows are in the sink: a driver that stops (or dies) with writes pending loses them, and a
driver that lives on, as a recycled driver does between a campaign's trials, writes them into a
finished trial's sink. Used by the test that a stored campaign keeps the verdicts it printed.
"""

from __future__ import annotations

import sqlite3
import threading

from chaos.stream.sinks.sqlite import COLUMNS, _plain
from pipelines_under_test.passthrough import SqlitePassthrough

DELAY_S = 2.5


class BackgroundWriter(SqlitePassthrough):
    def __init__(self) -> None:
        super().__init__("late-writer", "idempotent", "exactly-once",
                         "foreachBatch hands its rows to a background thread that writes them 2.5 s later")

    def start(self, ctx):
        db = str(self._db(ctx.sink_dir))

        def write(batch_id: int, rows: list[tuple]) -> None:
            with sqlite3.connect(db, timeout=60) as conn:
                conn.execute("DELETE FROM output WHERE batch_id = ?", (batch_id,))
                marks = ", ".join("?" * (len(COLUMNS) + 1))
                conn.executemany(f"INSERT INTO output VALUES ({marks})", [(batch_id, *r) for r in rows])
                conn.execute("INSERT INTO deliveries VALUES (?, ?, ?)", (batch_id, ctx.incarnation, len(rows)))

        def sink(df, batch_id: int) -> None:
            rows = [tuple(_plain(v) for v in r) for r in df.select(*COLUMNS).collect()]
            ctx.phase(batch_id, "sink-write", rows=len(rows))
            timer = threading.Timer(DELAY_S, write, (batch_id, rows))
            timer.daemon = True
            timer.start()
            ctx.phase(batch_id, "sink-done", rows=len(rows))

        return self.start_foreach_batch(ctx, ctx.source, sink)


PIPELINE = BackgroundWriter()
