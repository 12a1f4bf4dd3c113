"""What a report shows, read from a stored campaign directory: compact views, no Spark, no rendering.

A trial's history has hundreds of records; the report needs a few numbers per micro-batch. The
views below keep the page small enough for thousands of trials (a few KB per trial).
"""

from __future__ import annotations

from pathlib import Path

from chaos.machine.spark_versions import spark_option
from chaos.scenario.faults import PHASES

SAMPLE = 12




def timeline(records: list[dict], end: float | None = None) -> dict:
    """Micro-batches per driver incarnation with their phase times, faults, drivers and the spans of faults that
    hold until a heal (channel toxics, partitions, paused or starved nodes: ``toxics``)."""
    bars: dict[tuple[int, int], dict] = {}
    drivers: dict[int, dict] = {}
    faults, toxics, fired_at = [], [], {}
    for r in records:
        d = r.get("detail") or {}
        if r["kind"] == "phase" and r.get("batch") is not None:
            inc = d.get("incarnation", 0)
            bar = bars.setdefault((r["batch"], inc), {"b": r["batch"], "i": inc, "p": {}})
            bar["p"].setdefault(r["phase"], r["t"])
        elif r["kind"] == "driver":
            inc = d.get("incarnation", 0)
            drv = drivers.setdefault(inc, {"i": inc})
            drv[{"start": "s", "booted": "b", "exit": "x"}.get(d.get("event"), "other")] = r["t"]
        elif r["kind"] == "fault":
            faults.append({"t": r["t"], "spec": d.get("spec", "?"), "done": bool(d.get("done"))})
            fired_at[d.get("spec")] = r["t"]
        elif r["kind"] == "heal" and d.get("spec") in fired_at:
            toxics.append({"t0": fired_at[d["spec"]], "t1": r["t"], "spec": d["spec"]})
    out_bars = []
    for bar in sorted(bars.values(), key=lambda b: (min(b["p"].values()), b["b"])):
        times = [bar["p"].get(p) for p in PHASES]
        out_bars.append({"b": bar["b"], "i": bar["i"], "ph": times})
    last = max([r["t"] for r in records], default=0.0)
    return {"bars": out_bars, "drivers": sorted(drivers.values(), key=lambda d: d["i"]), "faults": faults,
            "toxics": toxics, "end": max(end or 0.0, last), "phases": list(PHASES)}


def trial_view(trial_id: str, run_dir: Path) -> dict | None:
    """One trial as the report shows it; None if the trial never finished. Its files are read as the checker
    reads them (chaos/store/records.py): a damaged one is one clear line, not a page built from what is left."""
    from chaos.scenario.scenario import Scenario
    from chaos.store.records import load_history, load_result, load_verdict

    if not all((run_dir / name).exists() for name in ("verdict.json", "result.json", "scenario.json")):
        return None
    verdict, result = load_verdict(run_dir), load_result(run_dir)
    scenario = Scenario.load(run_dir / "scenario.json")

    cut = verdict.get("consistent_cut")
    return {
        "id": trial_id,
        "pipeline": verdict["pipeline"],
        "declared": verdict["declared"],
        "verdict": verdict["verdict"],
        "meets": verdict["meets"],
        "inferred": verdict.get("inferred", False),
        "faults": scenario.specs,
        "fired": [f["spec"] for f in result.get("faults", []) if f.get("fired")],
        "seconds": result.get("seconds"),
        "outcome": result.get("outcome"),
        "node": _node(result.get("node")),  # the Ray node that ran it (chaos/campaign/on_ray.py), if any
        "reason": result.get("reason", ""),
        "restarts": result.get("restarts", 0),
        "events": result.get("events"),
        "batches": result.get("batches"),
        "counts": (verdict.get("effect") or {}).get("counts", {}),
        "lost": verdict.get("lost", [])[:SAMPLE],
        "duplicated": verdict.get("duplicated", [])[:SAMPLE],
        "unexpected": verdict.get("unexpected", [])[:SAMPLE],
        "redelivered": ((verdict.get("deliveries") or {}).get("redelivered") or []),
        "late_writes": verdict.get("late_writes"),
        "cut": None if cut is None else {
            "ok": cut.get("ok"), "checked": len(cut.get("batches_checked") or []),
            "committed": cut.get("committed_batches"), "mismatches": (cut.get("mismatches") or [])[:5],
        },
        "replay": scenario.command(spark_option(result.get("spark"))),
        "timeline": timeline(load_history(run_dir), result.get("seconds")),
    }


def campaign_view(root: Path) -> dict:
    """Everything the report renders for a campaign directory."""
    from chaos.campaign.stored import Campaign
    from chaos.store.records import load_object

    campaign = Campaign.load(root)
    summary = campaign.summarize()
    trials = [v for t in campaign.trial_ids() if (v := trial_view(t, campaign.trial_dir(t)))]
    for t in trials:  # judged as the campaign judged them (``--expect`` overrides the declared guarantee)
        judged = campaign.verdict_of(t["id"])
        t["declared"], t["meets"] = judged["declared"], judged["meets"]
    path = Path(root) / "conformance.json"
    conformance = load_object(path, {}, "re-run `streamchaos conformance`") if path.exists() else None
    return {"root": str(root), "created": campaign.data.get("created"), "summary": summary,
            "trials": trials, "conformance": conformance}


def _node(node) -> str | None:
    """A Ray node as the report names it: its host and the start of its id."""
    if not isinstance(node, dict):
        return None
    return f"{node.get('host', '?')} {str(node.get('id', ''))[:12]}".strip()
