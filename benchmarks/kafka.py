"""Benchmark: a job's Kafka source through Spark's connector on the harness's broker vs the stand-in, side by side.

    python benchmarks/kafka.py [--runs 3] [--spark 4.2.0] [--out runs/bench-kafka]

The same trial in both modes: ``examples/orders_append.py`` as written (a Kafka source, a foreachBatch INSERT into
PostgreSQL), 2000 events in 10 batches, ``kill-driver@3:sink-done``; one harness per mode, ``--runs`` trials each,
the modes alternating run by run so a drifting machine slows both alike. Prints per mode the median trial time,
the verdicts (they must agree: at-least-once), the broker's start (resolution cached) and its peak RSS apart from
the trial's processes. The connector is served for some Spark versions only: on another, the script runs itself
again on ``--spark``'s added environment (``streamchaos spark add VERSION`` first).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

from chaos.clusters.kafka.jars import connector_available  # noqa: E402
from chaos.jobs.reference import JobSpec  # noqa: E402
from chaos.machine.spark_versions import current_version, python_for  # noqa: E402
from chaos.run.harness import Harness  # noqa: E402
from chaos.run.judge import judge  # noqa: E402
from chaos.scenario.scenario import Scenario  # noqa: E402

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
FAULTS = ["kill-driver@3:sink-done"]


def scenario(kafka: str) -> Scenario:
    ref = JobSpec(f"{REPO}/examples/orders_append.py:run", ORDER, "postgres:orders", kafka=kafka).ref
    return Scenario(pipeline=ref, events=2000, events_per_batch=200, seed=0, faults=list(FAULTS))


class BrokerRss:
    """The broker process's peak RSS, sampled twice a second while a mode runs."""

    def __init__(self, harness: Harness) -> None:
        self.harness, self.peak = harness, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            broker = self.harness.kafka
            if broker is not None and broker.group is not None:
                try:
                    self.peak = max(self.peak, psutil.Process(broker.group.pid).memory_info().rss)
                except psutil.Error:
                    pass

    def __enter__(self) -> BrokerRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--spark", default="4.2.0", help="the Spark to run on when this one's connector is not served")
    parser.add_argument("--out", type=Path, default=Path("runs") / time.strftime("bench-kafka-%H%M%S"))
    args = parser.parse_args()
    if connector_available() is not None and current_version() != args.spark:
        python = str(python_for(args.spark))
        os.execv(python, [python, __file__, *sys.argv[1:]])
    out = args.out.resolve()
    harnesses = {mode: Harness(workdir=out / mode) for mode in ("stand-in", "connector")}
    rows: dict[str, list[dict]] = {mode: [] for mode in harnesses}
    try:
        for harness in harnesses.values():
            harness.__enter__()
        with BrokerRss(harnesses["connector"]) as rss:
            for k in range(args.runs):
                for mode, harness in harnesses.items():
                    t0 = time.monotonic()
                    run_dir = out / f"{mode}-{k}"
                    result = harness.trial(scenario(mode), run_dir, last=k == args.runs - 1)
                    row = {"seconds": time.monotonic() - t0, "verdict": judge(run_dir)["verdict"],
                           "source": (result.get("source") or {}).get("via")}
                    rows[mode].append(row)
                    print(f"{mode} {k}: {row['seconds']:.1f}s, {row['verdict']}, source {row['source']}", flush=True)
        broker_start = harnesses["connector"].timings.get("kafka_start_s")
    finally:
        for harness in harnesses.values():
            harness.close()
    print(f"\nSpark {current_version()}; orders_append as written, 2000 events, 10 batches, {' '.join(FAULTS)}; "
          f"{args.runs} runs per mode")
    med = {mode: statistics.median(r["seconds"] for r in rs) for mode, rs in rows.items()}
    for mode, rs in rows.items():
        print(f"{mode:<10} median {med[mode]:.1f}s  verdicts {sorted({r['verdict'] for r in rs})}  "
              f"sources {sorted({str(r['source']) for r in rs})}")
    print(f"ratio connector/stand-in: {med['connector'] / med['stand-in']:.2f} (target <= 1.3)")
    print(f"broker: started in {broker_start}s (jars resolved and cached), peak RSS {rss.peak / 2**20:.0f} MiB "
          "(target <= 600)")


if __name__ == "__main__":
    main()
