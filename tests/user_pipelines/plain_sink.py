"""A user's pipeline that reports no phase itself (``plain_sink:PIPELINE``): ``auto_phases`` on, its
foreachBatch function only writes, and the harness reports ``sink-write`` and ``sink-done`` around it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl

from pipelines_under_test import DriverContext, Pipeline


class PlainAppend(Pipeline):
    name = "plain-append"
    guarantee = "at-least-once"
    auto_phases = True

    def prepare_sink(self, sink_dir: Path) -> None:
        with sqlite3.connect(Path(sink_dir) / "rows.db") as db:
            db.execute("CREATE TABLE rows (id INTEGER, key TEXT)")

    def start(self, ctx: DriverContext):
        path = str(ctx.sink_dir / "rows.db")

        def write(frame, batch_id: int) -> None:
            rows = [(r.id, r.key) for r in frame.select("id", "key").collect()]
            with sqlite3.connect(path) as db:
                db.executemany("INSERT INTO rows VALUES (?, ?)", rows)

        return self.start_foreach_batch(ctx, ctx.source, write)

    def read_output(self, sink_dir: Path) -> pl.DataFrame:
        with sqlite3.connect(Path(sink_dir) / "rows.db") as db:
            rows = db.execute("SELECT id, key FROM rows").fetchall()
        return pl.DataFrame(rows, schema={"id": pl.Int64, "key": pl.Utf8}, orient="row")

    def oracle(self, events: pl.DataFrame) -> pl.DataFrame:
        return events.select("id", required=pl.lit(True), multiplicity=pl.lit(1, dtype=pl.Int64))


PIPELINE = PlainAppend()
