"""Benchmark: the standard trial, naive (fresh cluster, cold driver restarts) vs optimized (reused
harness, pre-warmed standby driver), in one process and one run.

    python benchmarks/trial_speed.py [--runs 3] [--out runs/bench-trial-speed]

The standard trial (issue 7): catalogue ``api-count`` with its idempotent sink, 5000 events in 10
micro-batches, faults ``kill-driver@3:sink-done``, ``kill-executor@5:reading``,
``kill-driver@7:planned``. Naive: every trial starts its own cluster (master, two 1-core workers),
event log and proxy, and a killed driver restarts cold. Optimized: one harness for all trials
(two 2-core workers, so a standby application holds executors too) and a standby driver that takes
over a killed one. Prints per mode the median trial time (naive includes its cluster start),
median kill-driver -> next committed batch, the verdicts (they must be identical) and the peak
summed RSS of every process the harness owns.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil  # noqa: E402

from chaos.procs import OWNER_VAR  # noqa: E402
from chaos.scenario import Scenario  # noqa: E402
from chaos.trial import Harness  # noqa: E402
from properties.check import check_run  # noqa: E402

FAULTS = ["kill-driver@3:sink-done", "kill-executor@5:reading", "kill-driver@7:planned"]


def standard() -> Scenario:
    return Scenario(pipeline="api-count", events=5000, events_per_batch=500, seed=0, faults=list(FAULTS))


class RssPeak:
    """Samples the summed RSS of every process tagged by this harness process (and this process)."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        prefix = f"{me.pid}:"
        while not self._stop.wait(1.0):
            total = me.memory_info().rss
            for proc in psutil.process_iter(["pid"]):
                try:
                    if proc.environ().get(OWNER_VAR, "").startswith(prefix):
                        total += proc.memory_info().rss
                except (psutil.Error, OSError):
                    continue
            self.peak = max(self.peak, total)

    def __enter__(self) -> RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def driver_recoveries(result: dict) -> list[float]:
    return [r["seconds"] for r in result["recoveries"] if r["seconds"] is not None and "driver" in r["spec"]]


def naive(out: Path, k: int) -> dict:
    t0 = time.monotonic()
    with Harness(workdir=out / f"naive-{k}", standby=False) as harness:
        result = harness.trial(standard(), out / f"naive-{k}" / "trial")
    seconds = time.monotonic() - t0
    return {"seconds": seconds, "recoveries": driver_recoveries(result),
            "verdict": check_run(out / f"naive-{k}" / "trial")["verdict"],
            "offsets": [(b["batch"], b["end"]) for b in result["offsets"]]}


def optimized(harness: Harness, out: Path, k: int) -> dict:
    t0 = time.monotonic()
    result = harness.trial(standard(), out / f"optimized-{k}")
    seconds = time.monotonic() - t0
    return {"seconds": seconds, "recoveries": driver_recoveries(result),
            "verdict": check_run(out / f"optimized-{k}")["verdict"],
            "offsets": [(b["batch"], b["end"]) for b in result["offsets"]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="trials per mode")
    parser.add_argument("--out", type=Path, default=Path("runs") / time.strftime("bench-trial-speed-%H%M%S"))
    args = parser.parse_args()
    out = args.out.resolve()
    rows: dict[str, list[dict]] = {"naive": [], "optimized": []}
    peaks: dict[str, int] = {}
    with RssPeak() as peak:
        for k in range(args.runs):
            rows["naive"].append(naive(out, k))
            print(f"naive {k}: {rows['naive'][-1]['seconds']:.1f}s, recoveries {rows['naive'][-1]['recoveries']}, "
                  f"{rows['naive'][-1]['verdict']}", flush=True)
    peaks["naive"] = peak.peak
    with RssPeak() as peak:
        t0 = time.monotonic()
        with Harness(workdir=out / "optimized", standby=True) as harness:
            start = time.monotonic() - t0
            for k in range(args.runs):
                rows["optimized"].append(optimized(harness, out, k))
                if k == 0:
                    rows["optimized"][0]["seconds"] += start  # the one cluster start, charged to the first trial
                print(f"optimized {k}: {rows['optimized'][-1]['seconds']:.1f}s, recoveries "
                      f"{rows['optimized'][-1]['recoveries']}, {rows['optimized'][-1]['verdict']}", flush=True)
    peaks["optimized"] = peak.peak

    print(f"\nstandard trial: api-count, 5000 events, 10 batches, {' '.join(FAULTS)}; {args.runs} runs per mode")
    print(f"{'mode':<10} {'median trial s':>15} {'median kill->commit s':>22} {'peak RSS MiB':>13}  verdicts")
    med = {}
    for mode, rs in rows.items():
        med[mode] = statistics.median(r["seconds"] for r in rs)
        rec = statistics.median(x for r in rs for x in r["recoveries"]) if any(r["recoveries"] for r in rs) else 0
        print(f"{mode:<10} {med[mode]:>15.1f} {rec:>22.1f} {peaks[mode] / 2**20:>13.0f}  "
              f"{sorted({r['verdict'] for r in rs})}")
    same = {r["verdict"] for r in rows["naive"]} == {r["verdict"] for r in rows["optimized"]}
    same_offsets = all(r["offsets"] == rows["naive"][0]["offsets"] for rs in rows.values() for r in rs)
    print(f"ratio optimized/naive: {med['optimized'] / med['naive']:.2f} (target <= 0.33); "
          f"verdicts identical: {same}; planned offsets identical: {same_offsets}")


if __name__ == "__main__":
    main()
