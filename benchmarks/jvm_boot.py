"""Benchmark: what the harness's JVM settings save on a driver's boot, the cost every incarnation pays.

    python benchmarks/jvm_boot.py [--rounds 5]

Each round starts, in turn, a fresh driver (Python + JVM, ``local[2]``) in three settings and times
``getOrCreate()`` plus a first aggregation (what a restarted driver does before its first batch):
``default`` (the JVM's own flags), ``quick`` (``chaos.machine.spark.QUICK_JVM_OPTIONS``: C1 only, serial GC)
and ``quick+archive`` (plus the drivers' class-data-sharing archive, ``chaos/machine/jvm/archive.py``, built
before the first round if missing, and the unsigned copies of Spark's signed jars first on the class
path, ``chaos/machine/jvm/unsigned.py``). The settings alternate within each round, so a noisy machine
slows all three alike. Prints medians, ratios against ``default`` and each setting's peak RSS (the
driver's Python and JVM together).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil  # noqa: E402

from chaos.clusters.standalone import spark_env  # noqa: E402
from chaos.machine.jvm.archive import driver_archive  # noqa: E402
from chaos.machine.jvm.unsigned import quick_class_path  # noqa: E402
from chaos.machine.processes import Owned  # noqa: E402
from chaos.machine.spark import QUICK_JVM_OPTIONS


def child(setting: str) -> None:
    """One driver: boot, first query, print the timings as JSON."""
    t0 = time.monotonic()
    from pyspark.sql import SparkSession

    options, class_path = json.loads(setting)
    builder = (SparkSession.builder.master("local[2]").appName("streamchaos-jvm-boot")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.extraJavaOptions", f"-Xss16m {options}".strip()))
    if class_path:
        builder = builder.config("spark.driver.extraClassPath", class_path)
    spark = builder.getOrCreate()
    t1 = time.monotonic()
    spark.range(10_000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
    t2 = time.monotonic()
    print(json.dumps({"session": t1 - t0, "query": t2 - t1, "total": t2 - t0}), flush=True)
    spark.stop()


def measure(setting: tuple[str, str]) -> dict:
    proc = subprocess.Popen([sys.executable, __file__, "--child", json.dumps(setting)], env=spark_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.2):
            try:
                root = psutil.Process(proc.pid)
                total = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
            except psutil.Error:
                continue
            peak = max(peak, total)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    out, _ = proc.communicate(timeout=600)
    stop.set()
    thread.join()
    row = json.loads(out.strip().splitlines()[-1])
    row["rss"] = peak
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child)
        return
    owned = Owned()
    class_path = quick_class_path()
    try:
        archive = driver_archive(QUICK_JVM_OPTIONS, class_path, owned=owned)
    finally:
        owned.stop_all()
    settings = {"default": ("", ""), "quick": (QUICK_JVM_OPTIONS, "")}
    if archive is not None:
        settings["quick+archive"] = (f"{QUICK_JVM_OPTIONS} -XX:SharedArchiveFile={archive}", class_path)
    else:
        print("no class archive could be built here: quick+archive is left out")
    rows: dict[str, list[dict]] = {name: [] for name in settings}
    for k in range(args.rounds):
        for name, setting in settings.items():
            rows[name].append(measure(setting))
        print(f"round {k}: " + ", ".join(f"{n} {rs[-1]['total']:.1f}s" for n, rs in rows.items()), flush=True)
    print(f"\ndriver boot + first aggregation, local[2], {args.rounds} rounds (medians)")
    print(f"{'setting':<15} {'session s':>10} {'query s':>8} {'total s':>8} {'ratio':>6} {'peak RSS MiB':>13}")
    base = statistics.median(r["total"] for r in rows["default"])
    for name, rs in rows.items():
        total = statistics.median(r["total"] for r in rs)
        print(f"{name:<15} {statistics.median(r['session'] for r in rs):>10.1f} "
              f"{statistics.median(r['query'] for r in rs):>8.1f} {total:>8.1f} {total / base:>6.2f} "
              f"{max(r['rss'] for r in rs) / 2**20:>13.0f}")


if __name__ == "__main__":
    main()
