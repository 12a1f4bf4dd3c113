"""A trial's result.json: what happened, in numbers other tools read (the campaign, the report, benchmarks).

The runner decides no verdict (properties/ does, from the stored run): the summary says how the trial
ended, which faults fired where, the batches Spark planned and committed with their offsets, how long
each driver kill took to the next commit, and how each driver incarnation started.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from chaos.evidence import judged_sink
from chaos.source import read_offsets_file
from chaos.sparkenv import current_version as spark_version

if TYPE_CHECKING:
    from chaos.trial import Trial


def batch_offsets(checkpoint: Path) -> list[dict]:
    """Per committed-or-planned batch: its start and end offsets from the write-ahead log."""
    folder = checkpoint / "offsets"
    names = sorted(int(n.name) for n in folder.iterdir() if n.name.isdigit()) if folder.is_dir() else []
    commits = checkpoint / "commits"
    out, previous = [], None
    for n in names:
        ends = read_offsets_file(str(folder / str(n)))
        end = ends[0] if ends else None
        out.append({"batch": n, "start": previous, "end": end, "committed": (commits / str(n)).exists()})
        previous = end
    return out


def recoveries(records: list[dict]) -> list[dict]:
    """For each driver kill: seconds from the kill to the next committed batch (the restart cost)."""
    out = []
    for i, rec in enumerate(records):
        if rec["kind"] != "fault" or not rec["detail"].get("spec", "").startswith("kill-driver"):
            continue
        nxt = next((r for r in records[i:] if r["kind"] == "phase" and r["phase"] == "committed"), None)
        out.append({"spec": rec["detail"]["spec"], "seconds": round(nxt["t"] - rec["t"], 2) if nxt else None})
    return out


def summarize(trial: Trial, events: pl.DataFrame, outcome: str, reason: str, seconds: float) -> dict:
    records = trial.history.snapshot()
    faults = []
    for armed in trial.controller.armed:
        rec = armed.record
        faults.append({
            "spec": armed.fault.spec,
            "fired": armed.fired and rec.get("detail", {}).get("done", False),
            "batch": armed.fault.batch,
            "phase": armed.fault.phase,
            "t": rec.get("t"),
            "detail": rec.get("detail", {}),
        })
    deliveries = trial.pipeline.read_deliveries(judged_sink(trial.dir))
    offsets = batch_offsets(trial.dir / "checkpoint")
    return {
        "pipeline": trial.scenario.pipeline,
        "guarantee": trial.pipeline.guarantee,
        "events": events.height,
        "batches": len([b for b in offsets if b["committed"]]),
        "restarts": trial.restarts,
        "incarnations": trial.incarnation + 1,
        "outcome": outcome,
        "reason": reason,
        "seconds": seconds,
        "faults": faults,
        "offsets": offsets,
        "deliveries": deliveries.to_dicts() if deliveries is not None else None,
        "phases": sum(1 for r in records if r["kind"] == "phase"),
        "recoveries": recoveries(records),
        # How each incarnation's driver started: "cold" (a JVM and a session booted then, with why),
        # "standby" (a warm standby took over), "spare" or "recycled" (booted ahead, chaos/spare.py).
        "drivers": [{"incarnation": r["detail"]["incarnation"], "driver_start": r["detail"].get("driver_start"),
                     **({"why": r["detail"]["why"]} if r["detail"].get("why") else {}),
                     **({"spark": r["detail"]["spark"]} if r["detail"].get("spark") else {})}
                    for r in records if r["kind"] == "driver" and r["detail"].get("event") == "start"],
        "cluster": trial.h.cluster.describe(),
        # Whether this trial's JVMs booted on the class archives (chaos/jvm/archive.py): None = without.
        "class_archives": {"driver": str(trial.h.class_archive) if trial.h.class_archive else None,
                           "executor": str(trial.h.executor_archive) if trial.h.executor_archive else None},
        "run_dir": str(trial.dir),
        "seed": trial.scenario.seed,
        "spark": spark_version(),  # the PySpark this trial ran on (``streamchaos --spark VERSION``)
    }

