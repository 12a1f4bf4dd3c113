"""Soak: a long campaign over control pipelines whose truth is known, on one harness; false verdicts, errors,
throughput and drift (a leak shows as a slope). Then, with ``--kill-resume K``, a campaign SIGKILLed K times
at random points and resumed each time, compared with the same campaign run without interruption (``--rounds``
times, each with its own kill points).

    python benchmarks/soak.py --trials 200 [--time-budget 90m] [--seed 0] [--out runs/soak]
    python benchmarks/soak.py --trials 0 --kill-resume 3 [--rounds 3]
    python benchmarks/soak.py --cluster docker --trials 50 --kill-resume 3

Controls (``CONTROLS``): exactly-once pipelines under faults they must survive (driver, executor and worker
kills, pauses, source-channel delays and cuts, sink-database kills and connection resets on the upsert and
two-phase PostgreSQL sinks, a windowed count under a configuration variant: RocksDB with changelog
checkpointing) and broken pipelines whose violation is certain (append sinks killed between their write and
the batch's commit: at-least-once; ``nondeterministic-key`` replayed: incorrect), among them two users' jobs
as written (``examples/orders_upsert.py``, exactly-once, and ``examples/orders_append.py``, at-least-once),
judged against Spark's batch query. ``--cluster docker`` soaks Docker nodes with ``NODE_CONTROLS``: node
kills, pauses and network partitions (between a node and everything, the driver only, or the sink database). A false
verdict is a control whose verdict is not its truth; each is listed with its trial id and replay command.
``stalled`` trials and harness errors (an exception from the harness or the checker) are counted apart.

Drift, sampled as each trial ends: the trial's wall time, the peak summed RSS and PSS of every process the
harness owns during it (``usage.Usage``), their open file descriptors and threads, how many there are, the
bytes under the temp directory, under the harness's work directory (its kept logs apart: one set per
application and spare driver, a rate, not a leak), and the trial directory's bytes. The sample is taken
once the harness is at rest (spare drivers ready, its process count unchanged for two seconds; that wait
is left out of trials per hour), with its processes counted by kind. Each series gets a least-squares line
over trial index (the first ``WARMUP`` trials left out: page cache and JIT warm up there; and the last: no
spare driver is booted for a trial that nothing follows); a slope above twice its standard error that adds
more than ``LEAK_SHARE`` of the mean over the run is printed as an upward slope. Under ``MIN_DRIFT_POINTS``
points (a short soak) the slopes are printed but not judged: a fit over three points calls noise a leak.
Everything is stored in ``<out>/soak.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from usage import Usage, role  # noqa: E402  (benchmarks/)

from chaos.campaign.runner import Progress, Runner  # noqa: E402
from chaos.campaign.stored import Campaign, CampaignSpec, parse_time_budget  # noqa: E402
from chaos.jobs.reference import job_ref  # noqa: E402
from chaos.machine.processes import OWNER_VAR, wait_until  # noqa: E402
from chaos.run.harness import Harness  # noqa: E402
from chaos.scenario.scenario import Scenario  # noqa: E402
from chaos.scenario.variants import label  # noqa: E402
from chaos.store.atomic import write_json  # noqa: E402

WARMUP = 2
LEAK_SHARE = 0.05
MIN_DRIFT_POINTS = 10  # fewer points after warm-up: drift is printed, not judged


@dataclass(frozen=True)
class Control:
    """A pipeline, schedules it runs under, and the verdict each of them must get."""

    pipeline: str
    truth: str
    schedules: tuple[str, ...]
    conf: tuple[tuple[str, str], ...] = ()  # a configuration variant (chaos/scenario/variants.py) the query runs under

    @property
    def row(self) -> str:
        return f"{self.pipeline} [{label(dict(self.conf))}]" if self.conf else self.pipeline


REPO = Path(__file__).resolve().parent.parent
ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
ROCKSDB_CHANGELOG = (
    ("spark.sql.streaming.stateStore.providerClass",
     "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"),
    ("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true"),
)
CONTROLS = (
    Control("api-count", "exactly-once", (
        "kill-driver@3:sink-done kill-executor@5:reading kill-driver@7:planned",
        "pause-driver@4:reading/3s",
    )),
    Control("passthrough-idempotent", "exactly-once", (
        "kill-worker@3:reading",
        "pause-executor@4:sink-write/3s kill-driver@6:sink-done",
    )),
    Control("key-count", "exactly-once", (
        "delay-source@3:reading/latency=500/2s kill-driver@5:sink-done",
        "cut-source@4:reading/3s kill-executor@6:sink-write",
    )),
    Control("pg-upsert-by-batch", "exactly-once", (
        "kill-sink-db@3:sink-write",
        "reset-sink@4:sink-write/2s kill-driver@6:sink-done",
    )),
    Control("pg-two-phase", "exactly-once", (
        "kill-sink-db@4:sink-done kill-driver@6:sink-done",
    )),
    Control("passthrough-append", "at-least-once", ("kill-driver@3:sink-done",)),
    Control("pg-append", "at-least-once", ("kill-driver@4:sink-done",)),
    Control("nondeterministic-key", "incorrect", ("kill-driver@3:sink-done",)),
    Control("windowed-count", "exactly-once", (
        "kill-executor@3:state-commit kill-driver@6:committed",
        "kill-driver@4:sink-done",
    ), ROCKSDB_CHANGELOG),
    # Users' jobs as written, judged against Spark's batch query over the same input.
    Control(job_ref(f"{REPO}/examples/orders_upsert.py:run", ORDER, "postgres:customer_totals", "customer"),
            "exactly-once", ("kill-driver@3:sink-done", "kill-executor@3:sink-write kill-driver@5:committed")),
    Control(job_ref(f"{REPO}/examples/orders_append.py:run", ORDER, "postgres:orders"), "at-least-once",
            ("kill-driver@3:sink-done",)),
)
# On Docker nodes (``--cluster docker``): whole machines die, freeze and lose their network.
NODE_CONTROLS = (
    Control("key-count", "exactly-once", (
        "kill-node@3:reading",
        "partition@2:reading/node=1/8s kill-node@5:sink-write",
        "partition@3:reading/node=0/from=driver/6s",
    )),
    Control("passthrough-idempotent", "exactly-once", (
        "pause-node@3:sink-write/4s",
        "kill-node@4:reading kill-driver@6:sink-done",
    )),
    Control("pg-upsert-by-batch", "exactly-once", ("partition@3:sink-write/node=sink/8s",)),
    Control("pg-append", "at-least-once", ("kill-driver@4:sink-done",)),
    Control("nondeterministic-key", "incorrect", ("kill-driver@3:sink-done",)),
)


def truth_key(pipeline: str, conf: dict | None) -> tuple:
    return pipeline, tuple(sorted((conf or {}).items()))


TRUTH = {truth_key(c.pipeline, dict(c.conf)): c.truth for c in (*CONTROLS, *NODE_CONTROLS)}


def dir_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path, onerror=lambda _e: None):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def owned(pid: int) -> list[psutil.Process]:
    """Live processes a harness in process ``pid`` started (its owner tag), zombies not counted."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if (proc.environ().get(OWNER_VAR, "").startswith(f"{pid}:")
                    and proc.status() != psutil.STATUS_ZOMBIE):
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def kept_logs(workdir: Path) -> int:
    """Bytes of the logs a harness keeps by design, one set per application and per driver: its workers'
    ``app-*`` directories (each executor's stdout and stderr), the spare drivers' folders, whose logs the
    trials' ``logs/driver-N.log`` link to, and the master's, workers' and database's own logs (a few lines per
    application, kept for as long as the harness runs)."""
    folders = [*workdir.glob("cluster/worker-*/app-*"), workdir / "spares", *workdir.glob("cluster/*.log")]
    return sum(dir_bytes(f) if f.is_dir() else f.stat().st_size for f in folders if f.exists())


def roles(procs: list[psutil.Process]) -> dict[str, int]:
    """How many of each kind (usage.role): a leak names its kind."""
    found: dict[str, int] = {}
    for proc in procs:
        try:
            name = role(proc.cmdline())
        except (psutil.Error, OSError):
            continue
        found[name] = found.get(name, 0) + 1
    return dict(sorted(found.items()))


def fds_and_threads(procs: list[psutil.Process]) -> tuple[int, int]:
    fds = threads = 0
    for proc in procs:
        try:
            fds += proc.num_fds()
            threads += proc.num_threads()
        except (psutil.Error, OSError):
            continue
    return fds, threads


def settle(harness: Harness, limit: float = 60.0) -> float:
    """Wait until the harness is at rest between trials: its spare drivers (booted in the trial's tail) ready,
    and the number of its processes unchanged for two seconds. A count taken while a spare's JVM, executors
    and Python workers come up depends on timing, not on leaks. Returns the seconds waited."""
    t0 = time.monotonic()
    spares = [s for s in (harness.spares.driver, harness.spares.standby) if s is not None]
    wait_until(lambda: all(not s.group.alive() or (s.folder / "ready").exists() for s in spares), limit, 0.2)
    counts: list[int] = []
    while time.monotonic() - t0 < limit:
        counts.append(len(owned(os.getpid())))
        if len(counts) >= 3 and counts[-1] == counts[-2] == counts[-3]:
            break
        time.sleep(1.0)
    return time.monotonic() - t0


class Sampler(Progress):
    """Takes the drift sample as each trial ends (the campaign's progress hook), once the harness is at rest."""

    def __init__(self, campaign: Campaign, usage: Usage, workdir: Path) -> None:
        self.campaign, self.usage, self.workdir = campaign, usage, workdir
        self.harness: Harness | None = None
        self.rows: list[dict] = []
        self.settling = 0.0  # seconds spent waiting for rest: not trial time

    def trial_done(self, trial_id: str, scenario: Scenario, verdict: dict, result: dict) -> None:
        rss, pss = self.usage.take_window()
        waited = settle(self.harness) if self.harness is not None else 0.0
        self.settling += waited
        procs = owned(os.getpid())
        fds, threads = fds_and_threads([psutil.Process(), *procs])
        logs = kept_logs(self.workdir)
        row = {"trial": trial_id, "pipeline": scenario.pipeline, "conf": scenario.conf, "faults": scenario.specs,
               "verdict": verdict["verdict"], "truth": TRUTH[truth_key(scenario.pipeline, scenario.conf)],
               "seconds": result["seconds"],
               "peak_rss_mib": rss >> 20, "peak_pss_mib": pss >> 20, "fds": fds, "threads": threads,
               "processes": len(procs), "tmp_mib": dir_bytes(Path(tempfile.gettempdir())) / 2**20,
               "workdir_mib": (dir_bytes(self.workdir) - logs) / 2**20, "logs_mib": logs / 2**20,
               "trial_dir_mib": dir_bytes(self.campaign.trial_dir(trial_id)) / 2**20, "settle_s": round(waited, 1),
               "roles": roles(procs)}
        self.rows.append(row)
        mark = "" if row["verdict"] == row["truth"] else f"  FALSE (truth {row['truth']})"
        print(f"{len(self.rows):>4} {trial_id:<30} {row['seconds']:>6.1f}s {row['verdict']:<14} "
              f"RSS {row['peak_rss_mib']:>5} PSS {row['peak_pss_mib']:>5} fds {fds:>5} threads {threads:>5} "
              f"procs {len(procs):>3}{mark}", flush=True)

    def note(self, text: str) -> None:
        print(f"     {text}", flush=True)


def fit(ys: list[float]) -> dict:
    """Least-squares slope over index (per trial) with its standard error; ``upward`` when it is more than
    noise (> 2 standard errors) and adds more than LEAK_SHARE of the mean over the series."""
    n = len(ys)
    if n < 3:
        return {"n": n, "slope": 0.0, "stderr": 0.0, "mean": ys[0] if ys else 0.0, "upward": False}
    xs = list(range(n))
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    resid = [y - (my + slope * (x - mx)) for x, y in zip(xs, ys, strict=True)]
    stderr = math.sqrt(sum(r * r for r in resid) / (n - 2) / sxx) if sxx else 0.0
    growth = slope * n
    upward = slope > 2 * stderr and growth > LEAK_SHARE * max(abs(my), 1e-9)
    return {"n": n, "slope": slope, "stderr": stderr, "mean": my, "growth_over_run": growth, "upward": upward}


def plan_spec(controls: tuple[Control, ...], trials: int, seed: int, events: int, per_batch: int,
              cluster: str) -> CampaignSpec:
    """Each control's schedules, cycled, round robin over controls: ``trials`` in all (the loop stops there)."""
    per = math.ceil(trials / len(controls))
    schedules = {c.pipeline: [c.schedules[k % len(c.schedules)] for k in range(per)] for c in controls}
    return CampaignSpec(pipelines=[c.pipeline for c in controls], trials=per, seed=seed, events=events,
                        events_per_batch=per_batch, shrink=False, schedules=schedules, cluster=cluster)


def create(root: Path, controls: tuple[Control, ...], spec: CampaignSpec) -> Campaign:
    """The soak's campaign, each control's trials under its own configuration variant (a campaign's ``--conf``
    puts every pipeline under every variant; here one control has one)."""
    campaign = Campaign.create(root, spec)
    variant = {c.pipeline: c for c in controls if c.conf}
    if variant:
        from chaos.campaign.shards import plan_hash

        for entry in campaign.data["plan"]:
            if (control := variant.get(entry["pipeline"])) is not None:
                entry["scenario"]["conf"], entry["row"] = dict(control.conf), control.row
        campaign.data["plan_hash"] = plan_hash(campaign.data)
        write_json(root / "campaign.json", campaign.data)
        campaign = Campaign.load(root)
    return campaign


def soak(out: Path, trials: int, budget: float | None, seed: int, events: int, per_batch: int,
         cluster: str = "standalone") -> dict:
    controls = NODE_CONTROLS if cluster == "docker" else CONTROLS
    campaign = create(out / "campaign", controls, plan_spec(controls, trials, seed, events, per_batch, cluster))
    skipped = campaign.data.get("skipped", [])
    for s in skipped:
        print(f"skipped {s['pipeline']}: {s['reason']}")
    plan = campaign.plan[:trials]
    workdir = campaign.root / "harness"
    errors: list[dict] = []

    def start() -> Harness:
        return Harness(cluster=cluster, workdir=workdir, data_dir=campaign.root).__enter__()

    t0 = time.monotonic()
    with Usage() as usage:
        sampler = Sampler(campaign, usage, workdir)
        harness = sampler.harness = start()
        try:
            print(f"harness up in {time.monotonic() - t0:.1f}s; {len(plan)} trials planned"
                  + (f", time budget {budget:.0f}s" if budget else ""), flush=True)
            usage.take_window()
            for k, entry in enumerate(plan):
                if budget is not None and time.monotonic() - t0 >= budget:
                    print(f"time budget spent: {len(plan) - k} planned trial(s) not run", flush=True)
                    break
                try:
                    Runner(campaign, harness, sampler).run_trial(entry["id"], Scenario(**entry["scenario"]),
                                                                 last=k == len(plan) - 1)
                except Exception as exc:  # noqa: BLE001  (a harness error is a finding of the soak, not its end)
                    path = campaign.trial_dir(entry["id"]) / "soak-error.txt"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(traceback.format_exc())
                    errors.append({"trial": entry["id"], "error": f"{type(exc).__name__}: {exc}"[:300],
                                   "traceback": str(path)})
                    print(f"     harness error in {entry['id']}: {errors[-1]['error']} (harness restarted)",
                          flush=True)
                    harness.__exit__(None, None, None)
                    harness = sampler.harness = start()
                    usage.take_window()
        finally:
            harness.__exit__(None, None, None)
        wall = time.monotonic() - t0
    time.sleep(2)
    left = [f"{p.pid} {' '.join(p.cmdline())[:120]}" for p in owned(os.getpid())]
    return {"rows": sampler.rows, "errors": errors, "wall_s": wall - sampler.settling, "settling_s": sampler.settling,
            "left": left, "skipped": skipped,
            "peak_rss_mib": usage.peak >> 20, "peak_pss_mib": usage.peak_pss >> 20,
            "cpu_s_per_trial": usage.cpu_seconds / max(len(sampler.rows), 1)}


def report_soak(res: dict, out: Path) -> bool:
    rows = res["rows"]
    false = [r for r in rows if r["verdict"] != r["truth"] and r["verdict"] != "stalled"]
    stalled = [r for r in rows if r["verdict"] == "stalled"]
    per_hour = 3600 * len(rows) / res["wall_s"] if res["wall_s"] else 0.0
    print(f"\nsoak: {len(rows)} trials in {res['wall_s'] / 60:.1f} min ({per_hour:.0f} trials/hour, harness start "
          f"included, the {res['settling_s'] / 60:.1f} min spent waiting for rest before each sample left out), "
          f"{res['cpu_s_per_trial']:.1f} CPU-s per trial, peak {res['peak_rss_mib']} MiB RSS / "
          f"{res['peak_pss_mib']} MiB PSS")
    by_pipeline: dict[str, dict[str, int]] = {}
    for r in rows:
        name = f"{Control(r['pipeline'], '', (), tuple((r.get('conf') or {}).items())).row} (truth {r['truth']})"
        by_pipeline.setdefault(name, {}).setdefault(r["verdict"], 0)
        by_pipeline[name][r["verdict"]] += 1
    for name, counts in by_pipeline.items():
        print(f"  {name:<48} {', '.join(f'{v} {n}' for v, n in sorted(counts.items()))}")
    print(f"false verdicts: {len(false)}")
    for r in false:
        run_dir = out / "campaign" / "trials" / r["trial"]
        print(f"  {r['trial']}: {' '.join(r['faults'])} -> {r['verdict']}, truth {r['truth']}; "
              f"replay: streamchaos replay {run_dir}")
    print(f"stalled trials: {len(stalled)}" + "".join(f"\n  {r['trial']}: {' '.join(r['faults'])}" for r in stalled))
    print(f"harness errors: {len(res['errors'])}" + "".join(f"\n  {e['trial']}: {e['error']} ({e['traceback']})"
                                                             for e in res["errors"]))
    print(f"processes left after the harness closed: {len(res['left'])}" + "".join(f"\n  {p}" for p in res["left"]))
    fits = {}
    points = len(rows[WARMUP:-1])
    judged = points >= MIN_DRIFT_POINTS  # a fit over a handful of points calls noise a leak
    if not judged:
        print(f"too few trials to judge drift: {points} point(s) after warm-up, at least {MIN_DRIFT_POINTS} "
              f"(--trials {MIN_DRIFT_POINTS + WARMUP + 1} or more); the slopes below are not judged")
    print(f"drift (least squares over trial index, the first {WARMUP} trials and the last left out: warm-up, and "
          f"no spare after the last; slope per trial ± standard error; growth = slope x trials):")
    for key in ("seconds", "peak_rss_mib", "peak_pss_mib", "fds", "threads", "processes", "tmp_mib",
                "workdir_mib", "trial_dir_mib", "logs_mib"):
        f = fits[key] = fit([float(r[key]) for r in rows[WARMUP:-1]])
        f["upward"] = f["upward"] and judged
        mark = "UPWARD" if f["upward"] else "flat" if judged else "not judged"
        if key == "logs_mib":  # kept on purpose, one set per trial: a rate, not a leak
            mark = f"kept by design: {f['slope'] * 1024:.0f} KiB of logs per trial"
            f["upward"] = False
        print(f"  {key:<14} mean {f['mean']:>9.1f}  slope {f['slope']:>+9.4f} ± {f['stderr']:.4f}  growth "
              f"{f.get('growth_over_run', 0.0):>+9.1f}  {mark}")
    for name in sorted({n for r in rows for n in r.get("roles", {})}):  # a leak names its kind
        f = fit([float(r.get("roles", {}).get(name, 0)) for r in rows[WARMUP:-1]])
        if f["upward"] and judged:
            print(f"  processes that grew: {name} (slope {f['slope']:+.4f} ± {f['stderr']:.4f} per trial)")
    res["fits"] = fits
    res["false_verdicts"] = false
    return not false and not res["errors"] and not res["left"] and not any(f["upward"] for f in fits.values())


# -- the harness killed mid-campaign ------------------------------------------------------------------
KILL_RESUME_ARGS = ["--pipeline", "passthrough-idempotent", "--pipeline", "passthrough-append", "--trials", "3",
                    "--events", "600", "--max-faults", "1", "--no-shrink"]


def verdicts(root: Path) -> dict[str, tuple[str, int]]:
    """Finished trials: verdict and verdict.json's mtime (a rewrite changes it)."""
    trials = root / "trials"
    found = {}
    for d in sorted(trials.iterdir()) if trials.is_dir() else []:
        path = d / "verdict.json"
        if path.exists():
            found[d.name] = (json.loads(path.read_text())["verdict"], path.stat().st_mtime_ns)
    return found


def reference_run(out: Path, seed: int, cluster: str) -> dict[str, str]:
    """The kill-resume campaign run without interruption: its verdict per trial."""
    reference = out / "reference"
    ref = subprocess.run([sys.executable, "-m", "chaos", "campaign", "run", *KILL_RESUME_ARGS, "--seed", str(seed),
                          "--cluster", cluster, "--out", str(reference)], capture_output=True, text=True)
    expected = {t: v for t, (v, _) in verdicts(reference).items()}
    print(f"reference campaign: exit {ref.returncode}, {expected}", flush=True)
    return expected


def kill_resume(out: Path, kills: int, seed: int, kill_seed: int, expected: dict[str, str],
                cluster: str = "standalone") -> list[str]:
    """The same campaign SIGKILLed ``kills`` times at random points (``kill_seed``) and resumed after each;
    returns the problems found (none: passed)."""
    rng = random.Random(kill_seed)
    base = [sys.executable, "-m", "chaos", "campaign"]
    root = out / f"killed-{kill_seed}"
    pids, problems, done_kills = [], [], 0
    command = [*base, "run", *KILL_RESUME_ARGS, "--seed", str(seed), "--cluster", cluster, "--out", str(root)]
    while True:
        before = verdicts(root)
        log = out / f"killed-{kill_seed}-run{len(pids) + 1}.log"
        with open(log, "w") as fh:  # a file, not a pipe: a harness never blocks on a full pipe nobody reads
            proc = subprocess.Popen(command, stdout=fh, stderr=subprocess.STDOUT)
        pids.append(proc.pid)
        command = [*base, "resume", str(root)]
        if done_kills < kills:
            # A random point: while the harness starts, or in a later trial (run, check or summary).
            wait_for = len(before) + rng.choice([0, 0, 1])
            deadline = time.monotonic() + 900
            while proc.poll() is None and len(verdicts(root)) < wait_for and time.monotonic() < deadline:
                time.sleep(0.2)
            delay = rng.uniform(1.0, 25.0)
            t_end = time.monotonic() + delay
            while proc.poll() is None and time.monotonic() < t_end:
                time.sleep(0.1)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                done_kills += 1
                after = verdicts(root)
                print(f"  kill {done_kills}: SIGKILL {delay:.1f}s after {wait_for} finished trial(s); "
                      f"{len(after)} finished", flush=True)
                changed = [t for t, v in before.items() if after.get(t) != v]
                if changed:
                    problems.append(f"finished verdicts rewritten: {changed}")
                continue
        proc.wait()
        err = log.read_text(errors="replace")
        after = verdicts(root)
        changed = [t for t, v in before.items() if after.get(t) != v]
        if changed:
            problems.append(f"finished verdicts rewritten: {changed}")
        print(f"  run {len(pids)} ended by itself: exit {proc.returncode}"
              + (f"; {err.strip()[-300:]}" if proc.returncode not in (0, 1) else ""), flush=True)
        if proc.returncode not in (0, 1) or done_kills >= kills or len(pids) > kills + 3:
            break
    got = {t: v for t, (v, _) in verdicts(root).items()}
    if got != expected:
        problems.append(f"verdicts differ from the uninterrupted run: {got} vs {expected}")
    plan = [e["id"] for e in json.loads((root / "campaign.json").read_text())["plan"]]
    if sorted(got) != sorted(plan):
        problems.append(f"planned {plan}, finished {sorted(got)}")
    if done_kills < kills:
        problems.append(f"only {done_kills} of {kills} kills landed before the campaign ended")
    time.sleep(2)
    left = [p for pid in pids for p in owned(pid)]
    if left:
        problems.append(f"{len(left)} process(es) left: {[p.pid for p in left]}")
    summary = json.loads((root / "summary.json").read_text())
    ref_summary = json.loads((out / "reference" / "summary.json").read_text())
    if ({n: r["verdict"] for n, r in summary["pipelines"].items()}
            != {n: r["verdict"] for n, r in ref_summary["pipelines"].items()}
            or summary["finished"] != ref_summary["finished"]):
        problems.append("final summary differs from the uninterrupted run's")
    print(f"kill-resume round (kill seed {kill_seed}): {done_kills} kills, {len(pids)} harness runs, "
          f"{len(got)}/{len(plan)} trials finished, per-trial verdicts {'equal' if got == expected else 'DIFFERENT'}"
          f", {'passed' if not problems else 'FAILED: ' + '; '.join(problems)}", flush=True)
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200, help="trials of the soak (0: none)")
    parser.add_argument("--time-budget", default=None, help="stop starting soak trials after this, e.g. 90m")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--events-per-batch", type=int, default=200)
    parser.add_argument("--kill-resume", type=int, default=0, metavar="K",
                        help="then SIGKILL a small campaign K times at random points and resume it each time")
    parser.add_argument("--rounds", type=int, default=3,
                        help="kill-resume rounds, each with its own kill points, against one uninterrupted run")
    parser.add_argument("--cluster", choices=("standalone", "docker"), default="standalone",
                        help="docker: Docker nodes, soaked with node kills, pauses and partitions (NODE_CONTROLS)")
    parser.add_argument("--out", type=Path, default=Path("runs") / time.strftime("soak-%Y%m%d-%H%M%S"))
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=False)
    ok = True
    stored: dict = {"args": {k: str(v) for k, v in vars(args).items()}, "cores": os.cpu_count()}
    if args.trials:
        res = soak(out, args.trials, parse_time_budget(args.time_budget), args.seed, args.events,
                   args.events_per_batch, args.cluster)
        ok = report_soak(res, out) and ok
        stored["soak"] = res
    if args.kill_resume:
        expected = reference_run(out, args.seed, args.cluster)
        rounds = {r: kill_resume(out, args.kill_resume, args.seed, r, expected, args.cluster)
                  for r in range(1, args.rounds + 1)}
        passed = sum(not problems for problems in rounds.values())
        print(f"kill-resume: {passed} of {len(rounds)} rounds passed ({args.kill_resume} SIGKILLs each)")
        stored["kill_resume"] = {"expected": expected, "rounds": rounds}
        ok = ok and passed == len(rounds)
    (out / "soak.json").write_text(json.dumps(stored, indent=1, default=str))
    print(f"\n{'PASS' if ok else 'FAIL'}; stored in {out / 'soak.json'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
