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


def key_counts(events: pl.DataFrame) -> pl.DataFrame:
    """Per key: how many events and the sum of their values (the counter's expected contents and state)."""
    return events.group_by("key").agg(pl.len().cast(pl.Int64).alias("n"), pl.col("value").sum().alias("total"))


def key_count_unexplained(output: pl.DataFrame, events: pl.DataFrame, limit: int = 1000, *,
                          event_key: pl.Expr | None = None, row_key: pl.Expr | None = None,
                          what: str = "other keys") -> list[dict]:
    """Aggregate rows whose count, sum or key disagree with the ids they list as provenance.

    A row listing an id twice is duplication, not a wrong value; but a count that differs from the
    length of its own ids list, a sum that is not the sum of its ids' values, or an id of another
    key can only be a wrong computation. ``event_key`` (over events) and ``row_key`` (over output
    rows) say which row an event belongs in when that is not plain ``key`` (windows, salted keys).
    """
    event_key = pl.col("key") if event_key is None else event_key
    row_key = pl.col("key") if row_key is None else row_key
    exploded = output.select("key", "n", "total", row_key.alias("row_key"), pl.col("ids").alias("id"))
    exploded = exploded.explode("id").drop_nulls("id")
    joined = exploded.join(events.select("id", event_key.alias("key_in"), "value"), on="id", how="left")
    per_row = joined.group_by("key", "n", "total").agg(
        pl.len().alias("listed"), pl.col("value").sum().alias("sum_in"),
        (pl.col("key_in") != pl.col("row_key")).any().alias("foreign"),
    )
    wrong = per_row.filter((pl.col("listed") != pl.col("n")) | (pl.col("sum_in") != pl.col("total"))
                           | pl.col("foreign"))
    return [
        {"key": r["key"], "why": f"row says n={r['n']} total={r['total']}, its {r['listed']} ids give "
                                 f"total={r['sum_in']}" + (f" and include ids of {what}" if r["foreign"] else "")}
        for r in wrong.sort("key").head(limit).iter_rows(named=True)
    ]
