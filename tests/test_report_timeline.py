"""The report's timeline: what a fault holds until its heal is a span (toxics, partitions, paused nodes)."""

from __future__ import annotations

from reports.data import timeline


def _phase(t: float, batch: int, phase: str) -> dict:
    return {"t": t, "kind": "phase", "batch": batch, "phase": phase, "detail": {"incarnation": 0}}


def test_a_partition_and_a_toxic_are_spans_from_fault_to_heal_and_a_kill_is_a_marker():
    spec = "partition@3:sink-write/node=sink/10s"
    records = [
        _phase(1.0, 3, "planned"), _phase(2.0, 3, "sink-write"),
        {"t": 2.1, "kind": "fault", "batch": 3, "phase": "sink-write", "detail": {"spec": spec, "done": True}},
        {"t": 2.2, "kind": "fault", "batch": 3, "phase": "sink-write",
         "detail": {"spec": "cut-sink@3:sink-write/2s", "done": True}},
        {"t": 4.2, "kind": "heal", "batch": 3, "phase": "sink-write", "detail": {"spec": "cut-sink@3:sink-write/2s"}},
        {"t": 12.1, "kind": "heal", "batch": 3, "phase": "sink-write", "detail": {"spec": spec, "node": "sink"}},
        _phase(12.3, 3, "sink-done"), _phase(12.4, 3, "committed"),
        {"t": 13.0, "kind": "fault", "batch": 4, "phase": "reading", "detail": {"spec": "kill-driver@4:reading",
                                                                               "done": True}},
    ]
    view = timeline(records)
    assert [(z["spec"], z["t0"], z["t1"]) for z in view["toxics"]] == [
        ("cut-sink@3:sink-write/2s", 2.2, 4.2), (spec, 2.1, 12.1)]
    assert [f["spec"] for f in view["faults"]] == [spec, "cut-sink@3:sink-write/2s", "kill-driver@4:reading"]
    assert view["end"] == 13.0
