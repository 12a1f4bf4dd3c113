"""``stream-join``: a stream-stream inner join with watermarks, written idempotently by batch id.

The stream is split into two sides by id parity (think orders and their payments, sharing the key):
an even event joins every odd event of the same key whose event time lies within one second after
it. Both sides carry a 10 s watermark, so the join's state buffers each side until the other can no
longer match. The join state (four state stores) is versioned with the offsets, and a replayed batch
re-emits the same pairs, which the sink replaces by batch id: exactly-once, with provenance — every
output row names its two event ids, and an event owes as many effects as it has partners.

``stream-join-outer`` is the same join as a left outer join: an even event that no odd event matches is
written once with a null partner, when the watermark has passed the last time a partner could arrive and
Spark evicts it from the left side's state. Exactly when Spark evicts depends on its per-side state
watermark, so the oracle owes that row only for events whose match window closed more than
``OUTER_SLACK_MS`` before the final watermark, forbids it for those whose window is still open after it,
and allows at most one in between.

``join-window-count`` chains an aggregation after the inner join: the pairs are counted per key and 10 s
tumbling window of the left event's time, in append mode, upserted by ``key@window`` with the two ids of every
pair it counted (Spark 3.5+ passes the watermark down from the join to the aggregation, SPARK-42376). A window
is written once, when the aggregation's watermark passes its end; that watermark is the join's output
watermark, the global one less the join's 1 s range, so the oracle owes a window that ended more than
``OUTER_SLACK_MS`` before the final watermark, forbids one still open after it, and owes nothing either way in
between (an id with a pair there is not required, and may appear once per such pair).

The oracle assumes no late events (``late_fraction`` 0, disorder under the watermark delay): with
them, which rows the join drops depends on Spark's per-side state watermarks, not modelled here.
"""

from __future__ import annotations

import polars as pl

from chaos.errors import UserError
from pipelines_under_test.base import DriverContext
from pipelines_under_test.counts import StatefulCounter
from pipelines_under_test.event_time import WINDOW_MS, event_time_conf
from pipelines_under_test.passthrough import SqliteRows
from properties import watermark
from properties.watermark import WINDOW_KEY_FORMAT

WITHIN_MS = 1000
DELAY_MS = 10_000
DELAY = f"{DELAY_MS // 1000} seconds"
OUTER_SLACK_MS = 2_000
PAIR_TABLE = ("left_id INTEGER", "right_id INTEGER", "key TEXT")
PAIR_SCHEMA = {"left_id": pl.Int64, "right_id": pl.Int64, "key": pl.Utf8}
PAIR_COLUMNS = tuple(PAIR_SCHEMA)


def expected_pairs(events: pl.DataFrame) -> pl.DataFrame:
    """Every (even id, odd id) of one key with the odd event 0..1 s after the even one."""
    sides = events.select("id", "key", pl.col("event_time").dt.epoch("ms").alias("ms"))
    left = sides.filter(pl.col("id") % 2 == 0).rename({"id": "left_id", "ms": "left_ms"})
    right = sides.filter(pl.col("id") % 2 == 1).rename({"id": "right_id", "ms": "right_ms"})
    pairs = left.join(right, on="key", how="inner").filter(
        (pl.col("right_ms") >= pl.col("left_ms")) & (pl.col("right_ms") <= pl.col("left_ms") + WITHIN_MS))
    return pairs.select(*(pl.col(c).cast(t) for c, t in PAIR_SCHEMA.items()))


def unmatched_left(events: pl.DataFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    """``id, owed``: the even events no odd event matches (``pairs``: ``expected_pairs(events)``), and whether a
    left outer join has written their null row by the end: ``True`` owed, ``None`` either way (Spark's eviction
    point is within the slack), ``False`` not yet."""
    lone = events.filter(pl.col("id") % 2 == 0).join(pairs.select(id="left_id"), on="id", how="anti")
    if not watermark.streaming(events):
        return lone.select("id", owed=pl.lit(True))
    mark = watermark.final_watermark(events, DELAY_MS)
    closes = pl.col("event_time").dt.epoch("ms") + WITHIN_MS
    if mark is None:
        return lone.select("id", owed=pl.lit(False))
    return lone.select("id", owed=pl.when(pl.col("batch") < 0).then(False)  # never read
                       .when(closes < mark - OUTER_SLACK_MS).then(True)
                       .when(closes > mark + OUTER_SLACK_MS).then(False).otherwise(None))


class StreamJoin(SqliteRows):
    state_store = True  # both sides' buffers, not checked by the consistent cut
    schema = PAIR_SCHEMA
    table = PAIR_TABLE

    def __init__(self, how: str = "inner") -> None:
        outer = how == "left_outer"
        super().__init__("stream-join-outer" if outer else "stream-join", "idempotent", "exactly-once",
                         f"stream-stream {'left outer' if outer else 'inner'} join (even ids x odd ids, same key, "
                         "within 1 s), 10 s watermarks, idempotent sink.")
        self.how = how

    def transform(self, source):
        from pyspark.sql import functions as F

        return _joined(source, self.how).select("left_id", "right_id", F.col("lkey").alias("key"))

    def start(self, ctx: DriverContext):
        event_time_conf(ctx)
        return self.start_foreach_batch(ctx, self.transform(ctx.source), self.rows_sink(ctx))

    def oracle(self, events: pl.DataFrame) -> pl.DataFrame:
        _refuse_late(events, "stream-join")
        pairs = expected_pairs(events)
        owed = pl.concat([pairs.select(id="left_id"), pairs.select(id="right_id")]).group_by("id").len()
        expected = (events.select("id").sort("id").join(owed, on="id", how="left")
                    .select("id", required=pl.col("len").is_not_null(),
                            multiplicity=pl.col("len").fill_null(0).cast(pl.Int64)))
        if self.how != "left_outer":
            return expected
        lone = unmatched_left(events, pairs).with_columns(lone=pl.lit(True))
        return expected.join(lone, on="id", how="left").select(
            "id", required=pl.col("required") | pl.col("owed").fill_null(False),
            multiplicity=pl.when(pl.col("lone") & pl.col("owed").ne_missing(False)).then(1)
            .otherwise(pl.col("multiplicity")).cast(pl.Int64))

    def observed_ids(self, output: pl.DataFrame) -> pl.Series:
        return pl.concat([output["left_id"], output["right_id"].drop_nulls()]).alias("id")

    def unexplained(self, output: pl.DataFrame, events: pl.DataFrame) -> list[dict]:
        expected = expected_pairs(events)
        pairs = output.filter(pl.col("right_id").is_not_null()).select(*PAIR_COLUMNS).unique()
        wrong = pairs.join(expected, on=list(PAIR_COLUMNS), how="anti")
        lone = output.filter(pl.col("right_id").is_null()).select("left_id", "key").unique()
        matched = lone.join(expected.select("left_id").unique(), on="left_id", how="semi")
        matched = matched.vstack(lone.join(events.select(left_id="id", key="key"), on=["left_id", "key"], how="anti"))
        return ([{"id": r["left_id"],
                  "why": f"pair ({r['left_id']}, {r['right_id']}) of key {r['key']} is no join result"}
                 for r in wrong.sort("left_id").head(1000).iter_rows(named=True)]
                + [{"id": r["left_id"], "why": f"{r['left_id']} of key {r['key']} written without a partner, "
                                             "though it has one (or not of that key)"}
                   for r in matched.sort("left_id").head(1000).iter_rows(named=True)])


def _refuse_late(events: pl.DataFrame, name: str) -> None:
    if watermark.streaming(events) and "late" in events.columns and events["late"].any():
        raise UserError(f"{name}'s oracle models no late events: run it with --late-fraction 0")


def _joined(source, how: str = "inner"):
    """The join of ``source``'s two watermarked sides, even ids (left) and odd ids (right): same key, the right
    event 0..1 s after the left one."""
    from pyspark.sql import functions as F

    left = (source.filter(F.col("id") % 2 == 0)
            .select(F.col("id").alias("left_id"), F.col("key").alias("lkey"), F.col("event_time").alias("ltime"),
                    F.col("value").alias("lvalue"))
            .withWatermark("ltime", DELAY))
    right = (source.filter(F.col("id") % 2 == 1)
             .select(F.col("id").alias("right_id"), F.col("key").alias("rkey"), F.col("event_time").alias("rtime"),
                     F.col("value").alias("rvalue"))
             .withWatermark("rtime", DELAY))
    return left.join(right, F.expr(
        f"lkey = rkey AND rtime >= ltime AND rtime <= ltime + INTERVAL {WITHIN_MS} MILLISECONDS"), how)


def window_pairs(events: pl.DataFrame) -> pl.DataFrame:
    """``expected_pairs`` with the window of the left event's time: ``wkey`` (``key@start``), ``end_ms``."""
    pairs = expected_pairs(events)
    ms = events.select(left_id="id", left_ms=pl.col("event_time").dt.epoch("ms"))
    start = (pl.col("left_ms") // WINDOW_MS) * WINDOW_MS
    return pairs.join(ms, on="left_id").with_columns(
        wkey=pl.col("key") + "@" + pl.from_epoch(start, time_unit="ms").dt.strftime(WINDOW_KEY_FORMAT),
        end_ms=start + WINDOW_MS)


class JoinWindowCount(StatefulCounter):
    """The inner join, then a windowed count of its pairs: two stateful operators chained, append mode."""

    state = False  # two operators' state: the consistent cut is not checked
    state_store = True

    def __init__(self) -> None:
        super().__init__("join-window-count", True,
                         "the stream-stream inner join, then its pairs counted per key and 10 s window of the left "
                         "event: two chained stateful operators, append mode, upserted by window: exactly-once.")

    def transform(self, source):
        from pyspark.sql import functions as F

        counted = (_joined(source).groupBy(F.window("ltime", f"{WINDOW_MS // 1000} seconds"), "lkey")
                   .agg(F.count(F.lit(1)).alias("pairs"), F.sum(F.col("lvalue") + F.col("rvalue")).alias("total"),
                        F.flatten(F.collect_list(F.array("left_id", "right_id"))).alias("ids")))
        return counted.select(
            F.concat("lkey", F.lit("@"), F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss")).alias("key"),
            (F.col("pairs") * 2).alias("n"), "total", "ids")

    def start(self, ctx: DriverContext):
        event_time_conf(ctx)
        return self.start_foreach_batch(ctx, self.transform(ctx.source), self._sink(ctx), output_mode="append")

    def _windows(self, events: pl.DataFrame) -> pl.DataFrame:
        """``window_pairs`` with ``owed``: True written by the end, None either way, False not yet."""
        pairs = window_pairs(events)
        if not watermark.streaming(events):
            return pairs.with_columns(owed=pl.lit(True))
        _refuse_late(events, "join-window-count")
        mark = watermark.final_watermark(events, DELAY_MS)
        if mark is None:
            return pairs.with_columns(owed=pl.lit(False))
        return pairs.with_columns(owed=pl.when(pl.col("end_ms") <= mark - OUTER_SLACK_MS).then(True)
                                  .when(pl.col("end_ms") > mark).then(False).otherwise(None))

    def oracle(self, events: pl.DataFrame) -> pl.DataFrame:
        pairs = self._windows(events).filter(pl.col("owed").ne_missing(False))
        ids = pl.concat([pairs.select("owed", id="left_id"), pairs.select("owed", id="right_id")])
        per = ids.group_by("id").agg(owed=pl.col("owed").fill_null(False).sum(), either=pl.col("owed").is_null().sum())
        return (events.select("id").join(per, on="id", how="left")
                .select("id", required=(pl.col("owed").fill_null(0) > 0) & (pl.col("either").fill_null(0) == 0),
                        multiplicity=(pl.col("owed").fill_null(0) + pl.col("either").fill_null(0)).cast(pl.Int64))
                .sort("id"))

    def unexplained(self, output: pl.DataFrame, events: pl.DataFrame) -> list[dict]:
        """A row whose count or total disagree with the ids it lists, or that lists an id of no pair of its window."""
        values = events.select("id", "value")
        rows = output.select("key", "n", "total", pl.col("ids").alias("id")).explode("id").drop_nulls("id")
        sums = rows.join(values, on="id", how="left").group_by("key", "n", "total").agg(
            listed=pl.len(), sum_in=pl.col("value").sum())
        wrong = sums.filter((pl.col("listed") != pl.col("n")) | (pl.col("sum_in") != pl.col("total")))
        pairs = window_pairs(events)
        members = pl.concat([pairs.select("wkey", id="left_id"), pairs.select("wkey", id="right_id")]).unique()
        foreign = rows.join(members, left_on=["key", "id"], right_on=["wkey", "id"], how="anti")
        return ([{"key": r["key"], "why": f"row says n={r['n']} total={r['total']}, its {r['listed']} ids give "
                                          f"total={r['sum_in']}"}
                 for r in wrong.sort("key").head(1000).iter_rows(named=True)]
                + [{"id": r["id"], "why": f"{r['id']} is in no pair of window {r['key']}"}
                   for r in foreign.sort("id").head(1000).iter_rows(named=True)])

    def expected_counts(self, events: pl.DataFrame) -> pl.DataFrame:
        raise NotImplementedError("join-window-count has provenance")

    def expected_state(self, events: pl.DataFrame) -> pl.DataFrame:
        raise NotImplementedError("join-window-count keeps two operators' state: the cut is not checked")


STREAM_JOIN = StreamJoin()
STREAM_JOIN_OUTER = StreamJoin("left_outer")
JOIN_WINDOW_COUNT = JoinWindowCount()
