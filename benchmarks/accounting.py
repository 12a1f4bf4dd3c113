"""Benchmark: where a standard trial's CPU goes, every process counted, the short-lived ones too.

    python benchmarks/accounting.py [--runs 2] [--mode optimized] [--out runs/bench-accounting]

Sampling (benchmarks/usage.py) sees a process only while it lives: the Python workers that live less
than a second (one per reader task, the planners' forks) escape it, and pyspark.daemon ignores SIGCHLD,
so their CPU is never added to any parent's children times. The kernel's process accounting records
every process at its exit with its CPU time and its parent, so this runs the standard trial
(benchmarks/trial_speed.py) ``--runs`` times on one harness with accounting on, closes the harness (every
process it started exits and is recorded), and prints CPU seconds per trial by role: a process's role is
read from its command line while it runs (sampled once a second, benchmarks/usage.py), and one that lived
too short to be sampled is counted as a short-lived child of its parent's role.

Needs root and the ``acct`` package (``apt-get install acct``: ``accton``, ``dump-acct``). Accounting is
machine-wide: run it on an otherwise idle machine; only this benchmark's descendants are counted.
"""

from __future__ import annotations

import argparse
import bisect
import os
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trial_speed import FAULTS, MODES, one_trial  # noqa: E402  (benchmarks/trial_speed.py)
from usage import Usage  # noqa: E402  (benchmarks/usage.py)

from chaos.run.harness import Harness  # noqa: E402

TICKS = 100.0  # dump-acct prints times in ticks of AHZ (100 a second on Linux)


@dataclass
class Exited:
    comm: str
    cpu: float  # user + system seconds
    pid: int
    ppid: int


def read_accounting(path: Path) -> list[Exited]:
    """The records of ``dump-acct``, in the order the processes exited."""
    out = subprocess.run(["dump-acct", str(path)], capture_output=True, text=True, check=True).stdout
    records = []
    for line in out.splitlines():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) < 11:
            continue
        records.append(Exited(fields[0], (float(fields[2]) + float(fields[3])) / TICKS, int(fields[9]),
                              int(fields[10])))
    return records


def attribute(records: list[Exited], sampled: dict[int, str], root: int) -> dict[str, list[Exited]]:
    """Each process this benchmark owns, by role: a process sampled while it ran (benchmarks/usage.py: its
    command line) has that role; one that lived too short to be sampled is a short-lived child of its parent's
    role. The parent is the sampled process of that pid, else the record of that pid that exited after the
    child. Records of processes neither sampled nor below ``root`` are someone else's."""
    positions: dict[int, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        positions[r.pid].append(i)
    memo: dict[int, str | None] = {}

    def role_at(i: int) -> str | None:
        if i in memo:
            return memo[i]
        memo[i] = None  # a cycle through reused pids ends here
        r = records[i]
        if r.pid in sampled:
            memo[i] = sampled[r.pid]
            return memo[i]
        if r.ppid == root:
            parent = sampled.get(root, "harness and others")
        elif r.ppid in sampled:
            parent = sampled[r.ppid]
        else:
            later = positions.get(r.ppid, [])
            k = bisect.bisect_right(later, i)
            parent = role_at(later[k]) if k < len(later) else None
        if parent is not None:
            parent = parent.removesuffix(" (short-lived children)")
            memo[i] = f"{parent} (short-lived children)"
        return memo[i]

    found: dict[str, list[Exited]] = defaultdict(list)
    for i, r in enumerate(records):
        role = role_at(i)
        if role is not None:
            found[role].append(r)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="standard trials on one harness")
    parser.add_argument("--mode", default="optimized", choices=[m for m, (_, fresh) in MODES.items() if not fresh],
                        help="the harness options of benchmarks/trial_speed.py's mode")
    parser.add_argument("--out", type=Path, default=Path("runs") / time.strftime("bench-accounting-%H%M%S"))
    args = parser.parse_args()
    if os.geteuid() != 0 or not shutil.which("accton") or not shutil.which("dump-acct"):
        sys.exit("process accounting needs root and the acct package: apt-get install acct, then run as root")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    pacct = out / "pacct"
    pacct.touch()
    options, _ = MODES[args.mode]
    subprocess.run(["accton", str(pacct)], check=True, capture_output=True)
    t0, own0 = time.monotonic(), os.times()
    try:
        with Usage() as usage, Harness(workdir=out / "harness", **options) as harness:
            for k in range(args.runs):
                row = one_trial(harness, out / f"trial-{k}", last=k == args.runs - 1)
                print(f"trial {k}: {row['seconds']:.1f}s, {row['verdict']}", flush=True)
    finally:
        wall, own1 = time.monotonic() - t0, os.times()
        subprocess.run(["accton", "off"], check=True, capture_output=True)
    found = attribute(read_accounting(pacct), usage.roles_seen(), os.getpid())
    total = sum(r.cpu for rs in found.values() for r in rs)
    print(f"\nstandard trial ({' '.join(FAULTS)}), mode {args.mode}: {args.runs} trial(s) on one harness, "
          f"its start and close included; {wall:.1f} s wall")
    print(f"{'role':<52} {'processes':>9} {'CPU-s/trial':>12} {'CPU-s each':>11} {'share':>6}")
    for role, rs in sorted(found.items(), key=lambda kv: -sum(r.cpu for r in kv[1])):
        cpu = sum(r.cpu for r in rs)
        print(f"{role:<52} {len(rs):>9} {cpu / args.runs:>12.1f} {cpu / len(rs):>11.3f} {cpu / total:>6.0%}")
    own = own1.user + own1.system - own0.user - own0.system  # alive, so not in the records
    print(f"{'the harness process itself':<52} {1:>9} {own / args.runs:>12.1f}")
    print(f"{'all':<52} {sum(map(len, found.values())) + 1:>9} {(total + own) / args.runs:>12.1f}")


if __name__ == "__main__":
    main()
