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

The oracle assumes no late events (``late_fraction`` 0, disorder under the watermark delay): with
them, which rows the join drops depends on Spark's per-side state watermarks, not modelled here.
"""

from __future__ import annotations

import polars as pl

from chaos.errors import UserError
from pipelines_under_test.base import DriverContext
from pipelines_under_test.event_time import event_time_conf
from pipelines_under_test.passthrough import SqliteRows
from properties import watermark

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

        left = (source.filter(F.col("id") % 2 == 0)
                .select(F.col("id").alias("left_id"), F.col("key").alias("lkey"), F.col("event_time").alias("ltime"))
                .withWatermark("ltime", DELAY))
        right = (source.filter(F.col("id") % 2 == 1)
                 .select(F.col("id").alias("right_id"), F.col("key").alias("rkey"), F.col("event_time").alias("rtime"))
                 .withWatermark("rtime", DELAY))
        joined = left.join(right, F.expr(
            f"lkey = rkey AND rtime >= ltime AND rtime <= ltime + INTERVAL {WITHIN_MS} MILLISECONDS"), self.how)
        return joined.select("left_id", "right_id", F.col("lkey").alias("key"))

    def start(self, ctx: DriverContext):
        event_time_conf(ctx)
        return self.start_foreach_batch(ctx, self.transform(ctx.source), self.rows_sink(ctx))

    def oracle(self, events: pl.DataFrame) -> pl.DataFrame:
        if watermark.streaming(events) and "late" in events.columns and events["late"].any():
            raise UserError("stream-join's oracle models no late events: run it with --late-fraction 0")
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


STREAM_JOIN = StreamJoin()
STREAM_JOIN_OUTER = StreamJoin("left_outer")
