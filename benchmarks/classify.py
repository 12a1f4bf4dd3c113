"""Benchmark: classify 10 million events (1 % lost, 1 % duplicated) with the streamchaos classifier,
against a plain-Python dict implementation measured in the same run.

    python benchmarks/classify.py [--events 10000000] [--repeat 3]

Each implementation runs in its own forked process so that its peak memory (ru_maxrss) is its own.
Prints the median time of each, the ratio, and the peak RSS. Targets: under 2 s,
at least 10x faster than the dict version, under 2 GiB peak.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from properties.classifier import classify  # noqa: E402
from properties.oracle import passthrough_expected  # noqa: E402


def make_input(n: int, seed: int = 0) -> tuple[pl.DataFrame, np.ndarray, set[int], set[int]]:
    """Expected provenance of n events, and a sink holding them with 1 % lost and 1 % duplicated."""
    rng = np.random.default_rng(seed)
    ids = np.arange(n, dtype=np.int64)
    chosen = rng.permutation(n)[: n // 50]
    lost, dup = chosen[: n // 100], chosen[n // 100:]
    keep = np.ones(n, dtype=bool)
    keep[lost] = False
    observed = np.concatenate([ids[keep], dup])
    rng.shuffle(observed)
    expected = passthrough_expected(pl.DataFrame({"id": ids}))
    return expected, observed, set(lost.tolist()), set(dup.tolist())


def with_classifier(expected: pl.DataFrame, observed: np.ndarray) -> tuple[int, int]:
    c = classify(expected, pl.Series("id", observed))
    return len(c.lost), len(c.duplicated)


def with_dicts(expected: pl.DataFrame, observed: np.ndarray) -> tuple[int, int]:
    """The straightforward version: a dict of counts, a loop over expected ids."""
    counts: dict[int, int] = {}
    for i in observed.tolist():
        counts[i] = counts.get(i, 0) + 1
    lost, dup = [], []
    for i, required, mult in zip(expected["id"].to_list(), expected["required"].to_list(),
                                 expected["multiplicity"].to_list(), strict=True):
        m = counts.pop(i, 0)
        if required and m == 0:
            lost.append(i)
        elif m > mult:
            dup.append(i)
    return len(sorted(lost)), len(sorted(dup))


def _child(name: str, n: int, repeat: int, queue) -> None:
    expected, observed, lost, dup = make_input(n)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    fn = {"classifier": with_classifier, "dict": with_dicts}[name]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        got = fn(expected, observed)
        times.append(time.perf_counter() - t)
        assert got == (len(lost), len(dup)), (name, got)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    queue.put({"name": name, "median_s": statistics.median(times), "times": times,
               "peak_rss_mib": peak / 1024, "input_rss_mib": base_rss / 1024})


def measure(name: str, n: int, repeat: int) -> dict:
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(name, n, repeat, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"classify {args.events:,} events, 1 % lost, 1 % duplicated, median of {args.repeat}")
    fast = measure("classifier", args.events, args.repeat)
    slow = measure("dict", args.events, max(1, args.repeat - 1))
    for r in (fast, slow):
        print(f"  {r['name']:>6}: median {r['median_s']:.2f}s  runs {[round(t, 2) for t in r['times']]}  "
              f"peak RSS {r['peak_rss_mib']:.0f} MiB (input alone {r['input_rss_mib']:.0f} MiB)")
    ratio = slow["median_s"] / fast["median_s"]
    print(f"  ratio dict/classifier: {ratio:.1f}x   targets: classifier < 2 s, >= 10x, peak < 2048 MiB")
    ok = fast["median_s"] < 2 and ratio >= 10 and fast["peak_rss_mib"] < 2048
    print("  targets met" if ok else "  TARGETS MISSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
