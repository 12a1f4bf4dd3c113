"""``keyed-state-expiry``: ``transformWithState`` in processing-time mode, where state ages out by the clock.

Processing time is no logical point, so the pipeline makes it one: every micro-batch's timestamp is written in
Spark's offsets log (``batchTimestampMs``) and a replayed batch runs with the logged one, so what a TTL and a
processing-time timer do in a batch is fixed once the batch is planned. Each output row carries the timestamp
of the batch that read its event (``at``) and of the batch that emitted it (``flushed``), and the checker
replays the clock from them:

* a running count per key in a ``ValueState`` with a short TTL (``TTL_MS``): an event's ``n`` is one more than
  the count of the key's previous batch if that batch's ``at`` lies less than the TTL before, else 1 (the entry
  expired); exactly the TTL apart is either. Replayed state that a TTL had ended, or a live entry lost, shows as
  a count off the chain.
* events wait in a ``ListState`` until a processing-time timer registered at ``at + 1`` fires in a later batch
  (or in the same batch's timer pass, after its input, when an older timer of the key is due): they are emitted
  then, one row each, ``flushed >= at``, and removed. A timer lost at a restart leaves its events unwritten
  (lost); one fired twice without its removal writes them twice.

Upserted by batch id (the replay replaces its own rows): exactly-once. In processing-time mode Spark runs batches
without data after the input ends (the timers may be due): the stream counts as drained two commits after the one
that covers the input, in the same run. A query restarted after its last data batch runs none (finding 002): the
trial stalls there, an inconclusive verdict, not a loss.
A batch query runs no timer: the differential test against Spark batch owes nothing then.
"""

from __future__ import annotations

import polars as pl

from pipelines_under_test.base import DriverContext
from pipelines_under_test.event_time import ROCKSDB
from pipelines_under_test.passthrough import SqliteRows
from properties import expiry, watermark

TTL_MS = 4000  # longer than a batch, shorter than most restarts: entries live on between batches and expire across
TABLE = ("id INTEGER", "key TEXT", "value INTEGER", "n INTEGER", "at INTEGER", "flushed INTEGER")
SCHEMA = {"id": pl.Int64, "key": pl.Utf8, "value": pl.Int64, "n": pl.Int64, "at": pl.Int64, "flushed": pl.Int64}
OUTPUT = "id long, key string, value long, n long, at long, flushed long"


def _processor():
    """Built in the driver (pyspark imports stay out of the harness)."""
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor

    class Expiry(StatefulProcessor):
        def init(self, handle) -> None:
            self.handle = handle
            self.recent = handle.getValueState("recent", "n long", TTL_MS)
            self.pending = handle.getListState("pending", "id long, value long, n long, at long")

        def handleInputRows(self, key, rows, timerValues):
            at = timerValues.getCurrentProcessingTimeInMs()
            n = self.recent.get()[0] if self.recent.exists() else 0
            waiting = self.pending.exists()
            arrived = []
            for i, v in sorted((int(r.id), int(r.value)) for r in rows):
                n += 1
                arrived.append((i, v, n, at))
            self.pending.appendList(arrived)
            self.recent.update((n,))
            if not waiting:  # a key's waiting events have one timer, registered when the first arrived
                self.handle.registerTimer(at + 1)
            return iter(())

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            flushed = timerValues.getCurrentProcessingTimeInMs()
            waiting = list(self.pending.get()) if self.pending.exists() else []
            self.pending.clear()
            for i, v, n, at in waiting:
                yield Row(id=i, key=key[0], value=v, n=n, at=at, flushed=flushed)

        def close(self) -> None:
            pass

    return Expiry()


class KeyedExpiry(SqliteRows):
    state_store = True  # a ValueState with TTL and a ListState in RocksDB; the cut is not checked
    schema = SCHEMA
    table = TABLE
    drain_commits = 2

    def __init__(self) -> None:
        super().__init__("keyed-state-expiry", "idempotent", "exactly-once",
                         f"transformWithState in processing-time mode: a count per key in a ValueState with a "
                         f"{TTL_MS / 1000:g} s TTL, events held until a processing-time timer emits them; "
                         "upserted by batch id: exactly-once, the counts checked against the logged clock.")

    def transform(self, source):
        return (source.select("id", "key", "value").groupBy("key")
                .transformWithState(statefulProcessor=_processor(), outputStructType=OUTPUT, outputMode="Append",
                                    timeMode="ProcessingTime"))

    def start(self, ctx: DriverContext):
        ctx.spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
        return self.start_foreach_batch(ctx, self.transform(ctx.source), self.rows_sink(ctx))

    def oracle(self, events: pl.DataFrame) -> pl.DataFrame:
        expected = super().oracle(events)
        if watermark.streaming(events):
            return expected
        return expected.with_columns(required=pl.lit(False), multiplicity=pl.lit(0, dtype=pl.Int64))

    def unexplained(self, output: pl.DataFrame, events: pl.DataFrame) -> list[dict]:
        return super().unexplained(output, events) + expiry.unexplained(output, events, TTL_MS)


KEYED_STATE_EXPIRY = KeyedExpiry()
