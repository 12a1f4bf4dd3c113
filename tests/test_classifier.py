"""The classifier against the verdict table (docs/verdicts.md), on synthetic sink contents."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from properties.attribution import attribute, batch_of_events, fault_before_commit
from properties.classifier import classify
from properties.oracle import passthrough_expected, passthrough_unexplained
from properties.verdicts import (
    AT_LEAST_ONCE,
    AT_MOST_ONCE,
    EXACTLY_ONCE,
    INCORRECT,
    NONE,
    STALLED,
    from_anomalies,
    meets,
    weakest,
)


@st.composite
def injected(draw):
    n = draw(st.integers(1, 400))
    ids = list(range(n))
    lost = draw(st.sets(st.sampled_from(ids), max_size=min(n, 20)))
    dup = draw(st.sets(st.sampled_from([i for i in ids if i not in lost] or [0]), max_size=20)) - lost
    extra_times = {i: draw(st.integers(1, 3)) for i in dup}
    strangers = draw(st.sets(st.integers(10_000, 20_000), max_size=3))
    return n, lost, dup, extra_times, strangers


@settings(max_examples=200, deadline=None)
@given(injected())
def test_injected_anomalies_give_the_tables_verdict_and_exactly_those_ids(case):
    n, lost, dup, extra_times, strangers = case
    events = pl.DataFrame({"id": list(range(n))})
    observed = [i for i in range(n) if i not in lost]
    observed += [i for i in dup for _ in range(extra_times[i])]
    observed += sorted(strangers)
    c = classify(passthrough_expected(events), pl.Series(observed))
    assert c.lost == sorted(lost)
    assert c.duplicated == sorted(dup)
    assert [u["id"] for u in c.unexpected] == sorted(strangers)
    assert c.verdict == from_anomalies(bool(lost), bool(dup), bool(strangers))
    assert c.multiplicity["0"] == len(lost) and c.multiplicity[">1"] == len(dup)


def test_the_table():
    assert from_anomalies(False, False, False) == EXACTLY_ONCE
    assert from_anomalies(False, True, False) == AT_LEAST_ONCE
    assert from_anomalies(True, False, False) == AT_MOST_ONCE
    assert from_anomalies(True, True, False) == NONE
    assert all(from_anomalies(a, b, True) == INCORRECT for a in (0, 1) for b in (0, 1))


def test_optional_ids_may_be_missing():
    expected = pl.DataFrame({"id": [1, 2, 3], "required": [True, False, True], "multiplicity": [1, 1, 1]})
    assert classify(expected, pl.Series([1, 3])).verdict == EXACTLY_ONCE
    assert classify(expected, pl.Series([1])).lost == [3]


def test_wrong_payload_is_unexpected():
    events = pl.DataFrame({"id": [1, 2], "key": ["a", "b"], "value": [10, 20]})
    output = pl.DataFrame({"id": [1, 2], "key": ["a", "b"], "value": [10, 21]})
    wrong = passthrough_unexplained(output, events)
    assert [u["id"] for u in wrong] == [2] and "input was (b, 20)" in wrong[0]["why"]
    assert classify(passthrough_expected(events), output["id"], wrong).verdict == INCORRECT


def test_order_of_strength_and_campaign_verdicts():
    assert weakest([EXACTLY_ONCE, AT_LEAST_ONCE]) == AT_LEAST_ONCE
    assert weakest([AT_LEAST_ONCE, AT_MOST_ONCE]) == NONE
    assert weakest([EXACTLY_ONCE, INCORRECT, AT_LEAST_ONCE]) == INCORRECT
    assert weakest([EXACTLY_ONCE, STALLED]) == EXACTLY_ONCE
    assert weakest([STALLED]) == STALLED
    assert meets(EXACTLY_ONCE, AT_LEAST_ONCE) and meets(AT_LEAST_ONCE, AT_LEAST_ONCE)
    assert not meets(AT_LEAST_ONCE, EXACTLY_ONCE) and not meets(AT_MOST_ONCE, AT_LEAST_ONCE)
    assert not meets(NONE, AT_MOST_ONCE) and meets(NONE, NONE) and not meets(INCORRECT, NONE)
    assert meets(STALLED, EXACTLY_ONCE) is None


def test_attribution_names_the_batch_and_the_fault_before_its_commit():
    events = pl.DataFrame({"id": [0, 1, 2, 3, 4, 5], "partition": [0, 1, 0, 1, 0, 1], "offset": [0, 0, 1, 1, 2, 2]})
    offsets = [
        {"batch": 0, "start": None, "end": {"0": 1, "1": 1}},
        {"batch": 1, "start": {"0": 1, "1": 1}, "end": {"0": 2, "1": 2}},
        {"batch": 2, "start": {"0": 2, "1": 2}, "end": {"0": 3, "1": 3}},
    ]
    id_batches = batch_of_events(events, offsets)
    assert dict(id_batches.sort("id").iter_rows()) == {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2}
    history = [
        {"t": 1.0, "kind": "phase", "batch": 0, "phase": "committed", "detail": {}},
        {"t": 2.0, "kind": "fault", "batch": 1, "phase": "sink-done", "detail": {"spec": "kill-driver@1:sink-done",
                                                                                  "done": True}},
        {"t": 9.0, "kind": "phase", "batch": 1, "phase": "committed", "detail": {}},
        {"t": 9.5, "kind": "phase", "batch": 2, "phase": "committed", "detail": {}},
    ]
    assert fault_before_commit(history, 0) is None
    assert fault_before_commit(history, 1) == "kill-driver@1:sink-done"
    assert attribute([3, 0], id_batches, history) == [
        {"id": 3, "batch": 1, "fault": "kill-driver@1:sink-done", "why": "nearest fault before batch 1 committed"},
        {"id": 0, "batch": 0, "fault": None, "why": "no fault fired"},
    ]
    # As losses: batch 0 committed before the kill, which cut its pending write.
    assert [(a["fault"], a["why"]) for a in attribute([0], id_batches, history, lost=True)] == [
        ("kill-driver@1:sink-done", "first fault after batch 0 committed: it cut the batch's still pending write")]


def test_sparse_and_unsorted_ids_classify_like_dense_ones():
    ids = [30, 3, 9, 12, 27]
    expected = pl.DataFrame({"id": ids}).with_columns(required=pl.lit(True), multiplicity=pl.lit(1))
    c = classify(expected, pl.Series([3, 3, 9, 12, 27, 28, 100]))
    assert c.lost == [30] and c.duplicated == [3]
    assert [u["id"] for u in c.unexpected] == [28, 100]
    assert c.multiplicity == {"0": 1, "1": 3, ">1": 1}


def test_campaign_aggregation_takes_the_weakest_verdict_per_pipeline():
    from properties.verdicts import aggregate

    trials = [
        {"pipeline": "a", "declared": EXACTLY_ONCE, "verdict": EXACTLY_ONCE},
        {"pipeline": "a", "declared": EXACTLY_ONCE, "verdict": AT_LEAST_ONCE},
        {"pipeline": "b", "declared": AT_LEAST_ONCE, "verdict": EXACTLY_ONCE},
        {"pipeline": "b", "declared": AT_LEAST_ONCE, "verdict": STALLED},
        {"pipeline": "c", "declared": AT_LEAST_ONCE, "verdict": AT_MOST_ONCE},
        {"pipeline": "c", "declared": AT_LEAST_ONCE, "verdict": AT_LEAST_ONCE},
    ]
    got = aggregate(trials)
    assert got["a"] == {"declared": EXACTLY_ONCE, "trials": 2, "verdict": AT_LEAST_ONCE, "meets": False, "stalled": 0,
                        "refused": 0}
    assert got["b"]["verdict"] == EXACTLY_ONCE and got["b"]["meets"] is True and got["b"]["stalled"] == 1
    assert got["c"]["verdict"] == NONE and got["c"]["meets"] is False
