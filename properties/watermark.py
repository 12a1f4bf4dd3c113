"""Oracles for event-time operators: Spark's watermark, modelled batch by batch in polars.

Spark's global watermark during micro-batch M is the largest event time of batches 0..M-1 minus the
delay (none during batch 0); it is stored in offsets/M, so a replayed batch uses the same one. With
``spark.sql.streaming.noDataMicroBatches.enabled=false`` (our event-time pipelines set it) every
batch carries data, so the batch an event belongs to decides everything: ``check_run`` adds that
``batch`` column from the write-ahead offsets. Measured on Spark 4.3 (see the tests):

* two watermarks per batch (SPARK-40925): late rows are judged against the *previous* batch's
  watermark, watermark(M-1) — none in batches 0 and 1 — and state is evicted with watermark(M);
* window aggregation, append mode: a row of batch M whose window ends at or before watermark(M-1)
  is dropped as late; a window is emitted (and leaves the state) in the first batch M whose
  watermark(M) reaches its end — a late row that survived the filter forms a window emitted at once.
  After the last batch, windows that its watermark has not reached stay in the state;
* ``dropDuplicatesWithinWatermark``: a row of batch M with event time at or before watermark(M-1) is
  dropped as late; otherwise it is dropped when an earlier row with the same payload holds a live
  state entry, which expires at its event time + delay and is evicted at the end of the first batch
  whose watermark reaches that.

Without a ``batch`` column the events are one *batch* query (the differential test against Spark
batch, where watermarks do nothing): every row counts, every window is emitted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import polars as pl

from properties.oracle import key_count_unexplained

WINDOW_KEY_FORMAT = "%Y-%m-%dT%H:%M:%S"  # Spark: date_format(window.start, "yyyy-MM-dd'T'HH:mm:ss")


def streaming(events: pl.DataFrame) -> bool:
    return "batch" in events.columns


# The batches the query ran, records or not (the checker sets them from the write-ahead log while it judges): a
# batch that read no record still moves the watermark and evicts with it. Spark's Kafka source runs one when a
# partition is added to the topic, even with no record in it and no-data batches off.
RAN_BATCHES: ContextVar[tuple[int, ...]] = ContextVar("ran_batches", default=())


@contextmanager
def batches_ran(batches) -> Iterator[None]:
    token = RAN_BATCHES.set(tuple(sorted({int(b) for b in batches})))
    try:
        yield
    finally:
        RAN_BATCHES.reset(token)


def watermarks(events: pl.DataFrame, delay_ms: int) -> pl.DataFrame:
    """``batch, watermark_ms, late_ms`` for every batch that holds events, or ran (``batches_ran``) (null: no
    watermark yet): the watermark that evicts state in the batch, and the previous one, that drops late rows."""
    per = (events.filter(pl.col("batch") >= 0)
           .group_by("batch").agg(pl.col("event_time").max().dt.epoch("ms").alias("max_ms")).sort("batch"))
    if ran := RAN_BATCHES.get():
        every = pl.DataFrame({"batch": sorted(set(ran) | set(per["batch"].to_list()))},
                             schema={"batch": per.schema["batch"]})
        per = every.join(per, on="batch", how="left").sort("batch")
    marks = per.select("batch", (pl.col("max_ms").cum_max().forward_fill().shift(1) - delay_ms).alias("watermark_ms"))
    return marks.with_columns(late_ms=pl.col("watermark_ms").shift(1))


def _epoch_ms(col: str = "event_time") -> pl.Expr:
    return pl.col(col).dt.epoch("ms")


def window_rows(events: pl.DataFrame, window_ms: int, delay_ms: int) -> pl.DataFrame:
    """Every event with its window (``wkey``: ``key@start``, ``window_end_ms``) and whether Spark keeps it."""
    start = (_epoch_ms() // window_ms) * window_ms
    rows = events.with_columns(
        window_start=pl.from_epoch(start, time_unit="ms"), window_end_ms=start + window_ms)
    rows = rows.with_columns(wkey=pl.col("key") + "@" + pl.col("window_start").dt.strftime(WINDOW_KEY_FORMAT))
    if not streaming(events):
        return rows.with_columns(kept=pl.lit(True))
    rows = rows.join(watermarks(events, delay_ms).drop("watermark_ms"), on="batch", how="left")
    return rows.with_columns(
        kept=(pl.col("batch") >= 0) & (pl.col("late_ms").is_null() | (pl.col("window_end_ms") > pl.col("late_ms")))
    ).drop("late_ms")


def final_watermark(events: pl.DataFrame, delay_ms: int) -> int | None:
    """The watermark of the last batch: windows ending at or before it have been emitted."""
    marks = watermarks(events, delay_ms)
    return marks["watermark_ms"][-1] if marks.height else None


def window_expected(events: pl.DataFrame, window_ms: int, delay_ms: int) -> pl.DataFrame:
    """Per id: ``required``/``multiplicity`` 1 iff its row is kept and its window was emitted."""
    rows = window_rows(events, window_ms, delay_ms)
    if streaming(events):
        mark = final_watermark(events, delay_ms)
        emitted = pl.lit(False) if mark is None else pl.col("window_end_ms") <= mark
        rows = rows.with_columns(kept=pl.col("kept") & emitted)
    return rows.select("id", required=pl.col("kept"), multiplicity=pl.col("kept").cast(pl.Int64))


def timer_window_expected(events: pl.DataFrame, window_ms: int, delay_ms: int) -> pl.DataFrame:
    """Per id, for windows a ``transformWithState`` processor closes with event-time timers (``keyed-state-timers``):
    a row of batch M joins its window unless the window ends at or before watermark(M), the watermark its
    timers fire at (the processor drops it then: the window has been, or is being, emitted), and a window is
    emitted once, by its timer, in the first batch whose watermark reaches its end. A batch query has no
    watermark, so no event-time timer fires and nothing is emitted (measured on Spark 4.3)."""
    rows = window_rows(events, window_ms, delay_ms)
    if not streaming(events):
        rows = rows.with_columns(kept=pl.lit(False))
    else:
        marks = watermarks(events, delay_ms).select("batch", "watermark_ms")
        mark = final_watermark(events, delay_ms)
        open_then = pl.col("watermark_ms").is_null() | (pl.col("window_end_ms") > pl.col("watermark_ms"))
        fired = pl.lit(False) if mark is None else pl.col("window_end_ms") <= mark
        rows = rows.join(marks, on="batch", how="left").with_columns(kept=pl.col("kept") & open_then & fired)
    return rows.select("id", required=pl.col("kept"), multiplicity=pl.col("kept").cast(pl.Int64)).sort("id")


def window_state(events: pl.DataFrame, window_ms: int, delay_ms: int) -> pl.DataFrame:
    """``key (key@start), n, total`` of the windows still in the state after the last batch of ``events``."""
    rows = window_rows(events, window_ms, delay_ms).filter("kept")
    if streaming(events):
        mark = final_watermark(events, delay_ms)
        if mark is not None:
            rows = rows.filter(pl.col("window_end_ms") > mark)
    return rows.group_by(pl.col("wkey").alias("key")).agg(
        pl.len().cast(pl.Int64).alias("n"), pl.col("value").sum().alias("total"))


def window_unexplained(output: pl.DataFrame, events: pl.DataFrame, window_ms: int) -> list[dict]:
    """Window rows whose count or sum disagree with the ids they list, or that list ids of another window."""
    rows = window_rows(events.drop("batch", strict=False), window_ms, 0)
    return key_count_unexplained(output, rows, event_key=pl.col("wkey"), what="another window")


def dedup_segments(events: pl.DataFrame, delay_ms: int, columns: tuple[str, ...]) -> pl.DataFrame:
    """``id, root, kept``: which rows ``dropDuplicatesWithinWatermark(columns)`` emits, and for a dropped
    copy the emitted row whose live state entry dropped it (its segment's root).

    Which copy of a payload Spark keeps inside one batch depends on row order after a shuffle; the
    checker compares segments, not the id Spark happened to keep.
    """
    ordered = events.sort("id")
    if streaming(events):
        table = watermarks(events, delay_ms)
        marks = dict(zip(table["batch"].to_list(), table["watermark_ms"].to_list(), strict=True))
        late = dict(zip(table["batch"].to_list(), table["late_ms"].to_list(), strict=True))
        batch_of = ordered["batch"].to_list()
    else:
        marks, late, batch_of = {}, {}, [0] * ordered.height
    ids = ordered["id"].to_list()
    times = ordered["event_time"].dt.epoch("ms").to_list()
    payloads = list(zip(*(ordered[c].to_list() for c in columns), strict=True))
    live: dict[tuple, tuple[int, int, int]] = {}  # payload -> (root id, expires at ms, batch inserted)
    roots, kept = [], []
    for i, payload in enumerate(payloads):
        batch = batch_of[i]
        late_mark = late.get(batch)
        if batch < 0 or (late_mark is not None and times[i] <= late_mark):
            roots.append(ids[i])  # dropped as late (or never read): no effect, its own segment
            kept.append(False)
            continue
        entry = live.get(payload)
        if entry is not None and batch > entry[2]:
            mark = marks.get(batch - 1)  # evicted at the end of batch-1 if its watermark reached expiry
            if mark is not None and entry[1] <= mark:
                entry = None
        if entry is None:
            live[payload] = (ids[i], times[i] + delay_ms, batch)
            roots.append(ids[i])
            kept.append(True)
        else:
            roots.append(entry[0])
            kept.append(False)
    return pl.DataFrame({"id": ids, "root": roots, "kept": kept},
                        schema={"id": pl.Int64, "root": pl.Int64, "kept": pl.Boolean})


def segment_roots(ids: pl.Series, events: pl.DataFrame, delay_ms: int, columns: tuple[str, ...]) -> pl.Series:
    """``ids`` (effects found in a sink), each replaced by its dedup segment's root (``dedup_segments``): the copy
    Spark kept in a batch counts for the segment, whichever copy it was."""
    roots = dedup_segments(events, delay_ms, columns).select("id", "root")
    return ids.alias("id").to_frame().join(roots, on="id", how="left").select(
        pl.coalesce("root", "id").alias("id"))["id"]
