"""A user's own pipeline module, as a data engineer would write it: orders into a SQLite table.

``ORDERS_APPEND`` inserts each micro-batch; ``ORDERS_BY_BATCH`` replaces the rows of the batch id
Spark passes to foreachBatch, in one transaction. The harness supplies the source (``ctx.source``),
the checkpoint and the sink directory; the pipeline reports the sink phases so faults can fire
exactly before and after its write.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl

from pipelines_under_test import DriverContext, Pipeline


class Orders(Pipeline):
    provenance = True

    def __init__(self, name: str, by_batch: bool) -> None:
        self.name = name
        self.by_batch = by_batch
        self.guarantee = "exactly-once" if by_batch else "at-least-once"
        self.description = "orders: keep positive values, write id/key/value to SQLite"

    def transform(self, source):
        return source.filter("value > 0").select("id", "key", "value")

    def prepare_sink(self, sink_dir: Path) -> None:
        with sqlite3.connect(Path(sink_dir) / "orders.db") as db:
            db.execute("CREATE TABLE orders (batch_id INTEGER, id INTEGER, key TEXT, value INTEGER)")

    def start(self, ctx: DriverContext):
        path, by_batch = str(ctx.sink_dir / "orders.db"), self.by_batch

        def write(frame, batch_id: int) -> None:
            rows = [(batch_id, r.id, r.key, r.value) for r in frame.collect()]
            ctx.phase(batch_id, "sink-write", rows=len(rows))
            with sqlite3.connect(path) as db:
                if by_batch:
                    db.execute("DELETE FROM orders WHERE batch_id = ?", (batch_id,))
                db.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", rows)
            ctx.phase(batch_id, "sink-done", rows=len(rows))

        return self.start_foreach_batch(ctx, self.transform(ctx.source), write)

    def read_output(self, sink_dir: Path) -> pl.DataFrame:
        with sqlite3.connect(Path(sink_dir) / "orders.db") as db:
            rows = db.execute("SELECT id, key, value FROM orders").fetchall()
        return pl.DataFrame(rows, schema={"id": pl.Int64, "key": pl.Utf8, "value": pl.Int64}, orient="row")

    def oracle(self, events: pl.DataFrame) -> pl.DataFrame:
        """Every event with a positive value, exactly once."""
        return events.select("id", required=pl.col("value") > 0, multiplicity=(pl.col("value") > 0).cast(pl.Int64))


ORDERS_APPEND = Orders("orders-append", by_batch=False)
ORDERS_BY_BATCH = Orders("orders-by-batch", by_batch=True)
