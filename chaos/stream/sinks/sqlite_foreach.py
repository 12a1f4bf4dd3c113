"""A row-at-a-time ``ForeachWriter`` into SQLite: the docs' foreach sink, as users write it.

``open(partition_id, epoch_id)`` connects (and reports ``sink-write`` from the executor),
``process(row)`` inserts, ``close(error)`` commits the partition's rows and reports ``sink-done``.
Spark calls it again for every partition of a replayed epoch and the writer has no way to know the
rows are already there: at-least-once, as the documentation says for foreach. The writer is pickled
to the executors, so it holds only plain values (paths, the controller's address).
"""

from __future__ import annotations

import sqlite3

from chaos.nemesis import barrier
from chaos.stream.sinks.sqlite import COLUMNS


class SqliteForeachWriter:
    def __init__(self, path: str, controller: str | None, incarnation: int) -> None:
        self.path = path
        self.controller = controller
        self.incarnation = incarnation
        self.conn: sqlite3.Connection | None = None
        self.epoch = -1
        self.partition = -1
        self.rows = 0

    def _phase(self, name: str, **detail) -> None:
        if self.controller:
            barrier.report(self.controller, self.epoch, name, partition=self.partition, incarnation=self.incarnation,
                           **detail)

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self.epoch, self.partition, self.rows = int(epoch_id), int(partition_id), 0
        self._phase("sink-write")
        self.conn = sqlite3.connect(self.path, timeout=60)
        self.conn.execute("BEGIN")
        return True

    def process(self, row) -> None:
        i, k, v, t, p, o = (row[c] for c in COLUMNS)
        self.conn.execute("INSERT INTO output VALUES (?, ?, ?, ?, ?, ?, ?)", (self.epoch, i, k, v, t.isoformat(), p, o))
        self.rows += 1

    def close(self, error) -> None:
        if self.conn is None:
            return
        try:
            if error is None:
                self.conn.commit()
            else:
                self.conn.rollback()
        finally:
            self.conn.close()
            self.conn = None
        if error is None:
            self._phase("sink-done", rows=self.rows)
