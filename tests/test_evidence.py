"""Frozen evidence and loss attribution, on stored run directories written the way a trial writes them. No JVM.

A run is judged from its sink as the trial ended it: rows that reach the live sink later (a background
writer in a driver kept for the next trial) are a finding beside the verdict, and a re-check gives the
verdict the campaign printed.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from chaos.run.judge import judge
from chaos.scenario.faults import parse_fault
from chaos.scenario.scenario import Scenario, generate_events
from chaos.store.atomic import write_json
from chaos.store.evidence import freeze, judged_sink, late_writes
from chaos.stream.sinks import sqlite as sqlite_sink
from properties.attribution import attribute, batch_of_events, fault_for_loss

EVENTS, PER_BATCH = 600, 200


def _phase(t: float, batch: int, phase: str, incarnation: int = 0) -> dict:
    return {"t": t, "kind": "phase", "batch": batch, "phase": phase, "detail": {"incarnation": incarnation}}


def _fault(t: float, spec: str) -> dict:
    """A fired fault's record as the controller writes it: at the batch and phase it fired."""
    fault = parse_fault(spec)
    return {"t": t, "kind": "fault", "batch": fault.batch, "phase": fault.phase,
            "detail": {"spec": spec, "done": True}}


def stored_run(run_dir: Path, written_batches: list[int]) -> Path:
    """A drained passthrough-idempotent trial of 3 batches whose sink holds ``written_batches``, with the
    offsets, history and result a trial stores."""
    scenario = Scenario(pipeline="passthrough-idempotent", events=EVENTS, events_per_batch=PER_BATCH,
                        partitions=1, seed=4, faults=["kill-driver@2:committed"])
    run_dir.mkdir(parents=True)
    scenario.save(run_dir / "scenario.json")
    events = generate_events(scenario)
    events.write_parquet(run_dir / "events.parquet")
    (run_dir / "sink").mkdir()
    db = run_dir / "sink" / "sink.sqlite"
    sqlite_sink.create(db)
    write_batches(db, events, written_batches)
    offsets = [{"batch": b, "start": None if b == 0 else {"0": b * PER_BATCH},
                "end": {"0": (b + 1) * PER_BATCH}, "committed": True} for b in range(3)]
    history = [_phase(1.0 + b, b, p) for b in range(3) for p in ("planned", "sink-done", "committed")]
    history.append(_fault(3.1, "kill-driver@2:committed"))  # 0.1 s after commits/2
    (run_dir / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in history))
    write_json(run_dir / "result.json", {"pipeline": scenario.pipeline, "outcome": "drained", "reason": "",
                                         "seconds": 10.0, "offsets": offsets, "faults": [], "deliveries": None})
    return db


def write_batches(db: Path, events, batches: list[int]) -> None:
    rows = events.with_row_index("n").filter((events["offset"] // PER_BATCH).is_in(batches))
    with sqlite3.connect(db) as conn:
        for r in rows.iter_rows(named=True):
            conn.execute("INSERT INTO output VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (r["offset"] // PER_BATCH, r["id"], r["key"], r["value"], str(r["event_time"]),
                          r["partition"], r["offset"]))


def test_a_rechecked_run_keeps_its_verdict_and_reports_rows_written_after_the_trial_ended(tmp_path):
    run_dir = tmp_path / "run"
    db = stored_run(run_dir, written_batches=[0, 1])  # batch 2's write still pending when the trial ended
    frozen = freeze(run_dir)
    assert judged_sink(run_dir) == frozen and (frozen / "sink.sqlite").exists()
    first = judge(run_dir)
    assert first["verdict"] == "at-most-once" and first["late_writes"] is None
    assert first["effect"]["counts"]["lost"] == PER_BATCH

    # The background writer finishes after the verdict: the live sink now holds every event.
    events = __import__("polars").read_parquet(run_dir / "events.parquet")
    write_batches(db, events, [2])
    assert late_writes(run_dir) == {"changed": ["sink.sqlite"], "added": [], "removed": []}
    again = judge(run_dir)
    assert again["verdict"] == "at-most-once" and again["lost"] == first["lost"]
    assert again["late_writes"]["rows"] == PER_BATCH and "after the trial ended" in again["late_writes"]["note"]

    # A new file in the sink is a late write too; a removed one as well.
    (run_dir / "sink" / "extra.parquet").write_bytes(b"x")
    assert late_writes(run_dir)["added"] == ["extra.parquet"]


def test_a_run_stored_before_snapshots_is_judged_from_its_live_sink(tmp_path):
    run_dir = tmp_path / "old"
    stored_run(run_dir, written_batches=[0, 1, 2])
    assert judged_sink(run_dir) == run_dir / "sink" and late_writes(run_dir) is None
    v = judge(run_dir)
    assert v["verdict"] == "exactly-once" and v["late_writes"] is None


def test_freezing_copies_a_consistent_database_while_another_connection_holds_a_write(tmp_path):
    run_dir = tmp_path / "run"
    db = stored_run(run_dir, written_batches=[0])
    writer = sqlite3.connect(db, timeout=1)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("DELETE FROM output")  # uncommitted: the snapshot must not see it
    try:
        frozen = freeze(run_dir)
    finally:
        writer.rollback()
        writer.close()
    with sqlite3.connect(frozen / "sink.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM output").fetchone()[0] == PER_BATCH
    assert not (run_dir / "frozen.tmp").exists()


def test_a_loss_after_its_batch_committed_is_attributed_to_the_fault_that_cut_the_pending_write(tmp_path):
    run_dir = tmp_path / "run"
    stored_run(run_dir, written_batches=[0, 1])
    freeze(run_dir)
    v = judge(run_dir)
    lost = {(a["batch"], a["fault"]) for a in v["lost"]}
    assert lost == {(2, "kill-driver@2:committed")}
    assert all("after batch 2 committed" in a["why"] and "pending write" in a["why"] for a in v["lost"])

    history = [_phase(1.0, 0, "committed"), _phase(2.0, 1, "committed"), _fault(2.1, "kill-driver@1:committed"),
               _fault(5.0, "kill-executor@3:reading")]
    spec, why = fault_for_loss(history, 0)
    assert spec == "kill-driver@1:committed" and "after batch 0 committed" in why and "pending write" in why
    history.insert(0, _fault(0.5, "kill-executor@0:reading"))
    assert fault_for_loss(history, 0)[0] == "kill-executor@0:reading"  # it hit the batch itself
    assert fault_for_loss([_phase(1.0, 0, "committed")], 0) == (None, "no fault fired")

    events = __import__("polars").read_parquet(run_dir / "events.parquet")
    offsets = json.loads((run_dir / "result.json").read_text())["offsets"]
    ids = events["id"][:2].to_list()
    dup = attribute(ids, batch_of_events(events, offsets), history)
    assert {d["fault"] for d in dup} == {"kill-executor@0:reading"}  # duplicates: the nearest before the commit
