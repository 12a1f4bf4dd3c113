"""Fabricated campaign directories for tests that must not start Spark (report, analyze store, errors).

The records have the shapes the trial runner and the checker write (see chaos/run/trial.py and
properties/check.py); ``make_campaign`` fills a real ``Campaign.create`` plan with them.
"""

from __future__ import annotations

import json
from pathlib import Path

from chaos.campaign.stored import Campaign, CampaignSpec
from chaos.scenario.scenario import Scenario
from chaos.store.atomic import write_json

HOSTILE = "<script>alert('x')</script>"


def history(faults: list[str], batches: int = 5, kill_at: int | None = 2) -> list[dict]:
    recs, t = [{"t": 0.0, "kind": "driver", "batch": None, "phase": None,
                "detail": {"event": "start", "incarnation": 0, "pid": 1}}], 15.0
    inc = 0
    for b in range(batches):
        for phase in ("planned", "reading", "sink-write", "sink-done", "committed"):
            t += 0.3
            recs.append({"t": round(t, 3), "kind": "phase", "batch": b, "phase": phase,
                         "detail": {"attempt": 1, "incarnation": inc}})
            if kill_at == b and phase == "sink-done" and inc == 0 and faults:
                recs.append({"t": t + 0.1, "kind": "driver", "batch": None, "phase": None,
                             "detail": {"event": "exit", "incarnation": 0, "rc": -9, "killed_by": faults[0]}})
                recs.append({"t": t + 0.2, "kind": "fault", "batch": b, "phase": "sink-done",
                             "detail": {"spec": faults[0], "done": True, "pid": 1}})
                inc, t = 1, t + 20
                recs.append({"t": t, "kind": "driver", "batch": None, "phase": None,
                             "detail": {"event": "start", "incarnation": 1, "pid": 2}})
                break
    recs.append({"t": t + 1, "kind": "fault", "batch": 1, "phase": "reading",
                 "detail": {"spec": "delay-source@1:reading/3s", "done": True}})
    recs.append({"t": t + 4, "kind": "heal", "batch": 1, "phase": "reading",
                 "detail": {"spec": "delay-source@1:reading/3s"}})
    return recs


def write_trial(run_dir: Path, scenario: Scenario, verdict: str, declared: str, reason: str = "") -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    scenario.save(run_dir / "scenario.json")
    dup = [{"id": 400 + i, "key": f"k{i:03d}", "batch": 2, "fault": (scenario.specs or [None])[0]}
           for i in range(3)] if verdict == "at-least-once" else []
    write_json(run_dir / "result.json", {
        "pipeline": scenario.pipeline, "guarantee": declared, "events": scenario.events, "batches": 5,
        "restarts": len(scenario.faults), "outcome": "drained", "reason": reason, "seconds": 61.5,
        "faults": [{"spec": f, "fired": True, "batch": int(f.split("@")[1].split(":")[0]),
                    "phase": f.split(":")[1].split("/")[0], "t": 30.0, "detail": {}} for f in scenario.specs],
        "offsets": [], "deliveries": None})
    from properties.verdicts import meets

    write_json(run_dir / "verdict.json", {
        "pipeline": scenario.pipeline, "declared": declared, "verdict": verdict,
        "meets": meets(verdict, declared), "inferred": False,
        "effect": {"counts": {"lost": 0, "duplicated": len(dup) * 66, "unexpected": 1 if reason else 0}},
        "lost": [], "duplicated": dup,
        "unexpected": [{"id": 7, "why": HOSTILE}] if reason else [],
        "deliveries": {"redelivered": [{"batch": 2, "times": 2, "effective": "more than once"}] if dup else []},
        "consistent_cut": None})
    (run_dir / "history.jsonl").write_text("\n".join(json.dumps(r) for r in history(scenario.specs)) + "\n")


def make_campaign(root: Path, trials: int = 2, hostile: bool = False) -> Campaign:
    """A finished two-pipeline campaign (append violates exactly-once, with a shrink record)."""
    spec = CampaignSpec(pipelines=["passthrough-append", "passthrough-idempotent"], expect="exactly-once",
                        trials=trials, seed=1, events=1000, examples=["kill-driver@2:sink-done"])
    campaign = Campaign.create(root, spec)
    for entry in campaign.plan:
        scenario = Scenario(**entry["scenario"])
        append = entry["pipeline"] == "passthrough-append"
        violated = append and any("kill-driver" in f and "sink-done" in f for f in scenario.specs)
        write_trial(campaign.trial_dir(entry["id"]), scenario, "at-least-once" if violated else "exactly-once",
                    "at-least-once" if append else "exactly-once", reason=HOSTILE if hostile else "")
    first = campaign.plan[0]
    minimal = Scenario(**{**first["scenario"], "faults": ["kill-driver@0:sink-done"]})
    write_trial(campaign.trial_dir("passthrough-append-shrink-00"), minimal, "at-least-once", "at-least-once")
    write_json(root / "shrinks" / "passthrough-append.json", {
        "pipeline": "passthrough-append", "declared": "exactly-once", "from": first["id"],
        "from_faults": first["scenario"]["faults"], "minimal": minimal.specs,
        "minimal_trial": "passthrough-append-shrink-00", "verdict": "at-least-once",
        "path": [{"trial": "passthrough-append-shrink-00", "faults": minimal.specs, "verdict": "at-least-once",
                  "violates": True}], "command": minimal.command()})
    return campaign
