"""The processing-time checker (properties/expiry.py): the logged clock decides each count, and nothing else."""

from __future__ import annotations

import polars as pl

from properties.expiry import unexplained

TTL = 4000


def events(*batches: list[tuple[int, str]]) -> pl.DataFrame:
    rows = [(i, key, 1, b) for b, batch in enumerate(batches) for i, key in batch]
    return pl.DataFrame(rows, schema={"id": pl.Int64, "key": pl.Utf8, "value": pl.Int64, "batch": pl.Int64},
                        orient="row")


def output(rows: list[tuple[int, str, int, int, int]]) -> pl.DataFrame:
    """(id, key, n, at, flushed)."""
    return pl.DataFrame([(i, k, 1, n, at, fl) for i, k, n, at, fl in rows],
                        schema={"id": pl.Int64, "key": pl.Utf8, "value": pl.Int64, "n": pl.Int64, "at": pl.Int64,
                                "flushed": pl.Int64}, orient="row")


STREAM = events([(0, "a"), (1, "a")], [(2, "a")], [(3, "a"), (4, "b")])


def test_counts_that_go_on_within_the_ttl_and_restart_after_it_are_explained():
    # batch 0 at 1000, batch 1 at 3000 (2 s later: live), batch 2 at 9000 (6 s later: expired)
    out = output([(0, "a", 1, 1000, 3000), (1, "a", 2, 1000, 3000), (2, "a", 3, 3000, 9000),
                  (3, "a", 1, 9000, 9500), (4, "b", 1, 9000, 9500)])
    assert unexplained(out, STREAM, TTL) == []


def test_a_count_resurrected_after_the_ttl_or_lost_within_it_is_flagged():
    resurrected = output([(0, "a", 1, 1000, 3000), (1, "a", 2, 1000, 3000), (2, "a", 3, 3000, 9000),
                          (3, "a", 4, 9000, 9500), (4, "b", 1, 9000, 9500)])
    wrong = unexplained(resurrected, STREAM, TTL)
    assert [w["id"] for w in wrong] == [3] and "6000 ms after" in wrong[0]["why"], wrong
    lost = output([(0, "a", 1, 1000, 3000), (1, "a", 2, 1000, 3000), (2, "a", 1, 3000, 9000),
                   (3, "a", 1, 9000, 9500), (4, "b", 1, 9000, 9500)])
    assert [w["id"] for w in unexplained(lost, STREAM, TTL)] == [2]


def test_exactly_the_ttl_apart_allows_either_and_an_unknown_clock_lets_both_through():
    either = events([(0, "a")], [(1, "a")])
    for n in (1, 2):
        assert unexplained(output([(0, "a", 1, 1000, 5000), (1, "a", n, 5000, 6000)]), either, TTL) == []
    unknown = events([(0, "a")], [(1, "a")], [(2, "a")])  # batch 1's only event was never written: no clock
    for n in (1, 3):
        assert unexplained(output([(0, "a", 1, 1000, 2000), (2, "a", n, 9000, 9500)]), unknown, TTL) == []


def test_a_lost_event_does_not_break_the_chain_but_a_second_clock_or_an_early_timer_does():
    out = output([(0, "a", 1, 1000, 3000), (2, "a", 3, 3000, 9000), (3, "a", 1, 9000, 9500),
                  (4, "b", 1, 9000, 9500)])  # id 1 lost: batch 0's clock still places id 2's count
    assert unexplained(out, STREAM, TTL) == []
    two_clocks = output([(0, "a", 1, 1000, 3000), (1, "a", 2, 1100, 3000)])
    assert {w["id"] for w in unexplained(two_clocks, STREAM, TTL)} >= {0, 1}
    early = output([(0, "a", 1, 1000, 999)])
    assert "before the batch that read it" in unexplained(early, STREAM, TTL)[0]["why"]


def test_a_batch_query_is_not_judged_by_the_clock():
    assert unexplained(output([(0, "a", 7, 1, 0)]), STREAM.drop("batch"), TTL) == []
