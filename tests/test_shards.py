"""Shards of a campaign's plan and their merge, on fabricated trials (no JVM): the same plan on every shard, shares
that cover it once and balance its cost, the scheduler's indices converted, merge as if one machine had run it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from chaos.campaign.merge import merge
from chaos.campaign.shards import cost, parse_shard, plan_hash, shares
from chaos.campaign.stored import Campaign, CampaignSpec
from chaos.errors import UserError
from chaos.scenario.scenario import Scenario
from chaos.store.atomic import write_json
from tests.campaign_samples import write_trial

SPEC = dict(pipelines=["passthrough-append", "passthrough-idempotent"], expect="exactly-once", trials=4, seed=1,
            events=1000, examples=["kill-driver@2:sink-done"])


def run_share(campaign: Campaign) -> None:
    """Finish every trial of the share as a trial runner and the checker would store it."""
    for entry in campaign.share:
        scenario = Scenario(**entry["scenario"])
        violated = entry["pipeline"] == "passthrough-append" and any(
            f.action == "kill-driver" and f.phase == "sink-done" for f in scenario.faults)
        write_trial(campaign.trial_dir(entry["id"]), scenario, "at-least-once" if violated else "exactly-once",
                    "exactly-once")


def shrink_record(campaign: Campaign, prefix: str, minimal: list[str]) -> None:
    """A shard's shrink of ``prefix``'s row down to ``minimal``, with its one shrink trial."""
    origin = next(e for e in campaign.share if e["id"].startswith(prefix))
    trial_id = f"{prefix}-shrink-00"
    write_trial(campaign.trial_dir(trial_id), Scenario(**{**origin["scenario"], "faults": minimal}),
                "at-least-once", "exactly-once")
    write_json(campaign.root / "shrinks" / f"{prefix}.json", {
        "pipeline": origin["pipeline"], "declared": "exactly-once", "from": origin["id"],
        "from_faults": origin["scenario"]["faults"], "minimal": minimal, "minimal_trial": trial_id,
        "verdict": "at-least-once", "path": [{"trial": trial_id, "faults": minimal, "verdict": "at-least-once",
                                              "violates": True}],
        "command": Scenario(**{**origin["scenario"], "faults": minimal}).command()})


def test_every_shard_holds_the_unsharded_plan_and_the_shares_cover_it_once(tmp_path):
    whole = Campaign.create(tmp_path / "whole", CampaignSpec(**SPEC))
    parts = [Campaign.create(tmp_path / f"s{i}", CampaignSpec(**SPEC), shard=(i, 3)) for i in (1, 2, 3)]
    for part in parts:
        assert part.plan == whole.plan and part.data["windows"] == whole.data["windows"]
        assert part.data["plan_hash"] == whole.data["plan_hash"] == plan_hash(whole.data)
    ids = [e["id"] for part in parts for e in part.share]
    assert sorted(ids) == sorted(e["id"] for e in whole.plan) and len(ids) == len(set(ids))
    loads = [sum(cost(e) for e in part.share) for part in parts]
    assert max(loads) - min(loads) <= max(cost(e) for e in whole.plan)  # no share heavier by more than a trial
    again = Campaign.create(tmp_path / "again", CampaignSpec(**SPEC), shard=(2, 3))
    assert again.data["shard"] == parts[1].data["shard"]  # the same share wherever it is made


def test_shares_balance_by_cost_not_by_count():
    plan = [{"id": f"t{k}", "scenario": {"events": events, "faults": ["kill-driver@1:planned"] * faults}}
            for k, (events, faults) in enumerate([(10_000, 2), (1000, 0), (1000, 0), (1000, 0), (1000, 1)])]
    heavy, light = shares(plan, 2)
    assert heavy == ["t0"] and light == ["t1", "t2", "t3", "t4"]


@pytest.mark.parametrize("text, count, env, expected", [
    ("2/4", None, {}, (2, 4)),
    ("auto", None, {"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "5", "SLURM_ARRAY_TASK_COUNT": "3"}, (3, 3)),
    ("auto", 4, {"JOB_COMPLETION_INDEX": "0"}, (1, 4)),
    (None, None, {}, None),
])
def test_a_shard_is_given_or_taken_from_the_schedulers_environment(text, count, env, expected):
    assert parse_shard(text, count, env) == expected


@pytest.mark.parametrize("text, count, env, says", [
    ("0/3", None, {}, "runs from 1"),
    ("4/3", None, {}, "runs from 1"),
    ("2-3", None, {}, "use I/N"),
    ("auto", None, {}, "no scheduler"),
    ("auto", None, {"JOB_COMPLETION_INDEX": "1"}, "--shards N"),
    ("1/2", 2, {}, "goes with --shard auto"),
])
def test_a_bad_shard_is_one_line(text, count, env, says):
    with pytest.raises(UserError, match=says):
        parse_shard(text, count, env)


def test_merged_shards_are_one_campaign_and_a_missing_shard_is_listed(tmp_path):
    whole = Campaign.create(tmp_path / "whole", CampaignSpec(**SPEC))
    parts = [Campaign.create(tmp_path / f"s{i}", CampaignSpec(**SPEC), shard=(i, 3)) for i in (1, 2, 3)]
    for part in parts:
        run_share(part)
    merged, seen = merge(tmp_path / "all", [p.root for p in parts])
    assert merged.plan == whole.plan and merged.data["plan_hash"] == whole.data["plan_hash"]
    assert "shard" not in merged.data and seen["missing"] == [] and seen["conflicts"] == []
    assert all(merged.finished(e["id"]) for e in merged.plan)
    summary = merged.summarize()
    assert summary["planned"] == summary["finished"] == len(whole.plan) and summary["missing"] == []
    assert summary["pipelines"]["passthrough-append"]["meets"] is False
    assert Campaign.load(merged.root).plan == whole.plan  # analyze, report and replay load it as any campaign

    twice, _ = merge(tmp_path / "twice", [parts[0].root, parts[0].root, parts[1].root, parts[2].root])
    assert twice.summarize()["pipelines"] == summary["pipelines"]  # the same shard twice changes nothing

    partial, seen = merge(tmp_path / "partial", [parts[0].root, parts[2].root])
    assert seen["missing"] == [e["id"] for e in parts[1].share]
    assert partial.summarize()["finished"] == len(whole.plan) - len(parts[1].share)


def test_another_plan_is_refused_naming_what_differs(tmp_path):
    one = Campaign.create(tmp_path / "one", CampaignSpec(**SPEC), shard=(1, 2))
    other = Campaign.create(tmp_path / "other", CampaignSpec(**{**SPEC, "seed": 2}), shard=(2, 2))
    with pytest.raises(UserError, match=r"another plan .* spec\.seed \(1 vs 2\)"):
        merge(tmp_path / "m", [one.root, other.root])
    assert not (tmp_path / "m" / "campaign.json").exists()
    data = json.loads((other.root / "campaign.json").read_text())
    data.update(spec=one.data["spec"], plan=one.data["plan"], harness="0.0.1")
    (other.root / "campaign.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match=r"harness version \(.* vs 0\.0\.1\)"):
        merge(tmp_path / "m", [one.root, other.root])


def test_two_shards_shrinking_one_row_keep_the_smallest_and_list_the_other(tmp_path):
    parts = [Campaign.create(tmp_path / f"s{i}", CampaignSpec(**SPEC), shard=(i, 2)) for i in (1, 2)]
    for part in parts:
        run_share(part)
    prefix = "passthrough-append"
    shrink_record(parts[0], prefix, ["kill-driver@1:sink-done", "kill-driver@2:sink-done"])
    shrink_record(parts[1], prefix, ["kill-driver@0:sink-done"])
    merged, seen = merge(tmp_path / "all", [p.root for p in parts])
    record = json.loads((merged.root / "shrinks" / f"{prefix}.json").read_text())
    assert record["minimal"] == ["kill-driver@0:sink-done"] and record["minimal_trial"] == f"{prefix}-shrink-00"
    (other,) = record["others"]
    assert other["shard"] == 1 and other["minimal_trial"] == f"{prefix}-shrink-s1-00"
    assert merged.finished(f"{prefix}-shrink-00") and merged.finished(f"{prefix}-shrink-s1-00")
    assert seen["shrinks"][prefix] == ["shard 1: kill-driver@1:sink-done kill-driver@2:sink-done"]
    ce = merged.summarize()["pipelines"][prefix]["counterexample"]
    assert ce["minimal"] == ["kill-driver@0:sink-done"]


def test_merge_refuses_a_directory_that_is_not_empty_and_writes_nothing(tmp_path):
    part = Campaign.create(tmp_path / "s1", CampaignSpec(**SPEC), shard=(1, 1))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(UserError, match="not empty"):
        merge(tmp_path / "out", [part.root])
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["keep.txt"]
    shutil.rmtree(tmp_path / "out")
    with pytest.raises(UserError, match="holds no trial"):
        Campaign.create(tmp_path / "s9", CampaignSpec(**SPEC), shard=(9, 9))
    assert not Path(tmp_path / "s9" / "campaign.json").exists()


def test_the_merge_command_lists_a_missing_shard_and_refuses_another_plan_in_one_line(tmp_path):
    """As users see it: ``campaign merge`` of one shard of two lists the missing trials; of shards of two seeds it
    is one line naming the difference, exit 2, nothing written."""
    from tests.conftest import cli

    parts = [Campaign.create(tmp_path / f"s{i}", CampaignSpec(**SPEC), shard=(i, 2)) for i in (1, 2)]
    run_share(parts[0])
    Campaign.create(tmp_path / "other", CampaignSpec(**{**SPEC, "seed": 2}), shard=(1, 2))
    partial = cli("campaign", "merge", "partial", "s1", cwd=tmp_path)
    missing = [e["id"] for e in parts[1].share]
    assert f"missing ({len(missing)}" in partial.stderr and all(m in partial.stderr for m in missing)
    refused = cli("campaign", "merge", "mixed", "s1", "other", cwd=tmp_path)
    assert refused.rc == 2 and "spec.seed (1 vs 2)" in refused.stderr and refused.stderr.count("\n") == 1
    assert not (tmp_path / "mixed" / "campaign.json").exists()
