"""Seed 003's keyed state types through ``transformWithStateInPandas``: ValueState, ListState, MapState.

Each pipeline keeps, per key, everything it has seen (a running count, sum and the ids) in one kind
of state variable, emits the key's new totals in update mode, and is upserted by key into SQLite.
The state variables live in the RocksDB state store (the operator requires it) and are versioned
with the offsets log, so a replayed batch starts from the state of the batch before it and emits
the same totals again: exactly-once with provenance, and the consistent cut is read per state
variable (``stateVarName``). ValueState holds one row per key, ListState one row per event appended,
MapState one entry per event id (so re-applying an event would be idempotent even without Spark's
help: the map is what users reach for when they fear replays).
"""

from __future__ import annotations

import polars as pl

from pipelines_under_test.base import DriverContext
from pipelines_under_test.counts import StatefulCounter
from pipelines_under_test.event_time import DELAY_MS, ROCKSDB, WINDOW_MS, WindowedCount
from properties import oracle, watermark

OUTPUT = "key string, n long, total long, ids array<long>"


TTL_MS = 3_600_000  # longer than any trial: no entry expires (processing time is no logical point to judge at)


def _processor(kind: str, evolved: bool = False):
    """The StatefulProcessor of ``kind`` (built in the driver: pyspark imports stay out of the harness);
    ``evolved``: the value counter's upgraded code, whose ValueState has a field more (the last id seen)."""
    ttl = TTL_MS if kind == "ttl" else None
    added = ", last long" if evolved else ""
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    def row(key, n: int, total: int, ids: list[int]):
        return pd.DataFrame({"key": [key[0]], "n": [n], "total": [total], "ids": [ids]})

    class ValueCounter(StatefulProcessor):
        def init(self, handle) -> None:
            self.acc = handle.getValueState("acc", "n long, total long, ids array<long>" + added, ttl)

        def handleInputRows(self, key, rows, timerValues):
            n, total, ids = tuple(self.acc.get())[:3] if self.acc.exists() else (0, 0, [])
            ids = list(ids)
            for frame in rows:
                n += len(frame)
                total += int(frame["value"].sum())
                ids += [int(i) for i in frame["id"]]
            self.acc.update((n, total, ids, ids[-1]) if added else (n, total, ids))
            yield row(key, n, total, ids)

        def close(self) -> None:
            pass

    class ListCounter(StatefulProcessor):
        def init(self, handle) -> None:
            self.events = handle.getListState("events", "id long, value long")

        def handleInputRows(self, key, rows, timerValues):
            for frame in rows:
                self.events.appendList([(int(i), int(v)) for i, v in zip(frame["id"], frame["value"], strict=True)])
            seen = list(self.events.get())
            yield row(key, len(seen), sum(v for _, v in seen), [i for i, _ in seen])

        def close(self) -> None:
            pass

    class MapCounter(StatefulProcessor):
        def init(self, handle) -> None:
            self.values = handle.getMapState("values", "id long", "value long")

        def handleInputRows(self, key, rows, timerValues):
            for frame in rows:
                for i, v in zip(frame["id"], frame["value"], strict=True):
                    self.values.updateValue((int(i),), (int(v),))
            seen = [(k[0], v[0]) for k, v in self.values.iterator()]
            yield row(key, len(seen), sum(v for _, v in seen), [i for i, _ in seen])

        def close(self) -> None:
            pass

    return {"value": ValueCounter, "ttl": ValueCounter, "evolve": ValueCounter, "list": ListCounter,
            "map": MapCounter}[kind]()


class KeyedState(StatefulCounter):
    VARIABLES = {"value": "acc", "ttl": "acc", "evolve": "acc", "list": "events", "map": "values"}  # noqa: RUF012
    # RocksDB without changelog checkpointing replays no changes; list and map state rows are grouped per key.
    state_columns = ()
    state_change_feed = False

    def __init__(self, kind: str, description: str) -> None:
        super().__init__(f"keyed-state-{kind}", True, description)
        self.kind = kind
        self.state_options = {"stateVarName": self.VARIABLES[kind]}

    def transform(self, source, evolved: bool = False):
        return source.groupBy("key").transformWithStateInPandas(
            statefulProcessor=_processor(self.kind, evolved), outputStructType=OUTPUT, outputMode="Update",
            timeMode="ProcessingTime" if self.kind == "ttl" else "None")  # TTL counts processing time

    def start(self, ctx: DriverContext):
        ctx.spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
        evolved = self.kind == "evolve" and ctx.incarnation > 0
        if self.kind == "evolve":  # schema evolution needs the Avro encoding, from the first batch on
            ctx.spark.conf.set("spark.sql.streaming.stateStore.encodingFormat", "avro")
        return self.start_foreach_batch(ctx, self.transform(ctx.source, evolved), self._sink(ctx),
                                        output_mode="update")

    def state_rows(self, state_df):
        if self.kind in ("value", "evolve"):
            return state_df.selectExpr("key.key AS key", "value.n AS n", "value.total AS total")
        if self.kind == "ttl":  # a TTL'd value is read as (value, ttlExpirationMs)
            return state_df.selectExpr("key.key AS key", "value.value.n AS n", "value.value.total AS total")
        from pyspark.sql import functions as F

        value = F.col("list_element.value" if self.kind == "list" else "user_map_value.value")
        return state_df.groupBy(F.col("key.key").alias("key")).agg(
            F.count(F.lit(1)).alias("n"), F.sum(value).alias("total"))

    def expected_state(self, events: pl.DataFrame) -> pl.DataFrame:
        return oracle.key_counts(events)


def _timer_processor():
    """Per key, a MapState window start -> (n, total, ids); an event-time timer at each window's end emits the
    window and removes it. Built in the driver, like ``_processor``."""
    from datetime import UTC, datetime

    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor

    class WindowTimers(StatefulProcessor):
        def init(self, handle) -> None:
            self.handle = handle
            self.windows = handle.getMapState("windows", "start long", "n long, total long, ids array<long>")

        def handleInputRows(self, key, rows, timerValues):
            mark = timerValues.getCurrentWatermarkInMs()
            for row in rows:
                start = row.ms // WINDOW_MS * WINDOW_MS
                if start + WINDOW_MS <= mark:  # its timer has fired (or fires in this batch): too late to join
                    continue
                if self.windows.containsKey((start,)):
                    n, total, ids = self.windows.getValue((start,))
                else:
                    n, total, ids = 0, 0, []
                    self.handle.registerTimer(start + WINDOW_MS)
                self.windows.updateValue((start,), (n + 1, total + row.value, [*ids, row.id]))
            return iter(())

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            start = expiredTimerInfo.getExpiryTimeInMs() - WINDOW_MS
            if not self.windows.containsKey((start,)):
                return
            n, total, ids = self.windows.getValue((start,))
            self.windows.removeKey((start,))
            at = datetime.fromtimestamp(start / 1000, tz=UTC).strftime(watermark.WINDOW_KEY_FORMAT)
            yield Row(key=f"{key[0]}@{at}", n=n, total=total, ids=list(ids))

        def close(self) -> None:
            pass

    return WindowTimers()


class KeyedTimers(WindowedCount):
    """``transformWithState`` (the Row API, PySpark 4.1+) in event-time mode: the windowed count built by hand
    from MapState and event-time timers, as users write sessionisation; started, written and checked for wrong
    values as the windowed count is, on RocksDB. The timers and the map's entries live in the operator's state
    and are versioned with the offsets, so a replayed batch fires the same timers and emits the same windows,
    which the upsert by ``key@start`` absorbs: exactly-once, with provenance. The cut is not checked (the map's
    rows and the timers are two column families of one store; ``keyed-state-*`` check theirs)."""

    state = False
    state_store = True

    def __init__(self) -> None:
        super().__init__("keyed-state-timers", "rocksdb",
                         "transformWithState, event-time timers close 10 s windows kept in a MapState, "
                         "upserted by window: exactly-once.")

    def transform(self, source):
        from pyspark.sql import functions as F

        marked = source.withWatermark("event_time", f"{DELAY_MS // 1000} seconds")
        return (marked.select("id", "key", "value", "event_time", F.unix_millis("event_time").alias("ms"))
                .groupBy("key").transformWithState(statefulProcessor=_timer_processor(), outputStructType=OUTPUT,
                                                   outputMode="Append", timeMode="EventTime"))

    def oracle(self, events: pl.DataFrame) -> pl.DataFrame:
        return watermark.timer_window_expected(events, WINDOW_MS, DELAY_MS)

    def expected_state(self, events: pl.DataFrame) -> pl.DataFrame:
        raise NotImplementedError("keyed-state-timers: the cut is not checked")


KEYED_STATE_VALUE = KeyedState("value", "transformWithStateInPandas, ValueState (count, sum, ids) per key: "
                                        "exactly-once.")
KEYED_STATE_LIST = KeyedState("list", "transformWithStateInPandas, ListState of (id, value) per key: exactly-once.")
KEYED_STATE_MAP = KeyedState("map", "transformWithStateInPandas, MapState id -> value per key: exactly-once.")
KEYED_STATE_TTL = KeyedState("ttl", "transformWithStateInPandas, ValueState with a TTL (an hour: nothing expires "
                                    "in a trial) in processing-time mode: exactly-once.")
KEYED_STATE_EVOLVE = KeyedState("evolve", "transformWithStateInPandas ValueState whose schema gains a field when "
                                          "the code is upgraded at a restart (Avro state encoding): exactly-once.")
KEYED_STATE_TIMERS = KeyedTimers()
