"""A plan of 2 trials run as 2 shards, two `campaign run --shard I/2` commands on the session's cluster, then
`campaign merge`: the merged plan is the unsharded plan (hash, ids, schedules, windows) and every trial has its
verdict; a shard of another seed is refused and a missing shard is listed. Verdicts themselves depend on timing
and are not compared (tests/test_shards.py checks the merge on fabricated trials)."""

from __future__ import annotations

import json

import pytest

from chaos.campaign.stored import Campaign, CampaignSpec
from tests.conftest import cli, left_by

pytestmark = pytest.mark.spark

OPTIONS = ["--pipeline", "passthrough-append", "--trials", "2", "--seed", "3", "--events", "600", "--no-shrink",
           "--max-faults", "1"]


def test_two_shards_merge_into_the_unsharded_plan_with_every_verdict(spark_cluster, tmp_path):
    cluster = ["--cluster", spark_cluster.master_url]
    whole = Campaign.create(tmp_path / "whole", CampaignSpec(pipelines=["passthrough-append"], trials=2, seed=3,
                                                             events=600, shrink=False, max_faults=1,
                                                             cluster=spark_cluster.master_url))
    for i in (1, 2):
        run = cli("campaign", "run", *OPTIONS, *cluster, "--shard", f"{i}/2", "--out", f"s{i}", cwd=tmp_path,
                  timeout=900)
        assert run.rc in (0, 1), run.stderr[-3000:]
        assert f"shard {i}/2" in run.stderr and whole.data["plan_hash"] in run.stderr
        assert left_by(run.pid) == []
    merged = cli("campaign", "merge", "all", "s1", "s2", cwd=tmp_path)
    assert merged.rc in (0, 1), merged.stderr
    data = json.loads((tmp_path / "all" / "campaign.json").read_text())
    assert data["plan_hash"] == whole.data["plan_hash"] and data["plan"] == whole.plan
    assert data["windows"] == whole.data["windows"]
    summary = json.loads((tmp_path / "all" / "summary.json").read_text())
    assert summary["planned"] == summary["finished"] == 2 and summary["missing"] == []
    for entry in whole.plan:
        verdict = json.loads((tmp_path / "all" / "trials" / entry["id"] / "verdict.json").read_text())
        assert verdict["verdict"] in ("exactly-once", "at-least-once"), verdict
    assert (tmp_path / "all" / "report.html").exists()
    analyzed = cli("analyze", "all", cwd=tmp_path)
    assert analyzed.rc == merged.rc and "re-checked 2 trial(s): 2 unchanged" in analyzed.stdout

    partial = cli("campaign", "merge", "partial", "s1", cwd=tmp_path)
    missing = [e["id"] for e in Campaign.load(tmp_path / "s2").share]
    assert f"missing ({len(missing)}" in partial.stderr and all(m in partial.stderr for m in missing)
    other = cli("campaign", "run", *OPTIONS[:4], "--seed", "4", *OPTIONS[6:], *cluster, "--shard", "1/2",
                "--out", "other", "--time-budget", "1s", cwd=tmp_path, timeout=600)
    assert "--time-budget 1s applies to this shard" in other.stderr
    refused = cli("campaign", "merge", "mixed", "s1", "other", cwd=tmp_path)
    assert refused.rc == 2 and "spec.seed (3 vs 4)" in refused.stderr and refused.stderr.count("\n") == 1
