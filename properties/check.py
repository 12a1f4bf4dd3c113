"""Check a stored run directory: oracle + classifier + attribution -> verdict.json. No Spark, no process.

This is the only way a verdict is made, so re-checking an old run after an oracle or classifier
change gives the same answer a fresh trial would.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from chaos.errors import UserError
from chaos.scenario import Scenario
from pipelines_under_test import resolve
from properties.attribution import attribute, batch_of_events
from properties.classifier import classify
from properties.verdicts import STALLED, meets

SAMPLE = 20


def _load_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path} is missing: is this a streamchaos run directory?") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is corrupt ({exc.msg} at line {exc.lineno}): re-run the trial") from None


def load_history(run_dir: Path) -> list[dict]:
    records = []
    path = run_dir / "history.jsonl"
    if not path.exists():
        return records
    for n, line in enumerate(path.read_text().splitlines(), 1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            raise UserError(f"{path} line {n} is corrupt: re-run the trial") from None
    return records


def check_run(run_dir: Path) -> dict:
    run_dir = Path(run_dir)
    scenario = Scenario.load(run_dir / "scenario.json")
    result = _load_json(run_dir / "result.json")
    pipeline = resolve(scenario.pipeline)
    events = pl.read_parquet(run_dir / "events.parquet")
    output = pipeline.read_output(run_dir / "sink")
    history = load_history(run_dir)

    c = classify(pipeline.oracle(events), output["id"], pipeline.unexplained(output, events))
    id_batches = batch_of_events(events, result.get("offsets", []))
    verdict = c.verdict if result.get("outcome") == "drained" else STALLED
    report = {
        "pipeline": scenario.pipeline,
        "declared": pipeline.guarantee,
        "verdict": verdict,
        "meets": meets(verdict, pipeline.guarantee),
        "effect": c.to_dict(sample=SAMPLE),
        "lost": attribute(c.lost[:SAMPLE], id_batches, history),
        "duplicated": attribute(c.duplicated[:SAMPLE], id_batches, history),
        "unexpected": c.unexpected[:SAMPLE],
        "deliveries": deliveries_view(result.get("deliveries"), c.duplicated, id_batches),
    }
    if verdict == STALLED:
        report["effect"]["note"] = f"not drained ({result.get('reason', '')}): consistency not judged"
    tmp = run_dir / "verdict.json.tmp"
    tmp.write_text(json.dumps(report, indent=2, default=str))
    tmp.replace(run_dir / "verdict.json")
    return report


def deliveries_view(deliveries: list[dict] | None, duplicated: list[int], id_batches: pl.DataFrame) -> dict | None:
    """Batches the sink received more than once, and whether that shows in the final contents."""
    if deliveries is None:
        return None
    frame = pl.DataFrame(deliveries, schema={"batch_id": pl.Int64, "incarnation": pl.Int64, "rows": pl.Int64})
    times = frame.group_by("batch_id").len().filter(pl.col("len") > 1).sort("batch_id")
    dup_batches = set(
        id_batches.filter(pl.col("id").is_in(duplicated))["batch"].unique().to_list()) if duplicated else set()
    return {
        "redelivered": [
            {"batch": b, "times": n, "effective": "more than once" if b in dup_batches else "once"}
            for b, n in times.iter_rows()
        ],
    }
