"""Benchmark: standard trials per hour through the campaign code path, with the default options
(pre-warmed drivers) and with ``--no-standby`` (cold driver restarts), measured in the same run.

    python benchmarks/throughput.py [--trials 20] [--baseline-trials 20] [--out runs/bench-throughput]

Each mode is one campaign (``chaos.campaign.stored.Campaign``, as ``streamchaos campaign run`` builds it) of
``--trials`` standard trials on one harness: catalogue ``api-count`` with its idempotent sink, 5000
events in 10 micro-batches, faults ``kill-driver@3:sink-done kill-executor@5:reading
kill-driver@7:planned`` (benchmarks/trial_speed.py's trial), each trial with its own event seed. Prints
per mode: trials per hour (the campaign's wall time, its harness start included), the median trial
seconds, the median kill-driver -> next committed batch, CPU seconds per trial (every process the harness
owns, sampled once a second; and what the whole machine was busy for, which adds the Python workers that
live less than a second and the kernel's work: on an idle machine with 2 cores a trial cannot take less
wall time than half of that, the CPU floor), the peak summed RSS and PSS, where that peak lives (per
role), and the verdicts; then the ratios default / no-standby.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trial_speed import FAULTS, driver_recoveries  # noqa: E402  (benchmarks/)
from usage import Usage  # noqa: E402

from chaos.campaign.runner import Runner  # noqa: E402
from chaos.campaign.stored import Campaign, CampaignSpec  # noqa: E402
from chaos.run.harness import Harness  # noqa: E402

STANDBY = {"default": True, "no-standby": False}  # each mode's Harness(standby=...)


def run_campaign(mode: str, root: Path, trials: int) -> dict:
    """One campaign of ``trials`` standard trials, on a harness started as ``campaign run`` starts it."""
    spec = CampaignSpec(pipelines=["api-count"], trials=trials, events=5000, events_per_batch=500, shrink=False,
                        schedules={"api-count": [" ".join(FAULTS)] * trials})
    campaign = Campaign.create(root, spec)
    standby = STANDBY[mode]
    with Usage() as usage:
        t0 = time.monotonic()
        with Harness(cluster=spec.cluster, workers=spec.workers, workdir=root / "harness",
                     standby=standby, spare=standby) as harness:
            Runner(campaign, harness).run()
        wall = time.monotonic() - t0
    rows = []
    for entry in campaign.plan:
        run_dir = campaign.trial_dir(entry["id"])
        result = json.loads((run_dir / "result.json").read_text())
        verdict = json.loads((run_dir / "verdict.json").read_text())["verdict"]
        rows.append({"seconds": result["seconds"], "recoveries": driver_recoveries(result), "verdict": verdict})
        print(f"{mode} {entry['id']}: {result['seconds']:.1f}s, kill->commit "
              f"{[round(x, 1) for x in rows[-1]['recoveries']]}, {verdict}", flush=True)
    return {"wall": wall, "rows": rows, "usage": usage}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="standard trials in the default mode's campaign")
    parser.add_argument("--baseline-trials", type=int, default=None,
                        help="standard trials in the --no-standby campaign (default: --trials)")
    parser.add_argument("--out", type=Path, default=Path("runs") / time.strftime("bench-throughput-%H%M%S"))
    args = parser.parse_args()
    out = args.out.resolve()
    counts = {"default": args.trials, "no-standby": args.baseline_trials or args.trials}
    results = {mode: run_campaign(mode, out / mode, n) for mode, n in counts.items()}

    cores = os.cpu_count() or 1
    print(f"\nstandard trial: api-count, 5000 events, 10 batches, {' '.join(FAULTS)}; {cores} cores")
    print(f"{'mode':<11} {'trials':>6} {'trials/hour':>11} {'median trial s':>15} {'kill->commit s':>15} "
          f"{'CPU-s/trial':>12} {'machine CPU-s':>14} {'CPU floor s':>12} {'peak RSS MiB':>13} {'peak PSS MiB':>13}"
          "  verdicts")
    figures = {}
    for mode, res in results.items():
        rows, usage = res["rows"], res["usage"]
        recoveries = [x for r in rows for x in r["recoveries"]]
        cpu, machine = usage.cpu_seconds / len(rows), usage.machine_cpu_seconds / len(rows)
        figures[mode] = {"per_hour": 3600 * len(rows) / res["wall"],
                         "median": statistics.median(r["seconds"] for r in rows), "cpu": cpu, "machine": machine}
        print(f"{mode:<11} {len(rows):>6} {figures[mode]['per_hour']:>11.0f} {figures[mode]['median']:>15.1f} "
              f"{statistics.median(recoveries) if recoveries else 0:>15.1f} {cpu:>12.1f} {machine:>14.1f} "
              f"{machine / cores:>12.1f} "
              f"{usage.peak / 2**20:>13.0f} {usage.peak_pss / 2**20:>13.0f}  {sorted({r['verdict'] for r in rows})}")
    for mode, res in results.items():
        print(f"\n{mode}: where the peak of {res['usage'].peak / 2**20:.0f} MiB RSS lives")
        for name, n, rss, pss in res["usage"].breakdown():
            print(f"  {name:<34} {n:>3} process(es) {rss:>6} MiB RSS {pss:>6} MiB PSS")
        print(f"{mode}: CPU seconds per trial by role")
        for name, n, cpu in res["usage"].cpu_by_role():
            print(f"  {name:<34} {n:>4} process(es) {cpu / len(res['rows']):>7.1f} CPU-s")
    fast, cold = figures["default"], figures["no-standby"]
    print(f"\nratio default / no-standby: trials per hour {fast['per_hour'] / cold['per_hour']:.2f}, "
          f"median trial {fast['median'] / cold['median']:.2f}, CPU per trial {fast['cpu'] / cold['cpu']:.2f}")
    # Per trial over the whole campaign, as the CPU figures are: the harness start and the gaps included.
    wall, floor = 3600 / fast["per_hour"], fast["machine"] / cores
    print(f"default: a trial takes {wall:.1f}s of the campaign's wall time; its processes use {fast['cpu']:.1f} "
          f"CPU-s as sampled, the machine is busy {fast['machine']:.1f} CPU-s (with the short-lived workers and the "
          f"kernel): at best {floor:.1f}s on {cores} cores ({100 * floor / wall:.0f}% of its wall time is the CPU "
          "floor)")


if __name__ == "__main__":
    main()
