"""Benchmark: what spreading a campaign over machines costs, measured on this one.

    python benchmarks/scale.py [--trials 6] [--shards 2] [--merge-trials 1000] [--no-ray | --ray-only] [--out DIR]

1. **Shards + merge against one `campaign run`**: the same plan (``--trials`` standard-size trials of
   ``passthrough-append`` with one driver kill each) run as one ``streamchaos campaign run`` and as
   ``--shards`` shard commands run one after another here, then ``campaign merge``. On N machines the shards
   run at once; what sharding adds per trial is each shard's own harness start and close and the merge:
   ``(sum of shard walls + merge wall - one run's wall) / trials``, printed beside a trial's median time.
2. **The Ray path against one `campaign run`**: the same plan run with ``--ray`` on a one-node Ray cluster
   started here (Ray's own test cluster, loopback only), so both runs have one harness on the same 2 cores:
   ``(Ray wall - one run's wall) / trials`` is what Ray adds per trial (actor start, a trial's directory
   packed, sent and unpacked, scheduling); the Ray processes' peak RSS is printed too. Skipped without Ray.
3. **Merge at scale**: ``--merge-trials`` stored trials (copies of a real trial of part 1, hard-linked),
   split over 4 shards, merged into one directory with its summary and report; prints the seconds and the
   merge process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chaos.campaign.merge import copy_tree  # noqa: E402
from chaos.campaign.on_ray import pack, unpack  # noqa: E402
from chaos.campaign.stored import Campaign, CampaignSpec  # noqa: E402
from chaos.store.atomic import write_json  # noqa: E402

OPTIONS = ["--pipeline", "passthrough-append", "--seed", "11", "--events", "2000", "--no-shrink", "--max-faults",
           "1"]


def streamchaos(*args: str, cwd: Path) -> float:
    """Run one command; its wall seconds (a violation's exit 1 is a result, not a failure)."""
    t0 = time.monotonic()
    done = subprocess.run(["streamchaos", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"streamchaos {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.monotonic() - t0


def trial_seconds(root: Path) -> list[float]:
    return [json.loads(p.read_text())["seconds"] for p in sorted(root.glob("trials/*/result.json"))]


def shards_against_one_run(out: Path, trials: int, shards: int) -> tuple[Path, float]:
    one = streamchaos("campaign", "run", *OPTIONS, "--trials", str(trials), "--out", "one", cwd=out)
    walls = [streamchaos("campaign", "run", *OPTIONS, "--trials", str(trials), "--shard", f"{i}/{shards}",
                         "--out", f"shard-{i}", cwd=out) for i in range(1, shards + 1)]
    merge = streamchaos("campaign", "merge", "merged", *(f"shard-{i}" for i in range(1, shards + 1)), cwd=out)
    median = statistics.median(trial_seconds(out / "one") + trial_seconds(out / "merged"))
    added = sum(walls) + merge - one
    per_shard = (sum(walls) - one) / (shards - 1) if shards > 1 else 0.0
    print(f"one campaign run: {trials} trials in {one:.1f}s; {shards} shards one after another: "
          f"{' + '.join(f'{w:.1f}' for w in walls)}s, merge {merge:.1f}s; a trial's median {median:.1f}s")
    print(f"sharding adds {added:.1f}s in all, {added / trials:.1f}s per trial at {trials // shards} trials a shard "
          f"({added / trials / median:.0%} of a trial): each shard's own harness start, cold first driver and "
          f"close, about {per_shard:.1f}s once per shard, and the merge")
    for share in (30, 100):
        print(f"  at {share} trials a shard: {(per_shard + merge / shards) / share:.2f}s per trial "
              f"({(per_shard + merge / shards) / share / median:.1%} of a trial)")
    return out / "one", one


def ray_processes() -> list:
    """Ray's own processes (GCS, raylets, agents, monitors), not the actor that runs the harness."""
    import psutil

    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "NodeHarness" in cmd:
            continue
        if proc.info["name"] in ("raylet", "gcs_server") or cmd.startswith("ray::") or "site-packages/ray/" in cmd:
            found.append(proc)
    return found


def ray_usage() -> tuple[int, float]:
    """Ray's own processes: RSS now, CPU-seconds so far."""
    import psutil

    rss, cpu = 0, 0.0
    for proc in ray_processes():
        try:
            rss += proc.memory_info().rss
            times = proc.cpu_times()
            cpu += times.user + times.system
        except psutil.Error:
            continue
    return rss, cpu


def ray_against_one_run(out: Path, trials: int, one_wall: float) -> None:
    """``--ray`` on a one-node Ray cluster against ``one_wall``, the same plan's ``campaign run`` wall."""
    import os
    import threading

    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # the cluster keeps 127.0.0.1 (docs/scale.md)
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        from ray.cluster_utils import Cluster
    except ImportError:
        print("the Ray path: skipped (Ray is not installed: pip install -e '.[ray]')")
        return
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                            "node_ip_address": "127.0.0.1"})
    peak, running = [0], [True]

    def sample() -> None:
        while running[0]:
            peak[0] = max(peak[0], ray_usage()[0])
            time.sleep(1.0)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    cpu_before = ray_usage()[1]
    try:
        wall = streamchaos("campaign", "run", *OPTIONS, "--trials", str(trials), "--ray", cluster.address,
                           "--out", "ray", cwd=out)
        cpu = ray_usage()[1] - cpu_before
    finally:
        running[0] = False
        sampler.join()
        cluster.shutdown()
    median = statistics.median(trial_seconds(out / "ray"))
    one_median = statistics.median(trial_seconds(out / "one"))
    sample_dir = sorted((out / "ray" / "trials").iterdir())[0]
    t0 = time.monotonic()
    data = pack(sample_dir)
    unpack(data, out / "unpacked" / sample_dir.name)
    transport = time.monotonic() - t0
    added = (wall - one_wall) / trials
    print(f"--ray on a one-node Ray cluster: {trials} trials in {wall:.1f}s (one campaign run: {one_wall:.1f}s); "
          f"Ray adds {added:+.1f}s per trial ({added / median:+.1%} of a trial's median {median:.1f}s); "
          f"a trial's median on one machine {one_median:.1f}s")
    print(f"  Ray's own processes (GCS, raylet, agents): {cpu:.1f} CPU-s during the campaign ({cpu / trials:.2f} "
          f"per trial), peak RSS {peak[0] / 2**20:.0f} MiB; a trial's directory through Ray: "
          f"{len(data) / 2**20:.1f} MiB, packed and unpacked in {transport:.2f}s")


def merge_at_scale(out: Path, source: Path, count: int) -> None:
    """``count`` planned trials over 4 shards, each trial a hard-linked copy of one stored trial of ``source``."""
    sample = sorted(source.glob("trials/*"))[0]
    spec = CampaignSpec(pipelines=["passthrough-append"], trials=count, seed=1, events=2000, shrink=False,
                        schedules={"passthrough-append": ["kill-driver@3:sink-done"] * count})
    parts = [Campaign.create(out / f"big-{i}", spec, shard=(i, 4)) for i in range(1, 5)]
    t0 = time.monotonic()
    for part in parts:
        for entry in part.share:
            target = part.trial_dir(entry["id"])
            copy_tree(sample, target)
            scenario = json.loads((sample / "scenario.json").read_text())
            write_json(target / "scenario.json", {**scenario, **entry["scenario"]})
    print(f"{count} stored trials laid out in 4 shards in {time.monotonic() - t0:.1f}s")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    seconds = streamchaos("campaign", "merge", "big", *(f"big-{i}" for i in range(1, 5)), cwd=out)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    summary = json.loads((out / "big" / "summary.json").read_text())
    print(f"campaign merge of {summary['finished']} trials from 4 shards (summary and report included): "
          f"{seconds:.1f}s, peak RSS {max(peak, before) / 1024:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--merge-trials", type=int, default=1000)
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray path")
    parser.add_argument("--ray-only", action="store_true", help="one campaign run and the Ray path only")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-scale"))
    args = parser.parse_args()
    out = args.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    if args.ray_only:
        one_wall = streamchaos("campaign", "run", *OPTIONS, "--trials", str(args.trials), "--out", "one", cwd=out)
        ray_against_one_run(out, args.trials, one_wall)
        return
    one, one_wall = shards_against_one_run(out, args.trials, args.shards)
    if not args.no_ray:
        ray_against_one_run(out, args.trials, one_wall)
    merge_at_scale(out, one, args.merge_trials)


if __name__ == "__main__":
    main()
