"""Benchmark: how many real consistency bugs a CPU-hour of chaos finds, and how soon, against time-based chaos.

    python benchmarks/detection.py [--budget 100] [--trials 3] [--seeds 0,1,2] [--triggers default,processingTime:5s]
                                   [--jobs a,b,...] [--events 2000] [--shrink-trials 3] [--none-trials N]
                                   [--modes planner,random,none] [--twin-trials K] [--out DIR]
    python benchmarks/detection.py --merge DIR [DIR ...] [--jobs, --seeds, --triggers to filter]

Every job of the corpus (benchmarks/corpus/, each with its truth in truths.json: seeded bugs and their correct
twins) runs as written, on one harness, in three modes, with the same events and seeds in every mode:

* **planner**: the trials ``streamchaos campaign run`` plans for the job (``Campaign.create``: the canonical
  windows first, then drawn schedules);
* **random**: the same faults at uniformly random wall-clock times over ``[0, T]``, T being the median seconds
  of the job's no-fault trials (``--timing random``, chaos/scenario/random_times.py), as Chaos Mesh, Litmus, Pumba or a
  cron fire them;
* **none**: no fault (run first: they give T).

Each mode gets the same CPU budget per job (``--budget`` CPU-seconds: the machine's busy time, /proc/stat, every
process counted; run on an otherwise idle machine) and runs trials until its first violation, as a campaign's
user stops once the bug is found, or until the budget is spent. The planner's find is then shrunk with real
trials (``--shrink-trials``), as a campaign does; that CPU is counted apart. A trial *finds* the bug when its
verdict does not meet exactly-once (what the job declares); a find past the budget is censored ("not found in B
CPU-s").

Per job, mode, trigger and seed: trials and CPU-seconds to the first find. Per mode: **distinct bugs found per
CPU-hour** (bugs found within the budget over the CPU spent on the bug jobs, each job's spending capped at the
budget), the detection rate within ``--trials`` K trials, the median trials and CPU-seconds to a find, violating
trials per CPU-hour (secondary), false alarms (violations on the twins) and harness errors; each over every seed,
with its median and range. ``--triggers``: ``default`` runs each job's own trigger (the corpus jobs run batches
back to back); ``processingTime:5s`` runs it as production jobs run, a batch every five seconds that spends a
small share of its interval writing. A job whose truth names another PySpark (``"spark": "4.2.0"``: Delta Lake
runs up to Spark 4.2) runs in a run of this benchmark on that version's interpreter (``streamchaos spark add``),
its rows merged. Everything lands in ``DIR/detection.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from usage import machine_busy  # noqa: E402  (benchmarks/usage.py)

from chaos.campaign.stored import Campaign, CampaignSpec  # noqa: E402
from chaos.errors import UserError  # noqa: E402
from chaos.jobs.reference import job_ref  # noqa: E402
from chaos.machine.spark_versions import current_version, python_for, side_env  # noqa: E402
from chaos.run.harness import Harness  # noqa: E402
from chaos.run.judge import run_trial  # noqa: E402
from chaos.scenario.random_times import at_random_times, timed_seed  # noqa: E402
from chaos.scenario.scenario import Scenario  # noqa: E402
from chaos.scenario.variants import TRIGGER, trigger_args  # noqa: E402
from pipelines_under_test import resolve  # noqa: E402
from properties.planning import FAULT_KINDS  # noqa: E402
from properties.shrink import shrink_schedule  # noqa: E402

CORPUS = Path(__file__).resolve().parent / "corpus"
MODES = ("planner", "random", "none")
DEFAULT_TRIGGER = "default"  # the job's own trigger
PLAN_LENGTH = 12  # trials planned per job: more than any budget here spends


def load_truths() -> dict:
    return json.loads((CORPUS / "truths.json").read_text())


def job_reference(name: str, truths: dict) -> str:
    job = truths["jobs"][name]
    return job_ref(f"{CORPUS / name}.py:run", truths["schema"], job["sink"], job["key"] or None)


def by_spark(names: list[str], truths: dict) -> dict[str, list[str]]:
    """The jobs grouped by the PySpark they run on: their truth's ``spark``, else this interpreter's."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(truths["jobs"][name].get("spark", current_version()), []).append(name)
    return groups


def rows_on(version: str, names: list[str], args: argparse.Namespace) -> list[dict]:
    """The rows of ``names`` measured by this benchmark on ``version``'s interpreter, in ``OUT/spark-VERSION``."""
    try:
        python = python_for(version)
    except UserError as exc:
        sys.exit(f"{', '.join(names)}: {exc}")
    out = args.out / f"spark-{version}"
    done = subprocess.run([str(python), __file__, "--jobs", ",".join(names), "--out", str(out),
                           "--budget", str(args.budget), "--trials", str(args.trials), "--seeds", args.seeds,
                           "--triggers", args.triggers, "--events", str(args.events),
                           "--shrink-trials", str(args.shrink_trials), "--none-trials", str(args.none_trials),
                           "--modes", args.modes, "--twin-trials", str(args.twin_trials)],
                          env=side_env())
    if done.returncode != 0:
        sys.exit(f"{', '.join(names)} on pyspark {version}: the run failed (exit {done.returncode}), see above")
    return [{**row, "spark": version} for row in json.loads((out / "detection.json").read_text())["rows"]]


def planned(ref: str, trigger: str, seed: int, events: int, scratch: Path) -> list[Scenario]:
    """The scenarios ``campaign run`` plans for the job (planned in a scratch directory), in the plan's order."""
    conf = None if trigger == DEFAULT_TRIGGER else {TRIGGER: [trigger]}
    spec = CampaignSpec(pipelines=[ref], trials=PLAN_LENGTH, seed=seed, events=events, shrink=False, conf=conf)
    campaign = Campaign.create(scratch, spec)
    return [Scenario(**entry["scenario"]) for entry in campaign.plan]


def one(harness: Harness, scenario: Scenario, run_dir: Path) -> dict:
    busy = machine_busy()
    try:
        verdict = run_trial(harness, scenario, run_dir, last=False)
    except Exception as exc:  # a harness failure is a row of the table, not the end of the benchmark
        return {"faults": scenario.specs, "error": f"{type(exc).__name__}: {str(exc)[:200]}",
                "cpu": round(machine_busy() - busy, 1)}
    return {"faults": scenario.specs, "verdict": verdict["verdict"], "found": verdict["meets"] is False,
            "fired": [f["spec"] for f in verdict.get("faults", []) if f.get("fired")],
            "seconds": verdict.get("seconds"), "cpu": round(machine_busy() - busy, 1)}


def until_found(trial: Callable[[int], dict], budget: float, limit: int) -> list[dict]:
    """Trials ``trial(0)``, ``trial(1)``... until one finds the bug or the CPU budget is spent (a trial starts only
    while some budget is left), at most ``limit``."""
    runs: list[dict] = []
    spent = 0.0
    for k in range(limit):
        if spent >= budget:
            break
        runs.append(trial(k))
        spent += runs[-1]["cpu"]
        if runs[-1].get("found"):
            break
    return runs


def first_find(runs: list[dict], budget: float) -> dict:
    """Trials and CPU-seconds to the first violation, and the CPU spent counted against the budget (capped at it):
    a find that costs more than the budget is censored, as if the trials had been stopped there."""
    cpu = 0.0
    for k, run in enumerate(runs, 1):
        cpu += run["cpu"]
        if run.get("found") and cpu <= budget:
            return {"trials_to_first": k, "cpu_to_first": round(cpu, 1), "spent": round(cpu, 1)}
    return {"trials_to_first": None, "cpu_to_first": None, "spent": round(min(cpu, budget), 1)}


def shrunk(harness: Harness, ref: str, base: Scenario, trials: int, where: Path) -> dict:
    """The planner's violating schedule shrunk with real trials, as a campaign does once it found a bug; its CPU is
    counted apart from the CPU to the find."""
    runs: list[dict] = []

    def violates(faults: list[str]) -> bool:
        runs.append(one(harness, replace(base, faults=list(faults)), where / f"shrink-{len(runs)}"))
        return bool(runs[-1].get("found"))

    minimal = shrink_schedule(base.specs, violates, actions=FAULT_KINDS["kill"], budget=trials,
                              phases=resolve(ref).phases)
    return {"from": base.specs, "minimal": minimal, "trials": len(runs), "cpu": round(sum(r["cpu"] for r in runs), 1)}


def run_job(harness: Harness, name: str, truths: dict, trigger: str, seed: int, budget: float, events: int,
            out: Path, shrink_trials: int = 0, none_trials: int = PLAN_LENGTH,
            modes: tuple[str, ...] = MODES, twin_trials: int = 0) -> dict:
    """One job's row; a mode left out of ``modes`` runs no trial (the no-fault trials still run, at least one,
    when the random mode needs their T). A twin's planner runs ``twin_trials`` trials whatever they cost, when
    given: its question is a false alarm in the trials a campaign runs, not a find within a budget."""
    ref = job_reference(name, truths)
    where = out / f"{trigger.replace(':', '-')}-seed{seed}" / name
    scenarios = planned(ref, trigger, seed, events, where / "plan")
    runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
    # No fault first: its trials time the random faults.
    if "none" in modes or "random" in modes:
        runs["none"] = until_found(lambda k: one(harness, replace(scenarios[k], faults=[]), where / f"none-{k}"),
                                   budget, min(len(scenarios), max(none_trials, 1)))
    # The median, not the first: a job's first trial on the harness is cold (its driver boots with no spare).
    measured = [r["seconds"] for r in runs["none"] if r.get("seconds")]
    t = statistics.median(measured) if measured else None
    job = truths["jobs"][name]
    if "planner" in modes:
        planner_budget, planner_trials = budget, len(scenarios)
        if twin_trials and "bug" not in job:
            planner_budget, planner_trials = float("inf"), min(twin_trials, len(scenarios))
        runs["planner"] = until_found(lambda k: one(harness, scenarios[k], where / f"planner-{k}"), planner_budget,
                                      planner_trials)
    if "random" in modes and t is not None:
        runs["random"] = until_found(
        lambda k: one(harness, replace(scenarios[k], faults=at_random_times(scenarios[k].faults, t,
                                                                          timed_seed(scenarios[k].seed))),
                      where / f"random-{k}"), budget, len(scenarios))
    row = {"job": name, "bug": "bug" in job, "truth": job["truth"], "trigger": trigger, "seed": seed, "T": t,
           "budget": budget, "runs": runs}
    for mode in MODES:
        row[mode] = first_find(runs[mode], budget)
    if shrink_trials and row["planner"]["trials_to_first"] is not None:
        found = scenarios[row["planner"]["trials_to_first"] - 1]
        row["shrink"] = shrunk(harness, ref, found, shrink_trials, where)
    return row


def mode_figures(rows: list[dict], mode: str, within: int) -> dict:
    """One mode's figures over ``rows`` (one trigger and seed)."""
    bugs = [r for r in rows if r["bug"]]
    twins = [r for r in rows if not r["bug"]]
    firsts = [r[mode] for r in bugs if r[mode]["trials_to_first"] is not None]
    spent_h = sum(r[mode]["spent"] for r in bugs) / 3600
    every_h = sum(run["cpu"] for r in bugs for run in r["runs"][mode]) / 3600
    violations = sum(1 for r in bugs for run in r["runs"][mode] if run.get("found"))
    return {
        "found": len(firsts), "bugs": len(bugs),
        "rate_within": round(sum(1 for f in firsts if f["trials_to_first"] <= within) / len(bugs), 3)
        if bugs else None,
        "median_trials": statistics.median(f["trials_to_first"] for f in firsts) if firsts else None,
        "median_cpu_to_first": statistics.median(f["cpu_to_first"] for f in firsts) if firsts else None,
        "cpu_hours": round(spent_h, 6),
        "bugs_per_cpu_hour": round(len(firsts) / spent_h, 1) if spent_h else None,
        "violations_per_cpu_hour": round(violations / every_h, 1) if every_h else None,
        "false_alarms": sum(1 for r in twins for run in r["runs"][mode] if run.get("found")),
        "twin_trials": sum(len(r["runs"][mode]) for r in twins),
        "errors": sum(1 for r in rows for run in r["runs"][mode] if "error" in run),
    }


def spread(values: list[float | None]) -> dict:
    """Median and range over seeds (a seed whose figure is undefined is left out, and counted)."""
    known = [v for v in values if v is not None]
    return {"median": statistics.median(known) if known else None, "min": min(known, default=None),
            "max": max(known, default=None), "seeds": len(values), "undefined": len(values) - len(known)}


def totals(rows: list[dict], within: int) -> dict:
    """Per trigger and mode: each seed's figures and their spread; the planner over the random baseline in
    distinct bugs per CPU-hour, per seed (a lower bound, counting one find, when the baseline finds none)."""
    out: dict[str, dict] = {}
    for trigger in dict.fromkeys(r["trigger"] for r in rows):
        seeds = list(dict.fromkeys(r["seed"] for r in rows if r["trigger"] == trigger))
        per_seed = {seed: {mode: mode_figures([r for r in rows if r["trigger"] == trigger and r["seed"] == seed],
                                              mode, within) for mode in MODES} for seed in seeds}
        modes = {mode: {key: spread([per_seed[s][mode][key] for s in seeds])
                        for key in ("found", "rate_within", "median_trials", "median_cpu_to_first",
                                    "bugs_per_cpu_hour", "violations_per_cpu_hour", "false_alarms", "errors")}
                 for mode in MODES}
        ratios, bounded = {}, False
        for seed in seeds:
            planner, random = per_seed[seed]["planner"], per_seed[seed]["random"]
            if not planner["cpu_hours"] or not random["cpu_hours"]:
                continue
            bounded |= random["found"] == 0
            ratios[seed] = round(planner["found"] / planner["cpu_hours"]
                                 / (max(random["found"], 1) / random["cpu_hours"]), 2)
        shrinks = [r["shrink"] for r in rows if r["trigger"] == trigger and r.get("shrink")]
        out[trigger] = {"per_seed": per_seed, "modes": modes, "ratio": spread(list(ratios.values())),
                        "ratios": ratios, "ratio_lower_bound": bounded,
                        "shrink": {"shrunk": len(shrinks), "trials": sum(s["trials"] for s in shrinks),
                                   "cpu": round(sum(s["cpu"] for s in shrinks), 1),
                                   "smaller": sum(1 for s in shrinks if len(s["minimal"]) < len(s["from"]))}}
    return out


def merged_rows(dirs: list[Path], budget: float) -> list[dict]:
    """The rows of earlier runs (``DIR/detection.json``, finished or stopped), a later run's row replacing an
    earlier one for the same job, trigger and seed: a corpus measured in parts (a budget per part, a Spark version
    per part, a seed per night) gives one table. Each row keeps the budget it ran with (``budget`` where its run
    did not record one)."""
    merged: dict[tuple, dict] = {}
    for where in dirs:
        path = where / "detection.json"
        try:
            doc = json.loads(path.read_text())
            found = doc["rows"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UserError(f"--merge {where}: no detection.json of this benchmark there ({exc.__class__.__name__}); "
                            "name a directory an earlier run wrote with --out") from None
        for r in found:
            r.setdefault("budget", doc.get("budget_cpu_s", budget))
            for mode in MODES:
                r["runs"].setdefault(mode, [])
                r[mode] = first_find(r["runs"][mode], r["budget"])
            merged[(r["job"], r["trigger"], r["seed"])] = r
    return list(merged.values())


def found_at(r: dict, mode: str) -> str:
    """Trials to a mode's first find, or why there is none."""
    if not r["runs"][mode]:
        return "not run"
    return str(r[mode]["trials_to_first"] or "not found")


def print_table(rows: list[dict], total: dict, budget: float, within: int) -> None:
    def cell(r: dict, mode: str) -> str:
        if not r["runs"][mode]:
            return "not run"
        first = r[mode]
        if first["trials_to_first"] is None:
            return f"not in {r.get('budget', budget):g} CPU-s ({len(r['runs'][mode])})"
        return f"at {first['trials_to_first']} ({first['cpu_to_first']:g} CPU-s)"

    def fmt(s: dict) -> str:
        if s["median"] is None:
            return "-"
        return f"{s['median']:g}" if s["min"] == s["max"] else f"{s['median']:g} [{s['min']:g}-{s['max']:g}]"

    print(f"{'job':<26} {'kind':<5} {'trigger':<20} {'seed':>4} {'T s':>6}  "
          f"{'planner':<26} {'random':<26} {'none':<26}")
    for r in rows:
        print(f"{r['job']:<26} {'bug' if r['bug'] else 'twin':<5} {r['trigger']:<20} {r['seed']:>4} "
              f"{r['T'] or 0:>6.1f}  {cell(r, 'planner'):<26} {cell(r, 'random'):<26} {cell(r, 'none'):<26}")
    for trigger, t in total.items():
        for mode in MODES:
            m = t["modes"][mode]
            print(f"{trigger} / {mode}: bugs found {fmt(m['found'])}, within {within} trials {fmt(m['rate_within'])}, "
                  f"median trials {fmt(m['median_trials'])}, CPU-s to a find {fmt(m['median_cpu_to_first'])}, "
                  f"distinct bugs per CPU-hour {fmt(m['bugs_per_cpu_hour'])}, violating trials per CPU-hour "
                  f"{fmt(m['violations_per_cpu_hour'])}, false alarms {fmt(m['false_alarms'])}, "
                  f"harness errors {fmt(m['errors'])}")
        if len(t["per_seed"]) > 1:
            for seed, figures in t["per_seed"].items():
                print(f"{trigger} seed {seed}: " + "; ".join(
                    f"{mode} {f['found']}/{f['bugs']} found, {f['bugs_per_cpu_hour']} per CPU-hour, "
                    f"{f['false_alarms']} false alarms in {f['twin_trials']} twin trials"
                    for mode, f in figures.items())
                      + (f"; planner / random {t['ratios'][seed]:g}x" if seed in t["ratios"] else ""))
        if t["ratio"]["median"] is not None:  # none without bug jobs run in both modes
            print(f"{trigger}: planner / random, distinct bugs per CPU-hour: "
                  f"{'>= ' if t['ratio_lower_bound'] else ''}{fmt(t['ratio'])}x")
        s = t["shrink"]
        if s["shrunk"]:
            print(f"{trigger}: shrinks (CPU apart from the finds): {s['shrunk']} schedule(s), {s['trials']} trial(s), "
                  f"{s['cpu']:g} CPU-s, {s['smaller']} made smaller")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=100.0, help="CPU-seconds per job, mode, trigger and seed")
    parser.add_argument("--trials", type=int, default=3, help="K of the detection rate within K trials")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (each repeats every mode)")
    parser.add_argument("--triggers", default=f"{DEFAULT_TRIGGER},processingTime:5s",
                        help="comma-separated: default (the job's own) or processingTime:5s and the like")
    parser.add_argument("--jobs", default="", help="comma-separated corpus jobs (default: all)")
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--none-trials", type=int, default=PLAN_LENGTH,
                        help="at most this many no-fault trials a job (they time the random faults; a processing-time "
                             "trigger's trials cost little CPU and much wall time, so the budget alone runs many)")
    parser.add_argument("--shrink-trials", type=int, default=3,
                        help="trials to shrink each planner find with (0: no shrink)")
    parser.add_argument("--twin-trials", type=int, default=0,
                        help="a twin's planner runs this many trials whatever they cost (0: the budget decides, as "
                             "for a bug); a campaign runs 3")
    parser.add_argument("--modes", default=",".join(MODES),
                        help="comma-separated modes to run (e.g. planner alone, for the twins' false alarms)")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="DIR",
                        help="run nothing: one table and totals from earlier runs' --out directories (a later run's "
                             "row replaces an earlier one's for the same job, trigger and seed; --jobs, --seeds and "
                             "--triggers filter them)")
    parser.add_argument("--out", type=Path, default=Path("runs") / time.strftime("detection-%Y%m%d-%H%M%S"))
    args = parser.parse_args()
    truths = load_truths()
    names = [n.strip() for n in args.jobs.split(",") if n.strip()] or list(truths["jobs"])
    unknown = [n for n in names if n not in truths["jobs"]]
    if unknown:
        sys.exit(f"--jobs: no corpus job {', '.join(unknown)}; the corpus has {', '.join(truths['jobs'])}")
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        sys.exit(f"--seeds {args.seeds!r}: give integers, comma-separated (e.g. 0,1,2)")
    triggers = [t.strip() for t in args.triggers.split(",") if t.strip()]
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    if not modes or set(modes) - set(MODES):
        sys.exit(f"--modes {args.modes!r}: name some of {', '.join(MODES)}")
    for trigger in triggers:
        if trigger != DEFAULT_TRIGGER:
            try:
                trigger_args(trigger)  # one line for a trigger Spark would refuse
            except UserError as exc:
                sys.exit(f"--triggers: {exc}")
    if not seeds or not triggers or args.budget <= 0 or args.trials < 1 or args.twin_trials < 0:
        sys.exit("--seeds, --triggers, a positive --budget, --trials >= 1 and --twin-trials >= 0 are needed")
    if args.merge:
        try:
            rows = [r for r in merged_rows(args.merge, args.budget)
                    if r["job"] in names and r["seed"] in seeds and r["trigger"] in triggers]
        except UserError as exc:
            sys.exit(str(exc))
        if not rows:
            sys.exit(f"--merge: no row of {', '.join(map(str, args.merge))} is of the --jobs, --seeds and --triggers "
                     "asked for")
        total = totals(rows, args.trials)
        print_table(rows, total, args.budget, args.trials)
        return
    if args.out.exists() and any(args.out.iterdir()):
        sys.exit(f"{args.out} exists and is not empty: choose another --out")
    args.out.mkdir(parents=True, exist_ok=True)
    from chaos.machine import interrupt

    interrupt.install()  # Ctrl-C or SIGTERM: the harness stops what it started before the script ends
    rows: list[dict] = []
    t0 = time.monotonic()
    groups = by_spark(names, truths)
    here = groups.pop(current_version(), [])
    for version, others in groups.items():
        rows += rows_on(version, others, args)
    with Harness(workdir=args.out / "harness") if here else nullcontext() as harness:
        for trigger in triggers:
            for seed in seeds:
                for name in here:
                    r = run_job(harness, name, truths, trigger, seed, args.budget, args.events, args.out,
                                args.shrink_trials, args.none_trials, modes, args.twin_trials)
                    rows.append(r)
                    print(f"{name} {trigger} seed {seed}: planner {found_at(r, 'planner')}, random "
                          f"{found_at(r, 'random')}, none {found_at(r, 'none')} (trials to the first violation)",
                          flush=True)
                    (args.out / "detection.json").write_text(json.dumps({"rows": rows}, indent=1))
    total = totals(rows, args.trials)
    (args.out / "detection.json").write_text(json.dumps(
        {"budget_cpu_s": args.budget, "within_trials": args.trials, "rows": rows, "totals": total,
         "wall_s": round(time.monotonic() - t0)}, indent=1))
    print_table(rows, total, args.budget, args.trials)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("stopped: the rows measured so far are in detection.json under --out")
