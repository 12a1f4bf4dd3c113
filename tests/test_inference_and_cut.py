"""Per-key inference and the consistent-cut comparison, on synthetic data (no Spark)."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from properties.consistent_cut import check_cut, compare_state, events_below
from properties.inference import infer_from_counts
from properties.oracle import key_count_unexplained, key_counts
from properties.strategies import StreamSpec
from properties.verdicts import AT_LEAST_ONCE, AT_MOST_ONCE, EXACTLY_ONCE, INCORRECT, NONE, from_anomalies


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_inference_recovers_the_injected_per_key_deltas(data):
    events = StreamSpec(events=data.draw(st.integers(1, 500)), seed=data.draw(st.integers(0, 99)), keys=8).frame()
    expected = key_counts(events)
    keys = expected["key"].to_list()
    deltas = {k: data.draw(st.integers(-2, 2)) for k in keys}
    observed = expected.with_columns(pl.col("n") + pl.col("key").replace_strict(deltas, return_dtype=pl.Int64))
    observed = observed.filter(pl.col("n") > 0)
    stranger = data.draw(st.booleans())
    if stranger:
        observed = pl.concat([observed, pl.DataFrame({"key": ["nope"], "n": [1], "total": [5]})])
    inf = infer_from_counts(expected, observed)
    assert {d["key"] for d in inf.duplicated} == {k for k, d in deltas.items() if d > 0}
    assert {d["key"]: d["delta"] for d in inf.duplicated} == {k: d for k, d in deltas.items() if d > 0}
    under = {d["key"]: d["delta"] for d in inf.lost}
    for k, d in deltas.items():
        n = expected.filter(pl.col("key") == k)["n"][0]
        if d < 0:  # a key whose count drops to 0 leaves the sink: a loss of all its events
            assert under[k] == max(d, -n)
    assert inf.verdict == from_anomalies(bool(inf.lost), bool(inf.duplicated), stranger)
    assert inf.to_dict()["inferred"] is True


def test_inference_table_corners():
    want = pl.DataFrame({"key": ["a", "b"], "n": [3, 2]})
    assert infer_from_counts(want, want).verdict == EXACTLY_ONCE
    assert infer_from_counts(want, pl.DataFrame({"key": ["a", "b"], "n": [4, 2]})).verdict == AT_LEAST_ONCE
    assert infer_from_counts(want, pl.DataFrame({"key": ["a"], "n": [3]})).verdict == AT_MOST_ONCE
    assert infer_from_counts(want, pl.DataFrame({"key": ["a", "b"], "n": [4, 1]})).verdict == NONE
    assert infer_from_counts(want, pl.DataFrame({"key": ["a", "b", "z"], "n": [3, 2, 1]})).verdict == INCORRECT


def test_events_below_a_cut_are_exactly_the_consumed_prefix():
    events = StreamSpec(events=1000, seed=4, partitions=3).frame()
    below = events_below(events, {"0": 10, "1": 0, "2": 5})
    assert below.group_by("partition").len().sort("partition").rows() == [(0, 10), (2, 5)]
    assert (below.filter(pl.col("partition") == 0)["offset"].sort().to_list()) == list(range(10))


def _dump(tmp_path, events, offsets, corrupt=None):
    state = tmp_path / "state"
    state.mkdir(parents=True)
    for b in offsets:
        frame = key_counts(events_below(events, b["end"]))
        if corrupt and corrupt[0] == b["batch"]:
            frame = frame.with_columns(pl.when(pl.col("key") == corrupt[1]).then(pl.col("n") + 1)
                                       .otherwise(pl.col("n")).alias("n"))
        frame.write_parquet(state / f"{b['batch']}.parquet")
    return state


def _offsets(events, per_batch=100):
    out, ends = [], {}
    ordered = events.sort("id")
    for batch, start in enumerate(range(0, ordered.height, per_batch)):
        chunk = ordered.slice(start, per_batch)
        for p, o in chunk.select("partition", "offset").iter_rows():
            ends[str(p)] = max(ends.get(str(p), 0), o + 1)
        out.append({"batch": batch, "end": dict(ends), "committed": True})
    return out


def test_consistent_cut_passes_on_a_true_state_and_names_batch_and_key_of_a_corrupted_value(tmp_path):
    events = StreamSpec(events=600, seed=2, keys=5).frame()
    offsets = _offsets(events)
    good = check_cut(_dump(tmp_path / "good", events, offsets), events, offsets, key_counts)
    assert good["ok"] is True and good["batches_checked"] == list(range(6))
    key = events["key"][0]
    bad = check_cut(_dump(tmp_path / "bad", events, offsets, corrupt=(3, key)), events, offsets, key_counts)
    assert bad["ok"] is False
    assert [(m["batch"], m["key"]) for m in bad["mismatches"]] == [(3, key)]
    assert bad["mismatches"][0]["actual"]["n"] == bad["mismatches"][0]["expected"]["n"] + 1


def test_compare_state_reports_missing_and_extra_keys():
    want = pl.DataFrame({"key": ["a", "b"], "n": [1, 2]})
    have = pl.DataFrame({"key": ["b", "c"], "n": [2, 7]})
    assert compare_state(want, have) == [
        {"key": "a", "expected": {"n": 1}, "actual": None},
        {"key": "c", "expected": None, "actual": {"n": 7}},
    ]


def test_aggregate_rows_that_contradict_their_own_provenance_are_unexplained():
    events = pl.DataFrame({"id": [1, 2, 3], "key": ["a", "a", "b"], "value": [10, 20, 5]})
    right = pl.DataFrame({"key": ["a", "b"], "n": [2, 1], "total": [30, 5], "ids": [[1, 2], [3]]})
    assert key_count_unexplained(right, events) == []
    wrong = pl.DataFrame({"key": ["a", "b"], "n": [2, 1], "total": [31, 5], "ids": [[1, 2], [1]]})
    found = {u["key"]: u["why"] for u in key_count_unexplained(wrong, events)}
    assert set(found) == {"a", "b"} and "other keys" in found["b"]


def test_a_keyed_jobs_anomaly_without_event_ids_names_the_replayed_batch_and_its_fault(capsys):
    """A job compared by ``--key customer`` writes rows that name no event: its duplicate is explained by the
    batch a restarted driver ran again and the fault before it, and says that its rows carry no id."""
    from chaos.cli.console import print_verdict
    from properties.check import attribute_keys

    def phase(t, batch, name, incarnation):
        return {"t": t, "kind": "phase", "batch": batch, "phase": name, "detail": {"incarnation": incarnation}}

    events = pl.DataFrame({"id": [1, 2, 3], "key": ["k000", "k001", "k002"]})
    id_batches = pl.DataFrame({"id": [1, 2, 3], "batch": [0, 1, 2]})
    timeline = [phase(1.0, 1, "committed", 0), phase(2.0, 2, "sink-done", 0),
                {"t": 2.1, "kind": "fault", "batch": 2, "phase": "sink-done",
                 "detail": {"spec": "kill-driver@2:sink-done", "done": True}},
                phase(9.0, 2, "sink-done", 1), phase(9.5, 2, "committed", 1), phase(10.0, 3, "committed", 1)]
    dup = attribute_keys([{"key": "customer=acme", "delta": 1, "want": "total=5", "have": "total=7"}], events,
                         id_batches, timeline)
    assert dup == [{"key": "customer=acme", "delta": 1, "want": "total=5", "have": "total=7", "batches": [2],
                    "faults": ["kill-driver@2:sink-done"], "no_ids": True}]
    print_verdict({"verdict": "at-least-once", "meets": False, "declared": "exactly-once", "inferred": True,
                   "compared": "keys", "anomaly_counts": {"lost": 0, "duplicated": 1, "unexpected": 0},
                   "keys": {"exact": 2, "over": 1, "under": 0}, "lost": [], "duplicated": dup, "unexpected": []})
    line = next(x for x in capsys.readouterr().out.splitlines() if "customer=acme" in x)
    assert "carry no event id" in line and "[2]" in line and "kill-driver@2:sink-done" in line


def test_columns_two_answers_disagree_on_are_left_out_and_a_key_of_them_is_no_key():
    from datetime import datetime

    from properties.rows import BatchAnswer, infer_from_rows, varying_columns

    def run(stamp: int, ids: list[str]) -> pl.DataFrame:
        return pl.DataFrame({"order_id": ["o1", "o2", "o3"], "amount": [5, 7, 9], "payment_id": ids,
                             "ingested_at": [datetime(2026, 1, 1, 0, 0, stamp)] * 3})

    first, second = run(1, ["u1", "u2", "u3"]), run(2, ["v1", "v2", "v3"])
    assert varying_columns(first, second) == ("payment_id", "ingested_at")
    assert varying_columns(first, first) == ()
    assert varying_columns(first, second.head(2)) == ()  # rows that vary: no column can be left out
    answer = BatchAnswer(first, None, varying_columns(first, second))
    # A correct twin stamped at other times, with other ids: exactly-once.
    assert infer_from_rows(answer, run(3, ["w1", "w2", "w3"])).verdict == EXACTLY_ONCE
    # A replay that inserted o2 again under a new uuid key: a duplicated row, by key or by row.
    replayed = pl.concat([run(3, ["w1", "w2", "w3"]), run(4, ["x1", "x2", "x3"]).filter(pl.col("order_id") == "o2")])
    for key in ((), ("payment_id",)):
        found = infer_from_rows(answer, replayed, key)
        assert found.verdict == AT_LEAST_ONCE and [d["key"] for d in found.duplicated] == [
            '{"order_id": "o2", "amount": 7}'], key
