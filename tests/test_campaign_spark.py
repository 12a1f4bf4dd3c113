"""Campaigns on a real cluster: a violation found and shrunk, analyze without Spark, replay, the report
in Chromium; a SIGKILLed campaign resumed with no trial lost or run twice; the pytest plugin's project."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.campaign.runner import Runner
from chaos.campaign.stored import refused_by
from chaos.machine.processes import wait_until
from properties.planning import applicable_actions, coverage, plan_schedules, stable_seed
from tests.conftest import REPO, cli, left_by
from tests.test_campaign_store import assert_rendered, render_in_chromium

pytestmark = pytest.mark.spark

EVENTS = "600"  # 3 micro-batches of 200: the cheapest stream that still has a batch after the fault


def seed_whose_first_trial_kills_at_sink_done(pipeline: str) -> int:
    """The plan is computed without Spark: pick a seed whose first generated trial can duplicate."""
    kills = applicable_actions(["kill"], sink_channel=False, database=False, refused=refused_by("standalone", False))
    for seed in range(100):
        first = plan_schedules(3, kills, 1, stable_seed(seed, pipeline))[0]
        if ("kill-driver", "sink-done") in coverage([first]):
            return seed
    raise AssertionError("no seed below 100 plans a driver kill at sink-done first")


def test_campaign_finds_shrinks_reports_analyzes_and_replays(spark_cluster, tmp_path):
    seed = seed_whose_first_trial_kills_at_sink_done("passthrough-append")
    run = cli("campaign", "run", "--pipeline", "passthrough-append", "--expect", "exactly-once", "--trials", "1",
              "--seed", str(seed), "--events", EVENTS, "--shrink-trials", "1", "--out", "c",
              "--cluster", spark_cluster.master_url, cwd=tmp_path, timeout=1200)
    assert run.rc == 1, run.stdout + run.stderr
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    row = summary["pipelines"]["passthrough-append"]
    assert row["verdict"] == "at-least-once" and row["meets"] is False
    ce = row["counterexample"]
    assert len(ce["minimal"]) == 1 and ce["minimal"][0].startswith("kill-driver@")
    assert ce["minimal"][0].endswith(":sink-done")
    assert "minimal counterexample" in run.stdout and ce["command"] in run.stdout
    assert ce["command"].startswith("streamchaos trial passthrough-append")
    assert "report: " in run.stdout and (tmp_path / "c" / "report.html").exists()
    assert left_by(run.pid) == []

    dom, shot = render_in_chromium(tmp_path / "c" / "report.html", tmp_path)
    assert_rendered(dom, shot)  # declared exactly-once, measured at-least-once: both badges
    assert ce["minimal"][0] in dom

    # analyze: the stored verdicts again, from the stored runs alone (no JVM started: it takes seconds).
    t0 = time.monotonic()
    again = cli("analyze", "c", cwd=tmp_path)
    assert again.rc == 1 and "0 changed" in again.stdout, again.stdout + again.stderr
    assert time.monotonic() - t0 < 120
    assert json.loads((tmp_path / "c" / "summary.json").read_text())["pipelines"] == summary["pipelines"]

    # replay the minimal counterexample: the same verdict again.
    replayed = cli("replay", f"c/trials/{ce['minimal_trial']}", "--cluster", spark_cluster.master_url,
                   cwd=tmp_path, timeout=600)
    assert replayed.rc == 0, replayed.stdout + replayed.stderr
    assert "stored verdict at-least-once, replayed at-least-once: the same" in replayed.stdout
    assert list((tmp_path / "c" / "replays").iterdir())


def finished_trials(root: Path) -> dict[str, float]:
    trials = root / "trials"
    return {d.name: (d / "verdict.json").stat().st_mtime for d in trials.iterdir()
            if (d / "verdict.json").exists()} if trials.is_dir() else {}


@pytest.mark.long  # reaping after a SIGKILL: tests/test_orphans_spark.py; resume: tests/test_campaign_store.py
def test_sigkilled_campaign_resumes_without_losing_or_repeating_a_trial(tmp_path):
    args = [sys.executable, "-m", "chaos", "campaign", "run", "--pipeline", "passthrough-idempotent",
            "--trials", "2", "--seed", "2", "--events", EVENTS, "--max-faults", "1", "--out", "c"]
    harness = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: len(finished_trials(tmp_path / "c")) >= 1, 600, 0.5), "no trial finished"
        os.kill(harness.pid, signal.SIGKILL)
        harness.wait(30)
    finally:
        if harness.poll() is None:
            harness.kill()
    before = finished_trials(tmp_path / "c")
    plan = [e["id"] for e in json.loads((tmp_path / "c" / "campaign.json").read_text())["plan"]]
    assert 1 <= len(before) < len(plan)
    assert left_by(harness.pid), "a SIGKILLed harness leaves its cluster behind (the resume reaps it)"

    resumed = cli("campaign", "resume", "c", cwd=tmp_path, timeout=1200)
    assert resumed.rc == 0, resumed.stdout + resumed.stderr
    after = finished_trials(tmp_path / "c")
    assert sorted(after) == sorted(plan)  # none lost
    assert all(after[t] == before[t] for t in before)  # none run (or even re-checked) twice
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summary["finished"] == len(plan) and summary["pipelines"]["passthrough-idempotent"]["trials"] == len(plan)
    assert summary["pipelines"]["passthrough-idempotent"]["verdict"] == "exactly-once"
    assert left_by(harness.pid) == [] and left_by(resumed.pid) == []


def test_plugin_project_passes_and_fails_with_a_counterexample(spark_cluster, tmp_path):
    project = REPO / "tests" / "plugin_project"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), str(REPO)])}
    report = tmp_path / "session.html"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", f"--basetemp={tmp_path / 'base'}",
         "--chaos-trials", "1", "--chaos-events", EVENTS, "--chaos-shrink-trials", "1",
         "--chaos-cluster", spark_cluster.master_url, f"--chaos-report={report}"],
        cwd=project, env=env, capture_output=True, text=True, timeout=1500)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "1 failed, 1 passed" in out
    assert "orders-append violates exactly-once: measured at-least-once" in out or \
        "orders:ORDERS_APPEND violates exactly-once: measured at-least-once" in out, out
    assert "minimal counterexample: kill-driver@" in out and "replay: streamchaos trial orders:ORDERS_APPEND" in out
    assert report.exists() and "streamchaos report:" in out


def test_weaker_pipelines_are_caught_by_the_first_planned_trial(chaos_harness, tmp_path):
    """``--expect exactly-once`` on pipelines whose truth is weaker: the first planned trial (driver kills after
    the sink wrote and at the second batch after the restart) already violates, on the session's shared harness
    (pre-warmed drivers), planned as on a cluster whose workers it does not own (the same plan as ``campaign run
    --cluster spark://...``). Faults only fire at phases the pipelines reach. One seed: how often the first
    planned trial catches a bug, over a corpus and many trials, is benchmarks/detection.py's measure."""
    from chaos.campaign.stored import Campaign, CampaignSpec

    for seed in (4,):
        spec = CampaignSpec(pipelines=["passthrough-append", "passthrough-file-raw"], expect="exactly-once",
                            trials=1, seed=seed, events=1000, shrink=False, cluster=chaos_harness.cluster_spec,
                            workers=chaos_harness.workers)
        campaign = Campaign.create(tmp_path / f"c{seed}", spec, owns_workers=False)
        summary = Runner(campaign, chaos_harness).run()
        assert summary["exit_code"] == 1, summary
        rows = json.loads((tmp_path / f"c{seed}" / "summary.json").read_text())["pipelines"]
        for name, row in rows.items():
            assert row["meets"] is False and row["verdict"] == "at-least-once", (seed, name, row)
            assert row["faulted_trials"] == 1 and "kill-driver:after-restart" in row["covered"]
        results = [json.loads(p.read_text()) for p in (tmp_path / f"c{seed}" / "trials").glob("*/result.json")]
        assert len(results) == 2 and all(f["fired"] for r in results for f in r["faults"]), results


@pytest.mark.long
def test_late_writes_of_a_recycled_driver_do_not_change_stored_verdicts(spark_cluster, tmp_path):
    """A sink that writes from a background thread, run as a campaign whose trials reuse their last driver:
    that driver writes into the finished trial's sink during the next trial. The campaign says so, and
    ``analyze`` gives the verdicts the campaign printed (judged from each sink as its trial ended it)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "user_pipelines"), str(REPO)])}
    proc = cli(
        # The second trial's kill comes late: the recycled driver (its first) lives on to finish the first's writes.
        "campaign", "run", "--pipeline", "late_writer:PIPELINE", "--trials", "2",
        "--example", "kill-driver@1:sink-done", "--example", "kill-driver@4:sink-done",
        "--seed", "3", "--events", "1000", "--no-shrink", "--standby", "--out", "c",
        "--cluster", spark_cluster.master_url, cwd=tmp_path, env=env, timeout=1200)
    out = proc.stdout + proc.stderr
    root = tmp_path / "c"
    plan = [e["id"] for e in json.loads((root / "campaign.json").read_text())["plan"]]
    verdicts = {t: json.loads((root / "trials" / t / "verdict.json").read_text()) for t in plan}
    first = verdicts[plan[0]]
    starts = [json.loads(line)["detail"] for line in (root / "trials" / plan[1] / "history.jsonl").read_text()
              .splitlines() if '"kind": "driver"' in line]
    assert starts[0].get("spare", "").startswith("recycled-"), starts  # trial 2 ran on trial 1's last driver
    assert first["late_writes"] and first["late_writes"]["rows"] > 0, (first["late_writes"], out)
    assert first["verdict"] == "at-most-once" and first["effect"]["counts"]["lost"] > 0  # pending at the end
    assert "late writes: the sink changed after the trial ended in 1 trial(s)" in proc.stdout, out

    again = subprocess.run([sys.executable, "-m", "chaos", "analyze", "c"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    assert "re-checked 2 trial(s): 2 unchanged, 0 changed" in again.stdout, again.stdout + again.stderr
    for t in plan:
        after = json.loads((root / "trials" / t / "verdict.json").read_text())
        assert after["verdict"] == verdicts[t]["verdict"] and after["lost"] == verdicts[t]["lost"]
    assert after["late_writes"] is None  # the last trial's driver was not kept: nothing wrote after it
    assert left_by(proc.pid) == []


@pytest.mark.long
def test_a_campaign_with_random_timing_times_a_no_fault_trial_and_fires_the_same_faults_at_times(spark_cluster,
                                                                                                  tmp_path):
    run = cli("campaign", "run", "--pipeline", "passthrough-append", "--trials", "2", "--events", EVENTS,
              "--timing", "random", "--out", "c", "--cluster", spark_cluster.master_url, cwd=tmp_path, timeout=900)
    assert run.rc in (0, 1) and "Traceback" not in run.stderr, run.stderr[-3000:]
    root = tmp_path / "c"
    data = json.loads((root / "campaign.json").read_text())
    assert data["spec"]["timing"] == "random" and data["spec"]["shrink"] is False
    (measured,) = (root / "timing").glob("*.json")
    seconds = json.loads(measured.read_text())["seconds"]
    assert seconds > 0 and (root / "timing" / measured.stem / "result.json").exists()
    for entry in data["plan"]:
        planned = entry["scenario"]["faults"]
        ran = json.loads((root / "trials" / entry["id"] / "scenario.json").read_text())["faults"]
        assert len(ran) == len(planned) and [f.split("@")[0] for f in ran] == [f.split("@")[0] for f in planned]
        assert all(f.endswith("s") and 0 <= float(f.split("@")[1][:-1]) <= seconds for f in ran), ran
    summary = json.loads((root / "summary.json").read_text())
    (row,) = summary["pipelines"].values()
    assert row["covered"] == [] and not any("planned" in k for k in summary["coverage"].get("kill-driver", {}))
    assert "faults at random times" in (root / "report.html").read_text()
    assert left_by(run.pid) == []
