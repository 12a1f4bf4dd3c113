"""Oracles: what the sink must hold, with provenance, computed from the input alone (polars).

An oracle returns one row per input event id: ``required`` (must appear) and ``multiplicity`` (how
many times its effect must appear). ``unexplained`` lists output rows that no loss or duplication
of inputs can explain (an id never input, or a payload that differs from its input event).
"""

from __future__ import annotations

import polars as pl


def passthrough_expected(events: pl.DataFrame) -> pl.DataFrame:
    """Every event must reach the sink exactly once, unchanged."""
    return events.select("id").with_columns(required=pl.lit(True), multiplicity=pl.lit(1, dtype=pl.Int64))


def passthrough_unexplained(output: pl.DataFrame, events: pl.DataFrame, limit: int = 1000) -> list[dict]:
    """Rows whose key or value differ from the input event with the same id."""
    joined = output.select("id", "key", "value").join(
        events.select("id", pl.col("key").alias("key_in"), pl.col("value").alias("value_in")), on="id", how="inner"
    )
    wrong = joined.filter((pl.col("key") != pl.col("key_in")) | (pl.col("value") != pl.col("value_in")))
    return [
        {"id": r["id"], "why": f"sink has ({r['key']}, {r['value']}), input was ({r['key_in']}, {r['value_in']})"}
        for r in wrong.head(limit).iter_rows(named=True)
    ]
