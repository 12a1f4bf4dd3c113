"""``nondeterministic-key``: a key derived with ``rand()`` before a streaming aggregation.

Each event is counted under ``key#b`` with ``b = floor(rand() * 1000)``: a salted key (the usual
cure for a hot key, done wrong), or any grouping on a random draw. ``rand()`` draws its seed when
the driver builds the plan, so a restarted driver that replays batch N sends the same events to
other buckets. The first attempt already upserted its buckets; the replay upserts different ones,
and with many buckets most of the first attempt's rows are never overwritten again: the sink ends
with ids counted under two buckets, rows that no single run of the query could produce. (With a few
buckets, later batches rewrite every bucket with the replay's state and the damage is painted over
— measured: 3 buckets came out exactly-once.) Spark's exactly-once needs a deterministic query; the
classifier must call this ``incorrect``, not a mere duplicate.
"""

from __future__ import annotations

import polars as pl

from pipelines_under_test.counts import StatefulCounter
from properties import oracle

BUCKETS = 1000


class NondeterministicKey(StatefulCounter):
    def __init__(self) -> None:
        super().__init__("nondeterministic-key", True,
                         "groupBy(key + '#' + floor(rand()*1000)) count/sum/ids, upserted: replays re-bucket.")
        self.guarantee = "incorrect"
        self.state = False  # the state is right at every cut; the point is the output
        self.state_store = True  # the aggregation still writes one

    def transform(self, source):
        from pyspark.sql import functions as F

        salted = source.withColumn(
            "key", F.concat("key", F.lit("#"), F.floor(F.rand() * BUCKETS).cast("string")))
        return super().transform(salted)

    def unexplained(self, output: pl.DataFrame, events: pl.DataFrame) -> list[dict]:
        """Rows inconsistent in themselves, and ids counted under two different buckets of their key."""
        wrong = oracle.key_count_unexplained(output, events, row_key=pl.col("key").str.split("#").list.first())
        exploded = output.select("key", pl.col("ids").alias("id")).explode("id").drop_nulls("id")
        split = (exploded.group_by("id").agg(pl.col("key").unique().sort().alias("buckets"))
                 .filter(pl.col("buckets").list.len() > 1).sort("id"))
        return wrong + [
            {"id": r["id"], "why": f"counted under {', '.join(r['buckets'])}: a replay drew another bucket"}
            for r in split.head(1000).iter_rows(named=True)
        ]
