"""Benchmark: how fast phase-exact faults find real consistency bugs, against time-based chaos.

    python benchmarks/detection.py [--trials 5] [--jobs a,b,...] [--events 2000] [--seed 0] [--out DIR]

Every job of the corpus (benchmarks/corpus/, each with its truth in truths.json: 12 seeded bugs, 6 correct
twins) runs as written, on one harness, ``--trials`` times in each of three modes, with the same events and
seeds in every mode:

* **planner**: the trials ``streamchaos campaign run --trials K`` plans for the job (``Campaign.create``: the
  canonical windows first, then drawn schedules);
* **random**: the same faults at uniformly random wall-clock times over ``[0, T]``, T being the median seconds
  of the job's no-fault trials (``--timing random``, chaos/scenario/random_times.py), as Chaos Mesh, Litmus, Pumba or a
  cron fire them;
* **none**: no fault (run first: they give T).

A trial *finds* the bug when its verdict does not meet exactly-once (what the job declares). Per job and mode:
found within K or not, trials to the first violation and the machine's busy CPU-seconds to it (/proc/stat,
every process counted; run on an otherwise idle machine). Totals: detection rate, median trials to detection,
violations found per CPU-hour of each mode and their ratio (a lower bound, counting one detection, when the
baseline finds none), and false alarms (violations on the twins). Everything lands in ``DIR/detection.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from usage import machine_busy  # noqa: E402  (benchmarks/usage.py)

from chaos.campaign.stored import Campaign, CampaignSpec  # noqa: E402
from chaos.jobs.reference import job_ref  # noqa: E402
from chaos.run.harness import Harness  # noqa: E402
from chaos.run.judge import run_trial  # noqa: E402
from chaos.scenario.random_times import at_random_times, timed_seed  # noqa: E402
from chaos.scenario.scenario import Scenario  # noqa: E402

CORPUS = Path(__file__).resolve().parent / "corpus"
MODES = ("planner", "random", "none")


def load_truths() -> dict:
    return json.loads((CORPUS / "truths.json").read_text())


def job_reference(name: str, truths: dict) -> str:
    job = truths["jobs"][name]
    return job_ref(f"{CORPUS / name}.py:run", truths["schema"], job["sink"], job["key"] or None)


def planned(ref: str, trials: int, seed: int, events: int, scratch: Path) -> list[Scenario]:
    """The scenarios ``campaign run --trials K`` plans for the job (planned in a scratch directory)."""
    spec = CampaignSpec(pipelines=[ref], trials=trials, seed=seed, events=events, shrink=False)
    campaign = Campaign.create(scratch, spec)
    return [Scenario(**entry["scenario"]) for entry in campaign.plan]


def one(harness: Harness, scenario: Scenario, run_dir: Path) -> dict:
    busy = machine_busy()
    try:
        verdict = run_trial(harness, scenario, run_dir, last=False)
    except Exception as exc:  # a harness failure is a row of the table, not the end of the benchmark
        return {"faults": scenario.specs, "error": f"{type(exc).__name__}: {str(exc)[:200]}",
                "cpu": machine_busy() - busy}
    return {"faults": scenario.specs, "verdict": verdict["verdict"], "found": verdict["meets"] is False,
            "fired": [f["spec"] for f in verdict.get("faults", []) if f.get("fired")],
            "seconds": verdict.get("seconds"), "cpu": round(machine_busy() - busy, 1)}


def first_found(runs: list[dict]) -> tuple[int | None, float | None]:
    """Trials and CPU-seconds to the first violation (None: none found)."""
    cpu = 0.0
    for k, run in enumerate(runs, 1):
        cpu += run["cpu"]
        if run.get("found"):
            return k, round(cpu, 1)
    return None, None


def run_job(harness: Harness, name: str, truths: dict, trials: int, seed: int, events: int, out: Path) -> dict:
    ref = job_reference(name, truths)
    scenarios = planned(ref, trials, seed, events, out / "plans" / name)
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    for k, scenario in enumerate(scenarios):  # no fault first: its first trial times the random faults
        runs["none"].append(one(harness, replace(scenario, faults=[]), out / name / f"none-{k}"))
    # The median, not the first: a job's first trial on the harness is cold (its driver boots with no spare).
    measured = [r["seconds"] for r in runs["none"] if r.get("seconds")]
    t = statistics.median(measured) if measured else None
    for k, scenario in enumerate(scenarios):
        runs["planner"].append(one(harness, scenario, out / name / f"planner-{k}"))
        if t is not None:
            timed = at_random_times(scenario.faults, t, timed_seed(scenario.seed))
            runs["random"].append(one(harness, replace(scenario, faults=timed), out / name / f"random-{k}"))
    job = truths["jobs"][name]
    row = {"job": name, "bug": "bug" in job, "truth": job["truth"], "T": t, "runs": runs}
    for mode in MODES:
        row[mode] = dict(zip(("trials_to_first", "cpu_to_first"), first_found(runs[mode]), strict=True))
    return row


def totals(rows: list[dict]) -> dict:
    bugs = [r for r in rows if r["bug"]]
    twins = [r for r in rows if not r["bug"]]
    out = {"bugs": len(bugs), "twins": len(twins)}
    for mode in MODES:
        found = [r[mode]["trials_to_first"] for r in bugs if r[mode]["trials_to_first"] is not None]
        violations = sum(1 for r in bugs for run in r["runs"][mode] if run.get("found"))
        cpu_h = sum(run["cpu"] for r in bugs for run in r["runs"][mode]) / 3600
        out[mode] = {
            "found": len(found), "rate": round(len(found) / len(bugs), 3) if bugs else None,
            "median_trials": statistics.median(found) if found else None,
            "violations": violations, "cpu_hours": round(cpu_h, 3),
            "per_cpu_hour": round(violations / cpu_h, 1) if cpu_h else None,
            "false_alarms": sum(1 for r in twins for run in r["runs"][mode] if run.get("found")),
            "twin_trials": sum(len(r["runs"][mode]) for r in twins),
            "errors": sum(1 for r in rows for run in r["runs"][mode] if "error" in run),
        }
    planner, baseline = out["planner"], out["random"]
    if planner["per_cpu_hour"] is not None and baseline["cpu_hours"]:
        counted = max(baseline["violations"], 1)  # none found: one counted, the ratio a lower bound
        out["ratio"] = round(planner["per_cpu_hour"] / (counted / baseline["cpu_hours"]), 1)
        out["ratio_lower_bound"] = baseline["violations"] == 0
    return out


def print_table(rows: list[dict], total: dict) -> None:
    def cell(r: dict, mode: str) -> str:
        k, cpu = r[mode]["trials_to_first"], r[mode]["cpu_to_first"]
        n = sum(1 for run in r["runs"][mode] if run.get("found"))
        return f"{n}/{len(r['runs'][mode])} first {k} ({cpu} CPU-s)" if k else f"0/{len(r['runs'][mode])}"

    print(f"{'job':<26} {'kind':<5} {'T s':>6}  {'planner':<26} {'random':<26} {'none':<26}")
    for r in rows:
        print(f"{r['job']:<26} {'bug' if r['bug'] else 'twin':<5} {r['T'] or 0:>6.1f}  {cell(r, 'planner'):<26} "
              f"{cell(r, 'random'):<26} {cell(r, 'none'):<26}")
    for mode in MODES:
        t = total[mode]
        print(f"{mode}: found {t['found']}/{total['bugs']} bugs (median {t['median_trials']} trials to the first), "
              f"{t['violations']} violating trials in {t['cpu_hours']} CPU-h = {t['per_cpu_hour']}/CPU-h; "
              f"false alarms {t['false_alarms']}/{t['twin_trials']} twin trials; harness errors {t['errors']}")
    if "ratio" in total:
        print(f"planner / random, violations per CPU-hour: {'>= ' if total['ratio_lower_bound'] else ''}"
              f"{total['ratio']}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5, help="trials per job and mode")
    parser.add_argument("--jobs", default="", help="comma-separated corpus jobs (default: all)")
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs") / time.strftime("detection-%Y%m%d-%H%M%S"))
    args = parser.parse_args()
    truths = load_truths()
    names = [n.strip() for n in args.jobs.split(",") if n.strip()] or list(truths["jobs"])
    unknown = [n for n in names if n not in truths["jobs"]]
    if unknown:
        sys.exit(f"--jobs: no corpus job {', '.join(unknown)}; the corpus has {', '.join(truths['jobs'])}")
    if args.out.exists() and any(args.out.iterdir()):
        sys.exit(f"{args.out} exists and is not empty: choose another --out")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    t0 = time.monotonic()
    with Harness(workdir=args.out / "harness") as harness:
        for name in names:
            rows.append(run_job(harness, name, truths, args.trials, args.seed, args.events, args.out))
            r = rows[-1]
            print(f"{name}: planner {r['planner']['trials_to_first']}, random {r['random']['trials_to_first']}, "
                  f"none {r['none']['trials_to_first']} (trials to the first violation)", flush=True)
            (args.out / "detection.json").write_text(json.dumps({"rows": rows, "totals": totals(rows)}, indent=1))
    total = totals(rows)
    (args.out / "detection.json").write_text(json.dumps({"rows": rows, "totals": total,
                                                         "wall_s": round(time.monotonic() - t0)}, indent=1))
    print_table(rows, total)


if __name__ == "__main__":
    main()
