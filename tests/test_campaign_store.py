"""The campaign directory: creation errors, versioning, summary, report (escaped, offline, in Chromium). No Spark."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.campaign.runner import Progress, Runner
from chaos.campaign.stored import Campaign, CampaignSpec, remove_unfinished
from chaos.errors import UserError
from chaos.scenario.faults import PHASES
from chaos.scenario.scenario import Scenario
from reports.html import write_report
from tests.campaign_samples import HOSTILE, make_campaign, write_trial

REPO = Path(__file__).resolve().parent.parent


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chaos", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)


def test_create_refuses_bad_input_and_writes_nothing(tmp_path):
    with pytest.raises(UserError, match="unknown pipeline"):
        Campaign.create(tmp_path / "a", CampaignSpec(pipelines=["nope"]))
    assert not (tmp_path / "a").exists()
    with pytest.raises(UserError, match="--expect"):
        Campaign.create(tmp_path / "b", CampaignSpec(pipelines=["passthrough-append"], expect="twice"))
    with pytest.raises(UserError, match="at least 1"):
        Campaign.create(tmp_path / "c", CampaignSpec(pipelines=["passthrough-append"], trials=0))
    Campaign.create(tmp_path / "d", CampaignSpec(pipelines=["passthrough-append"]))
    with pytest.raises(UserError, match="campaign resume"):
        Campaign.create(tmp_path / "d", CampaignSpec(pipelines=["passthrough-append"]))


def test_plan_is_stored_round_robin_and_replayable(tmp_path):
    c = Campaign.create(tmp_path / "c", CampaignSpec(pipelines=["passthrough-append", "key-count"], trials=2, seed=3))
    assert [e["pipeline"] for e in c.plan] == ["passthrough-append", "key-count"] * 2
    again = Campaign.load(tmp_path / "c")
    assert again.plan == c.plan and again.spec == c.spec
    assert len({e["scenario"]["seed"] for e in c.plan}) == 4  # a fresh stream per trial


def test_other_version_and_corrupt_files_are_one_line_errors(tmp_path):
    make_campaign(tmp_path / "c")
    data = json.loads((tmp_path / "c" / "campaign.json").read_text())
    data["version"] = 99
    (tmp_path / "c" / "campaign.json").write_text(json.dumps(data))
    for command in (["analyze", "c"], ["report", "c"], ["campaign", "resume", "c"]):
        r = cli(*command, cwd=tmp_path)
        assert r.returncode == 2 and "version 99" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    (tmp_path / "c" / "campaign.json").write_text("{not json")
    r = cli("analyze", "c", cwd=tmp_path)
    assert r.returncode == 2 and "corrupt" in r.stderr and "Traceback" not in r.stderr
    r = cli("campaign", "run", "--pipeline", "passthrough-append", "--faults", "kill,nope", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("error: unknown fault kind")
    r = cli("campaign", "run", "--pipeline", "nope", cwd=tmp_path)
    assert r.returncode == 2 and "unknown pipeline 'nope'" in r.stderr


def test_a_campaign_runs_only_on_the_spark_it_was_created_on(tmp_path):
    """A campaign records its PySpark; resuming it on another would mix two Sparks in one set of verdicts."""
    from chaos.machine.spark_versions import current_version

    c = Campaign.create(tmp_path / "c", CampaignSpec(pipelines=["passthrough-append"], trials=1))
    assert c.spec.spark == current_version() == Campaign.load(tmp_path / "c").spec.spark
    data = json.loads((tmp_path / "c" / "campaign.json").read_text())
    data["spec"]["spark"] = "4.0.9"
    (tmp_path / "c" / "campaign.json").write_text(json.dumps(data))
    r = cli("campaign", "resume", "c", cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "runs on PySpark 4.0.9" in r.stderr and "streamchaos --spark 4.0.9" in r.stderr
    assert not (tmp_path / "c" / "harness").exists(), "nothing was started"
    # A trial stored by a run on that Spark is replayed on it, not here.
    trial = tmp_path / "t"
    write_trial(trial, Scenario(pipeline="passthrough-append", events=100, seed=1), "exactly-once", "at-least-once")
    result = json.loads((trial / "result.json").read_text())
    (trial / "result.json").write_text(json.dumps({**result, "spark": "4.0.9"}))
    r = cli("replay", "t", cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "ran on PySpark 4.0.9" in r.stderr and "streamchaos --spark 4.0.9 replay t" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "t"]


def test_summary_judges_against_the_expectation(tmp_path):
    c = make_campaign(tmp_path / "c", trials=2)
    s = c.summarize()
    assert s["exit_code"] == 1
    assert s["pipelines"]["passthrough-append"]["meets"] is False
    assert s["pipelines"]["passthrough-append"]["counterexample"]["minimal"] == ["kill-driver@0:sink-done"]
    assert s["pipelines"]["passthrough-idempotent"]["meets"] is True
    assert s["coverage"]["kill-driver"]["sink-done"] >= 1


def test_summary_claims_only_what_was_exercised(tmp_path):
    c = make_campaign(tmp_path / "c", trials=3)
    rows = c.summarize()["pipelines"]
    good = rows["passthrough-idempotent"]
    # The plan: the example, then the canonical windows (the report's records mark every fault fired).
    assert good["faulted_trials"] == good["trials"] == 3
    assert "kill-driver:sink-done" in good["covered"] and "kill-driver:after-restart" in good["covered"]
    assert good["not_covered"] == ["kill-driver:reading", "kill-executor:sink-write", "kill-driver:retry"]
    assert good["weak"] is True
    assert len(good["windows"]) == 8 and set(good["windows"]) - set(good["not_covered"]) <= set(good["covered"])
    assert ">5 of 8</span>" in write_report(c.root).read_text() and "weak evidence" in write_report(c.root).read_text()
    # A trial whose faults did not fire counts as a no-fault trial.
    for entry in c.plan:
        if entry["pipeline"] == "passthrough-idempotent":
            path = c.trial_dir(entry["id"]) / "result.json"
            result = json.loads(path.read_text())
            path.write_text(json.dumps({**result, "faults": [{**f, "fired": False} for f in result["faults"]]}))
    good = c.summarize()["pipelines"]["passthrough-idempotent"]
    assert good["faulted_trials"] == 0 and good["covered"] == [] and good["weak"] is True
    assert rows["passthrough-append"]["weak"] is False  # a violation is never weak


class Notes(Progress):
    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)


def test_a_spent_time_budget_says_it_skipped_the_shrink_and_keeps_the_unshrunk_counterexample(tmp_path):
    c = make_campaign(tmp_path / "c", trials=2)
    shutil.rmtree(c.trial_dir("passthrough-append-shrink-00"))
    (c.root / "shrinks" / "passthrough-append.json").unlink()
    data = json.loads((c.root / "campaign.json").read_text())
    data["spec"]["time_budget_s"] = 200.0  # four trials of 61.5 s are over it
    (c.root / "campaign.json").write_text(json.dumps(data))
    c = Campaign.load(c.root)
    # A violation is known: half the budget at most is kept for its shrink.
    assert Runner(c, None).shrink_reserve() == 100.0
    progress = Notes()
    summary = Runner(c, None, progress).run()  # every planned trial is finished: no trial runs
    ce = summary["pipelines"]["passthrough-append"]["counterexample"]
    assert ce["skipped"] and ce["minimal"] == ce["from_faults"] and ce["path"] == []
    assert "streamchaos trial passthrough-append" in ce["command"]
    line = next(n for n in progress.notes if n.startswith("shrink of passthrough-append skipped"))
    assert "time budget" in line and ce["command"] in line
    from chaos.cli import console

    with console.out.capture() as printed:
        console.print_summary(summary)
    assert "counterexample, not shrunk (the time budget was spent" in printed.get()
    assert f"replay: {ce['command']}" in printed.get()
    assert "no violation of exactly-once found in 2 trial(s) (2 with a fired fault)" in printed.get()


def test_unfinished_trials_are_discarded_before_resume(tmp_path):
    c = make_campaign(tmp_path / "c")
    half = c.trial_dir("passthrough-idempotent-001")
    (half / "result.json").unlink()
    (half / "verdict.json").unlink()
    assert remove_unfinished(c) == ["passthrough-idempotent-001"]
    assert not half.exists() and c.finished("passthrough-append-000")


def test_report_escapes_untrusted_text_and_needs_no_network(tmp_path):
    make_campaign(tmp_path / "c", hostile=True)
    html = write_report(tmp_path / "c").read_text()
    assert HOSTILE not in html  # escaped in the page and \\u003c-escaped in the embedded JSON
    assert "&lt;script&gt;" in html or "\\u003cscript>" in html
    for remote in ("http://", "https://", "//cdn"):
        assert remote not in html.replace("http://www.w3.org/2000/svg", "")


def chromium() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)


def render_in_chromium(page: Path, tmp_path: Path) -> tuple[str, Path]:
    """Load ``page`` from disk in headless Chromium with the network off; return the DOM after scripts ran."""
    browser = chromium()
    if browser is None:
        pytest.skip("no chromium (apt-get install chromium; .ci/run installs it)")
    offline = ["--headless", "--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9",
               '--host-resolver-rules=MAP * ~NOTFOUND', f"--user-data-dir={tmp_path / 'profile'}",
               "--virtual-time-budget=5000", "--window-size=1280,1800"]
    shot = tmp_path / "report.png"
    subprocess.run([browser, *offline, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
    dom = subprocess.run([browser, *offline, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    return dom, shot


def assert_rendered(dom: str, shot: Path) -> None:
    assert shot.exists() and shot.stat().st_size > 10_000  # a real picture, not a blank page
    assert 'class="badge v-exactly-once"' in dom and 'class="badge v-at-least-once"' in dom
    assert '<svg' in dom and 'class="timeline"' in dom and 'class="batch"' in dom and 'class="fault-marker"' in dom
    assert 'class="counterexample"' in dom and "streamchaos trial" in dom and 'class="replay"' in dom


def test_report_renders_in_headless_chromium(tmp_path):
    make_campaign(tmp_path / "c", hostile=True)
    dom, shot = render_in_chromium(write_report(tmp_path / "c"), tmp_path)
    assert_rendered(dom, shot)
    assert "<script>alert(" not in dom  # shown as text (&lt;script&gt;...), never an element


def test_report_of_thousands_of_trials_stays_light(tmp_path):
    """3000 trials: the page embeds compact views and draws one timeline at a time."""
    c = make_campaign(tmp_path / "c", trials=2)
    src = c.trial_dir(c.plan[0]["id"])
    data = json.loads((tmp_path / "c" / "campaign.json").read_text())
    for k in range(3000):
        entry = {**data["plan"][0], "id": f"passthrough-append-{k + 100:04d}"}
        data["plan"].append(entry)
        shutil.copytree(src, c.trial_dir(entry["id"]))
    (tmp_path / "c" / "campaign.json").write_text(json.dumps(data))
    page = write_report(tmp_path / "c")
    assert page.stat().st_size < 40 * 2**20
    dom, shot = render_in_chromium(page, tmp_path)
    assert dom.count("<tr data-id=") == 3000 + len(c.plan) + 1
    assert 'class="timeline"' in dom


def test_a_shrink_moves_faults_only_to_phases_the_rows_trials_reported(tmp_path):
    """A job as written declares state-commit (it cannot know before it runs); its trials never report one: the
    shrink's candidates stay at the phases seen."""
    c = make_campaign(tmp_path / "c")
    runner = Runner(c, None)
    seen = runner.phases_seen("passthrough-append", tuple(PHASES))
    assert "state-commit" not in seen and {"planned", "reading", "sink-write", "sink-done", "committed"} <= set(seen)
    assert runner.phases_seen("no-such-row", ("planned", "state-commit")) == ("planned", "state-commit")
