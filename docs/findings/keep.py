"""Keep a campaign directory's record in ``docs/findings/runs/NAME/``, without its sink data, and tally what is kept.

    python docs/findings/keep.py CAMPAIGN_DIR NAME   # summary.json, report.html (conformance.json), trials.jsonl
    python docs/findings/keep.py --tally             # trials per pipeline x fault window, with verdicts

``trials.jsonl`` holds one line per trial: its scenario (seed, faults, configuration) and the ``streamchaos trial``
command that runs it again, which faults fired at which batch and phase, the verdict and why. That is what a
reader needs to check a coverage table; the events, checkpoints and sinks stay out of the repository.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

from chaos.machine.spark_versions import spark_option
from chaos.scenario.scenario import Scenario

RUNS = Path(__file__).resolve().parent / "runs"


def trial_line(trial: Path, spark: str | None = None) -> dict | None:
    try:
        scenario = json.loads((trial / "scenario.json").read_text())
        result = json.loads((trial / "result.json").read_text())
    except (OSError, ValueError):
        return None  # a trial the campaign did not finish
    verdict_file = trial / "verdict.json"
    verdict = json.loads(verdict_file.read_text()) if verdict_file.exists() else {}
    return {
        "trial": trial.name,
        "scenario": scenario,
        "command": Scenario.load(trial / "scenario.json").command(spark),
        "fired": [{"spec": f["spec"], "batch": f.get("batch"), "phase": f.get("phase")}
                  for f in result.get("faults", []) if f.get("fired")],
        "outcome": result.get("outcome"),
        "reason": result.get("reason"),
        "verdict": verdict.get("verdict", result.get("outcome")),
        "meets": verdict.get("meets"),
        "counts": (verdict.get("effect") or {}).get("counts"),
        "seconds": result.get("seconds"),
        "spark": result.get("spark"),
    }


def keep(campaign: Path, name: str) -> int:
    out = RUNS / name
    out.mkdir(parents=True, exist_ok=True)
    for kept in ("summary.json", "report.html", "conformance.json"):
        if (campaign / kept).exists():  # named by the kept name, not by where it ran on the machine that ran it
            text = (campaign / kept).read_text().replace(str(campaign.resolve()), name)
            (out / kept).write_text(text.replace(str(campaign), name))
    spec = json.loads((campaign / "campaign.json").read_text())["spec"] if (campaign / "campaign.json").exists() else {}
    spark = spark_option(spec.get("spark"))  # the replay commands name it where it is not the installed one
    lines = [line for t in sorted((campaign / "trials").iterdir()) if (line := trial_line(t, spark))]
    (out / "trials.jsonl").write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in lines))
    return len(lines)


def tally() -> None:
    """Per pipeline (with its state configuration) and fault kind: fired faults by phase, and the verdicts."""
    windows: dict[tuple[str, str], Counter] = defaultdict(Counter)
    verdicts: dict[str, Counter] = defaultdict(Counter)
    total = 0
    for path in sorted(RUNS.glob("*/trials.jsonl")):
        for line in path.read_text().splitlines():
            trial = json.loads(line)
            total += 1
            pipeline = trial["scenario"]["pipeline"]
            verdicts[pipeline][trial["verdict"]] += 1
            for fault in trial["fired"]:
                action = fault["spec"].split("@", 1)[0]
                windows[(pipeline, action)][fault["phase"] or "-"] += 1
    print(f"{total} trials kept")
    for pipeline in sorted(verdicts):
        said = ", ".join(f"{v} {n}" for v, n in verdicts[pipeline].most_common())
        print(f"{pipeline}: {said}")
        for (name, action), phases in sorted(windows.items()):
            if name == pipeline:
                print(f"    {action}: " + ", ".join(f"`{p}` {n}" for p, n in sorted(phases.items())))


if __name__ == "__main__":
    if sys.argv[1:] == ["--tally"]:
        tally()
    elif len(sys.argv) == 3:
        print(f"{keep(Path(sys.argv[1]), sys.argv[2])} trials kept in {RUNS / sys.argv[2]}")
    else:
        sys.exit("usage: keep.py CAMPAIGN_DIR NAME | keep.py --tally")
