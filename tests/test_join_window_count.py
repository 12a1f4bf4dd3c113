"""``join-window-count``'s oracle: which windows of the join's pairs are owed by the end of a run, and which rows no
pair explains (no Spark needed; tests/test_oracles_spark.py checks it against Spark batch)."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from pipelines_under_test import resolve

T0 = datetime(2026, 1, 1)


def stream(rows: list[tuple[int, str, float, int]]) -> pl.DataFrame:
    """``(id, key, seconds, batch)`` rows as the checker's events (value = id)."""
    return pl.DataFrame({"id": [r[0] for r in rows], "key": [r[1] for r in rows], "value": [r[0] for r in rows],
                         "event_time": [T0 + timedelta(seconds=r[2]) for r in rows], "batch": [r[3] for r in rows]})


# The final watermark is batch 2's: the largest event time of batches 0 and 1 (30 s) less the 10 s delay, 20 s.
EVENTS = stream([
    (0, "a", 1.0, 0), (1, "a", 1.5, 0),      # a pair in window [0, 10): ended 10 s before it, owed
    (2, "a", 19.0, 1), (3, "a", 19.5, 1),    # a pair in window [10, 20): ends at the mark, either way
    (4, "b", 25.0, 1), (5, "b", 25.2, 2),    # a pair in window [20, 30): open after it, not yet
    (6, "b", 30.0, 1), (7, "c", 30.1, 2),    # keys differ: no pair
    (8, "a", 1.2, 0),                        # an even event that also pairs with 1 (0.3 s before it)
])


def test_windows_that_ended_before_the_final_watermark_are_owed_and_the_rest_not_yet():
    pipeline = resolve("join-window-count")
    expected = {r["id"]: (r["required"], r["multiplicity"]) for r in pipeline.oracle(EVENTS).iter_rows(named=True)}
    assert expected == {0: (True, 1), 1: (True, 2), 8: (True, 1), 2: (False, 1), 3: (False, 1),
                        4: (False, 0), 5: (False, 0), 6: (False, 0), 7: (False, 0)}


def test_a_batch_query_owes_every_pair():
    expected = resolve("join-window-count").oracle(EVENTS.drop("batch"))
    assert dict(expected.select("id", "multiplicity").iter_rows()) == {0: 1, 1: 2, 8: 1, 2: 1, 3: 1, 4: 1, 5: 1,
                                                                       6: 0, 7: 0}


def test_a_row_with_an_id_of_another_window_or_a_wrong_count_is_unexplained():
    pipeline = resolve("join-window-count")
    good = pl.DataFrame({"key": ["a@2026-01-01T00:00:00"], "n": [4], "total": [0 + 1 + 8 + 1], "ids": [[0, 1, 8, 1]]})
    assert pipeline.unexplained(good, EVENTS) == []
    foreign = good.with_columns(ids=pl.lit([0, 1, 8, 3]), total=pl.lit(12))
    assert [u["why"] for u in pipeline.unexplained(foreign, EVENTS)] == [
        "3 is in no pair of window a@2026-01-01T00:00:00"]
    miscounted = good.with_columns(n=pl.lit(6))
    assert "row says n=6" in pipeline.unexplained(miscounted, EVENTS)[0]["why"]
