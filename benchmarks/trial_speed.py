"""Benchmark: the standard trial, naive (fresh cluster, cold driver restarts, the JVM's defaults) vs
optimized (reused harness, quick-start JVM flags, pre-warmed standby and spare drivers), in one process and one run.

    python benchmarks/trial_speed.py [--runs 3] [--out runs/bench-trial-speed] [--modes naive,optimized]

``--modes naive,reuse,quick,standby,optimized`` adds one lever at a time: ``reuse`` one harness for
all trials, ``quick`` plus the quick start (``chaos.machine.spark.QUICK_JVM_OPTIONS`` on every Spark JVM,
the class archives, Python daemons that import the installed pyspark: chaos/driver/pydaemon.py, tasks that
do not wait for a preferred executor: ``Harness(quick_scheduling=True)``, queries on Spark's interpreter:
``Harness(quick_sql=True)``),
``standby`` plus the standby driver, ``optimized`` plus the spares (each trial's first standby booted
during the previous trial's tail, chaos/driver/spare.py; its first driver the previous trial's last one, recycled, or
else a spare booted in that tail; three cores per worker).
The first mode is the baseline of the printed ratios. ``--rounds R`` runs the whole sequence of modes R
times (naive, optimized, naive, optimized, ...) and takes the medians over all rounds: on a machine
whose speed drifts (here the naive trial's median was 98 s in one session and 123 s in the next), a mode run only
in the slow hour would carry the drift into the ratio; each round's own medians and ratio are printed
too.

The standard trial: catalogue ``api-count`` with its idempotent sink, 5000 events in 10
micro-batches, faults ``kill-driver@3:sink-done``, ``kill-executor@5:reading``,
``kill-driver@7:planned``. Naive: every trial starts its own cluster (master, two 1-core workers),
event log and proxy, with the JVM's default flags, and a killed driver restarts cold. Optimized: one
harness for all trials (two 3-core workers, so standby and spare applications hold executors too),
C1-only serial-GC JVMs, a standby driver that takes over a killed one, the last driver of a trial
kept as the next one's first and a spare that is the next trial's first standby. Prints per mode the median trial
time (naive includes its cluster start), median kill-driver -> next committed batch, the CPU seconds
of every process the harness owns divided by the mode's trials (on 2 cores a trial cannot take less
wall time than half its CPU), the verdicts (they must be identical) and the peak summed RSS and PSS.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from usage import Usage  # noqa: E402  (benchmarks/usage.py)

from chaos.run.harness import Harness  # noqa: E402
from chaos.run.judge import judge  # noqa: E402
from chaos.scenario.scenario import Scenario  # noqa: E402

FAULTS = ["kill-driver@3:sink-done", "kill-executor@5:reading", "kill-driver@7:planned"]


def standard() -> Scenario:
    return Scenario(pipeline="api-count", events=5000, events_per_batch=500, seed=0, faults=list(FAULTS))


def driver_recoveries(result: dict) -> list[float]:
    return [r["seconds"] for r in result["recoveries"] if r["seconds"] is not None and "driver" in r["spec"]]


# Each mode: the Harness options, and whether every trial gets a fresh harness (its cluster start charged
# to the trial) or one harness serves all trials (its start charged to the first).
MODES: dict[str, tuple[dict, bool]] = {
    "naive": ({"standby": False, "quick_jvm": False, "quick_python": False, "quick_scheduling": False,
               "quick_sql": False}, True),
    "reuse": ({"standby": False, "quick_jvm": False, "quick_python": False, "quick_scheduling": False,
               "quick_sql": False}, False),
    "quick": ({"standby": False, "quick_jvm": True}, False),
    "standby": ({"standby": True, "quick_jvm": True}, False),
    "optimized": ({"standby": True, "quick_jvm": True, "spare": True}, False),
}


def one_trial(harness: Harness, run_dir: Path, last: bool = True) -> dict:
    t0 = time.monotonic()
    result = harness.trial(standard(), run_dir, last=last)
    return {"seconds": time.monotonic() - t0, "recoveries": driver_recoveries(result),
            "verdict": judge(run_dir)["verdict"],
            "offsets": [(b["batch"], b["end"]) for b in result["offsets"]]}


def run_mode(mode: str, out: Path, runs: int) -> list[dict]:
    options, fresh = MODES[mode]
    rows: list[dict] = []

    def show(row: dict) -> None:
        rows.append(row)
        print(f"{mode} {len(rows) - 1}: {row['seconds']:.1f}s, recoveries "
              f"{[round(x, 1) for x in row['recoveries']]}, {row['verdict']}", flush=True)

    if fresh:
        for k in range(runs):
            t0 = time.monotonic()
            with Harness(workdir=out / f"{mode}-{k}", **options) as harness:
                row = one_trial(harness, out / f"{mode}-{k}" / "trial")
            row["seconds"] = time.monotonic() - t0
            show(row)
        return rows
    t0 = time.monotonic()
    with Harness(workdir=out / mode, **options) as harness:
        start = time.monotonic() - t0
        for k in range(runs):
            row = one_trial(harness, out / f"{mode}-{k}", last=k == runs - 1)
            if k == 0:
                row["seconds"] += start  # the one cluster start, charged to the first trial
            show(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="trials per mode and round")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run the modes in turn this many times (a drifting machine then slows each mode alike)")
    parser.add_argument("--out", type=Path, default=Path("runs") / time.strftime("bench-trial-speed-%H%M%S"))
    parser.add_argument("--modes", default="naive,optimized",
                        help=f"comma-separated, the first is the baseline; of {', '.join(MODES)}")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        sys.exit(f"unknown mode(s) {', '.join(unknown) or '(none)'}: pick from {', '.join(MODES)}")
    out = args.out.resolve()
    rows: dict[str, list[dict]] = {mode: [] for mode in modes}
    usages: dict[str, list[Usage]] = {mode: [] for mode in modes}
    round_medians: list[dict[str, float]] = []
    for k in range(args.rounds):
        for mode in modes:
            with Usage() as usage:
                done = run_mode(mode, out / f"round-{k}" if args.rounds > 1 else out, args.runs)
            rows[mode] += done
            usages[mode].append(usage)
        round_medians.append({mode: statistics.median(r["seconds"] for r in rows[mode][-args.runs:]) for mode in modes})

    print(f"\nstandard trial: api-count, 5000 events, 10 batches, {' '.join(FAULTS)}; {args.runs} runs per mode"
          + (f" in each of {args.rounds} rounds" if args.rounds > 1 else ""))
    print(f"{'mode':<10} {'median trial s':>15} {'median kill->commit s':>22} {'CPU-s/trial':>12} "
          f"{'peak RSS MiB':>13} {'peak PSS MiB':>13}  verdicts")
    med = {}
    for mode, rs in rows.items():
        med[mode] = statistics.median(r["seconds"] for r in rs)
        rec = statistics.median(x for r in rs for x in r["recoveries"]) if any(r["recoveries"] for r in rs) else 0
        cpu = sum(u.cpu_seconds for u in usages[mode])
        print(f"{mode:<10} {med[mode]:>15.1f} {rec:>22.1f} {cpu / len(rs):>12.1f} "
              f"{max(u.peak for u in usages[mode]) / 2**20:>13.0f} "
              f"{max(u.peak_pss for u in usages[mode]) / 2**20:>13.0f}  "
              f"{sorted({r['verdict'] for r in rs})}")
    base = modes[0]
    if args.rounds > 1:
        for k, medians in enumerate(round_medians):
            print(f"round {k}: " + ", ".join(f"{m} {v:.1f}s" for m, v in medians.items())
                  + "".join(f", {m}/{base} {medians[m] / medians[base]:.3f}" for m in modes[1:]))
    same = len({frozenset(r["verdict"] for r in rs) for rs in rows.values()}) == 1
    same_offsets = all(r["offsets"] == rows[base][0]["offsets"] for rs in rows.values() for r in rs)
    for mode in modes[1:]:
        target = " (target <= 0.33)" if mode == "optimized" else ""
        print(f"ratio {mode}/{base}: {med[mode] / med[base]:.3f}{target}")
    print(f"verdicts identical: {same}; planned offsets identical: {same_offsets}")


if __name__ == "__main__":
    main()
