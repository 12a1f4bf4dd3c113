"""Campaign plans and the greedy shrinker: deterministic, coverage-first, Hypothesis' order. No Spark."""

from __future__ import annotations

import json

import pytest

from chaos.campaign.stored import refused_by
from chaos.errors import UserError
from chaos.run.admission import check_cluster_faults, trial_scenario, validate_schedule
from chaos.scenario.faults import PHASES, parse_fault
from chaos.scenario.scenario import Scenario
from pipelines_under_test import CATALOGUE, resolve
from properties.planning import (
    FAULT_KINDS,
    applicable_actions,
    canonical_schedules,
    canonical_windows,
    coverage,
    covered_windows,
    parse_kinds,
    plan_schedules,
    stable_seed,
    window_names,
)
from properties.shrink import shrink_schedule

STANDALONE = refused_by("standalone")
DOCKER = refused_by("docker")
EXTERNAL = refused_by("spark://127.0.0.1:7077")
KILLS = applicable_actions(["kill"], sink_channel=False, database=False, refused=STANDALONE)


def test_kinds_parse_and_reject_unknown():
    assert parse_kinds("kill,channel") == ("kill", "channel")
    assert parse_kinds(None) == ("kill",)
    with pytest.raises(UserError, match="bogus.*kill, pause, channel, checkpoint, db, kafka, node"):
        parse_kinds("kill,bogus")


def test_actions_follow_pipeline_and_cluster():
    assert KILLS == ("kill-driver", "kill-executor", "kill-worker")
    assert applicable_actions(["kill", "db"], sink_channel=False, database=False, refused=EXTERNAL) == (
        "kill-driver", "kill-executor")
    channel = applicable_actions(["channel"], sink_channel=False, database=False, refused=STANDALONE)
    assert channel and all(a.endswith("-source") for a in channel)
    assert applicable_actions(["channel", "kill"], sink_channel=False, database=False, refused=STANDALONE,
                              source_channel=False) == KILLS  # a source of its own: no source channel
    assert "kill-sink-db" in applicable_actions(["db"], sink_channel=True, database=True, refused=STANDALONE)


def test_decommissions_are_planned_where_the_harness_owns_the_workers_or_nodes():
    both = ("decommission-executor", "decommission-worker")
    assert applicable_actions(["decommission"], sink_channel=False, database=False, refused=STANDALONE) == both
    # a node's worker takes the signal through the container's init
    assert applicable_actions(["decommission"], sink_channel=False, database=False, refused=DOCKER) == both
    assert applicable_actions(["decommission"], sink_channel=False, database=False,
                              refused=EXTERNAL) == ("decommission-executor",)  # a cluster of the user's
    plan = plan_schedules(10, both, 6, seed=1, max_faults=2)
    assert {parse_fault(spec).action for schedule in plan for spec in schedule} == set(both)
    scenario = trial_scenario("key-count", fault=["decommission-worker@1:reading"])
    for kind in ("standalone", "docker"):
        check_cluster_faults(scenario, kind)
    with pytest.raises(UserError, match="needs the harness's own workers"):
        check_cluster_faults(scenario, "spark://127.0.0.1:7077")


def test_node_faults_are_planned_on_docker_nodes_only_and_shrink_toward_simpler_kills():
    assert applicable_actions(["node"], sink_channel=False, database=False, refused=EXTERNAL) == ()
    on_nodes = applicable_actions(["kill", "node"], sink_channel=False, database=False, refused=DOCKER)
    assert on_nodes == ("kill-driver", "kill-executor", "kill-node", "pause-node", "slow-node", "oom-node",
                        "partition")
    # a node's worker goes with its node
    assert "kill-worker" not in applicable_actions(["kill"], sink_channel=False, database=False, refused=DOCKER)
    plan = plan_schedules(10, on_nodes, 12, seed=3, max_faults=2)
    assert plan == plan_schedules(10, on_nodes, 12, seed=3, max_faults=2)
    drawn = {parse_fault(spec).action for schedule in plan for spec in schedule}
    assert {"kill-node", "pause-node", "slow-node", "oom-node", "partition"} <= drawn  # coverage first: each
    for spec in (s for schedule in plan for s in schedule):
        fault = parse_fault(spec)
        if fault.action in ("pause-node", "slow-node", "oom-node", "partition"):
            assert fault.duration is not None, spec
    # A node kill that violates shrinks to an executor kill when that violates too.
    assert shrink_schedule(["kill-node@4:sink-write"], lambda f: True, actions=on_nodes, budget=20) == []
    assert shrink_schedule(["kill-node@4:sink-write"], lambda f: bool(f) and "kill" in f[0], actions=on_nodes,
                           budget=30) == ["kill-driver@0:planned"]


def test_plan_is_deterministic_examples_then_canonical_windows_then_coverage_first():
    a = plan_schedules(10, KILLS, 8, seed=7, examples=["kill-driver@3:sink-done"])
    assert a == plan_schedules(10, KILLS, 8, seed=7, examples=["kill-driver@3:sink-done"])
    assert a[0] == ["kill-driver@3:sink-done"] and len(a) == 8
    assert a != plan_schedules(10, KILLS, 8, seed=8, examples=["kill-driver@3:sink-done"])
    for schedule in a:
        for spec in schedule:
            assert parse_fault(spec).batch < 10
    canonical = canonical_schedules(10, KILLS, PHASES, 7)
    assert a[1:1 + len(canonical)] == canonical
    # Then coverage first: every drawn schedule opens an (action, phase) pair no earlier trial did.
    for k in range(1 + len(canonical), len(a)):
        assert coverage([a[k]]) - coverage(a[:k]), (k, a)


def test_four_trials_open_every_canonical_window_and_a_plan_is_a_prefix_of_a_longer_one():
    stateless = tuple(p for p in PHASES if p != "state-commit")
    for seed in range(1, 6):
        plan = plan_schedules(10, KILLS, 4, seed=stable_seed(seed, "passthrough-append"), phases=stateless)
        opened = set().union(*(covered_windows(s) for s in plan))
        assert set(window_names(canonical_windows(KILLS, stateless))) <= opened, plan
        # The third: the driver killed while batch N's tasks read, then after its replay wrote (the retry).
        assert [(f.action, f.phase, f.batch - parse_fault(plan[2][0]).batch) for f in map(parse_fault, plan[2])] == [
            ("kill-driver", "reading", 0), ("kill-driver", "sink-done", 0)]
        # A state store's window shares the fourth trial.
        stateful = plan_schedules(10, KILLS, 4, seed=stable_seed(seed, "passthrough-append"))
        assert set(window_names(canonical_windows(KILLS, PHASES))) <= set().union(
            *(covered_windows(s) for s in stateful)), stateful
        # The first trial kills the driver before the sink writes (Spark's file sink: after its part files, before
        # its log), then at the second batch after that restart after the sink wrote and before commits/N.
        first = [parse_fault(f) for f in plan[0]]
        assert [(f.action, f.phase) for f in first] == [("kill-driver", "sink-write"), ("kill-driver", "sink-done")]
        assert first[1].batch == first[0].batch + 1 and 2 <= first[0].batch and first[1].batch <= 8
        longer = plan_schedules(10, KILLS, 9, seed=stable_seed(seed, "passthrough-append"), phases=stateless)
        assert longer[:4] == plan
    # One fault a trial: one window a trial, the same order.
    single = plan_schedules(10, KILLS, 3, seed=1, max_faults=1)
    assert [[parse_fault(f).phase for f in s] for s in single] == [["sink-write"], ["sink-done"], ["committed"]]


def test_after_restart_window_needs_a_driver_kill_at_the_batch_after_another():
    assert "kill-driver:after-restart" in covered_windows(["kill-driver@3:sink-done", "kill-driver@4:sink-write"])
    assert "kill-driver:after-restart" not in covered_windows(["kill-driver@3:sink-done", "kill-driver@6:planned"])
    assert "kill-driver:after-restart" not in window_names(canonical_windows(KILLS, PHASES, max_faults=1))


def test_retry_window_needs_two_driver_kills_at_one_batch():
    assert "kill-driver:retry" in covered_windows(["kill-driver@3:reading", "kill-driver@3:sink-done"])
    assert "kill-driver:retry" not in covered_windows(["kill-driver@3:reading", "kill-driver@4:sink-done"])
    assert "kill-driver:retry" not in window_names(canonical_windows(KILLS, PHASES, max_faults=1))
    assert "kill-driver:retry" not in window_names(canonical_windows(KILLS, ("planned", "sink-write", "sink-done")))


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_no_planned_fault_at_a_phase_its_pipeline_never_reports(name):
    """The whole catalogue, every fault kind: faults only at phases the pipeline's batches pass through (a
    stateless query never reaches state-commit, a source of its own never reports planned/reading)."""
    pipeline = CATALOGUE[name]
    actions = applicable_actions(FAULT_KINDS, sink_channel=pipeline.sink_channel, database=pipeline.database,
                                 refused=STANDALONE, source_channel=pipeline.source_channel, kafka=pipeline.kafka)
    stateful = pipeline.state or pipeline.state_store
    assert ("state-commit" in pipeline.phases) == bool(stateful)
    assert ("planned" in pipeline.phases) == (not pipeline.own_source or "planned" in pipeline.checkpoint_phases)
    plan = plan_schedules(10, actions, 20, seed=stable_seed(1, name), max_faults=3, phases=pipeline.phases)
    assert len(plan) == 20
    for schedule in plan:
        for spec in schedule:
            fault = parse_fault(spec)
            assert fault.phase in pipeline.phases and fault.action in actions, (name, spec)


@pytest.mark.parametrize("name", [n for n, p in CATALOGUE.items() if p.guarantee != "exactly-once"])
def test_weaker_pipelines_get_their_revealing_windows_in_the_first_trial(name):
    """``campaign run --pipeline P --expect exactly-once --trials 3 --seed S``, S in 1..5: the first planned
    trial kills the driver after the sink wrote, at both sink phases (the Spark test runs it)."""
    pipeline = CATALOGUE[name]
    actions = applicable_actions(["kill"], sink_channel=pipeline.sink_channel, database=pipeline.database,
                                 refused=STANDALONE, source_channel=pipeline.source_channel)
    for seed in range(1, 6):
        plan = plan_schedules(10, actions, 3, seed=stable_seed(seed, name), phases=pipeline.phases)
        sink = {f"kill-driver:{p}" for p in ("sink-done", "sink-write") if p in pipeline.phases}  # Kafka's: done
        assert "kill-driver:sink-done" in sink and sink <= covered_windows(plan[0]), (seed, plan)


def test_campaign_example_of_issue_covers_the_duplicating_kill():
    """``campaign run --pipeline passthrough-append --trials 5 --seed 1``: its plan kills the driver at sink-done."""
    plan = plan_schedules(10, KILLS, 5, seed=stable_seed(1, "passthrough-append"))
    assert ("kill-driver", "sink-done") in coverage(plan)


def test_shrink_finds_minimal_in_hypothesis_order_within_budget():
    tried: list[list[str]] = []

    def violates(faults: list[str]) -> bool:
        tried.append(faults)
        return any(f.startswith("kill-driver@") and f.endswith(":sink-done") for f in faults)

    start = ["kill-executor@2:reading", "kill-driver@7:sink-done"]
    assert shrink_schedule(start, violates, budget=20) == ["kill-driver@0:sink-done"]
    assert tried[0] == ["kill-driver@7:sink-done"]  # dropping a fault comes first
    assert len(tried) == len({tuple(t) for t in tried})  # no candidate twice
    first = list(tried)
    again: list[list[str]] = []
    shrink_schedule(start, lambda f: again.append(f) or violates(f), budget=20)
    assert again == first  # the same path every time: a resumed shrink finds its candidates in the cache
    small: list[list[str]] = []
    shrink_schedule(start, lambda f: small.append(f) or violates(f), budget=2)
    assert len(small) == 2


def test_shrink_simplifies_action_within_its_kind():
    def violates(faults: list[str]) -> bool:
        return any(f.startswith("kill-") for f in faults)

    assert shrink_schedule(["kill-worker@4:committed"], violates, actions=KILLS, budget=30) == [
        "kill-driver@0:planned"]


def test_a_pipelines_phases_follow_what_it_is_unless_it_names_them():
    from pipelines_under_test import Pipeline

    class Mine(Pipeline):
        pass

    assert "state-commit" not in Mine().phases and "planned" in Mine().phases
    stateful = Mine()
    stateful.state_store = True
    assert "state-commit" in stateful.phases
    own = Mine()
    own.own_source = True
    assert own.phases == ("sink-write", "sink-done", "committed")
    named = Mine()
    named.phases = ("sink-done", "committed")
    assert named.phases == ("sink-done", "committed") and Mine().phases != named.phases


def test_a_campaigns_stream_options_reach_every_planned_scenario_and_its_report(tmp_path):
    """``campaign run --late-fraction 0.05`` on an event-time job: each trial's scenario carries it (its stream
    sends late records), the pipeline's own defaults stay where nothing is given, and the report says so."""
    from chaos.campaign.stored import Campaign, CampaignSpec
    from chaos.jobs.reference import job_ref
    from reports.html import write_report
    from tests.conftest import REPO

    view = "view_id STRING, page STRING, ts TIMESTAMP"
    job = job_ref(f"{REPO}/examples/page_views_windowed.py:run", view, "postgres:page_minutes", "minute,page",
                  kafka="stand-in")
    spec = CampaignSpec(pipelines=[job], trials=3, seed=2, events=1000, late_fraction=0.05, keys=7,
                        recovery_timeout=60)
    campaign = Campaign.create(tmp_path / "c", spec)
    for entry in campaign.plan:
        assert entry["scenario"]["late_fraction"] == 0.05 and entry["scenario"]["keys"] == 7
        assert entry["scenario"]["recovery_timeout"] == 60
    default = Campaign.create(tmp_path / "d", CampaignSpec(pipelines=["windowed-count"], trials=1))
    assert default.plan[0]["scenario"]["late_fraction"] == resolve("windowed-count").stream_defaults.get(
        "late_fraction", 0.0)
    assert Campaign.load(campaign.root).spec.late_fraction == 0.05
    (campaign.root / "summary.json").write_text(json.dumps(campaign.summarize()))
    assert "stream keys 7, late-fraction 0.05" in write_report(campaign.root).read_text()


def test_a_job_is_named_by_its_stem_and_function_in_ids_lines_and_the_report(tmp_path, capsys):
    """The full reference (path, schema, sink) stays in the plan's scenarios and the replay command only."""
    from chaos.campaign.stored import Campaign, CampaignSpec
    from chaos.cli.console import print_summary
    from chaos.jobs.reference import job_ref
    from chaos.scenario.names import display_names, short_name
    from reports.html import write_report
    from tests.conftest import REPO

    order = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
    append = job_ref(f"{REPO}/examples/orders_append.py:run", order, "postgres:orders", "", kafka="stand-in")
    upsert = job_ref("examples.orders_upsert:run", order, "postgres:customer_totals", "customer", kafka="stand-in")
    assert short_name(append) == "orders_append:run" and short_name(upsert) == "orders_upsert:run"
    assert short_name("passthrough-append [spark.sql.shuffle.partitions=2]") == \
        "passthrough-append [spark.sql.shuffle.partitions=2]"
    assert short_name(f"{append} [a=1]") == "orders_append:run [a=1]"
    twice = job_ref(f"{REPO}/examples/orders_append.py:run", order, "sqlite:orders", "", kafka="stand-in")
    assert display_names([append, twice]) == {append: append, twice: twice}  # one short name for two: full ones

    campaign = Campaign.create(tmp_path / "c", CampaignSpec(pipelines=[append, upsert], trials=1, events=400))
    ids = [e["id"] for e in campaign.plan]
    assert [i.rsplit("-", 2)[0] for i in ids] == ["orders_append_run", "orders_upsert_run"], ids
    assert all(str(REPO) not in i and "/" not in i for i in ids)
    assert campaign.plan[0]["scenario"]["pipeline"] == append  # the whole reference, for replays
    from chaos.scenario.scenario import Scenario
    from tests.campaign_samples import write_trial

    for entry, verdict in zip(campaign.plan, ("at-least-once", "exactly-once"), strict=True):
        write_trial(campaign.trial_dir(entry["id"]), Scenario(**entry["scenario"]), verdict, "exactly-once")
    summary = campaign.summarize()
    print_summary(summary)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("orders_append:run: at-least-once (VIOLATES exactly-once)"), lines
    assert not any("schema" in line for line in lines)
    (campaign.root / "summary.json").write_text(json.dumps(summary))
    html = write_report(campaign.root).read_text()
    from html import escape

    assert f'<span title="{escape(append)}">orders_append:run</span>' in html


def test_broker_faults_are_planned_beside_the_others_for_a_pipeline_that_reads_kafka():
    """``--faults kill,kafka``: the coverage-first draws rank the broker's actions like the other optional ones
    (a KeyError once stopped every such campaign before its first trial)."""
    fed = CATALOGUE["kafka-real-time"]
    actions = applicable_actions(["kill", "kafka"], sink_channel=True, database=False, refused=STANDALONE,
                                 kafka=True, kafka_fed=fed.kafka_fed)
    assert {"kill-broker", "pause-broker"} <= set(actions)
    assert "add-partitions" not in actions  # real-time mode's topic is fed as batches commit: nothing to re-place
    plan = plan_schedules(6, actions, 30, seed=58, phases=fed.phases)
    assert len(plan) == 30
    assert {f.split("@")[0] for s in plan for f in s} >= {"kill-driver", "kill-broker", "pause-broker"}


def test_a_topic_written_ahead_is_planned_to_grow_by_one_or_two_partitions_at_a_batch():
    """``--faults kafka`` on a pipeline whose topic is written ahead plans add-partitions too, with the count its
    grammar needs (the planned spec is one the scenario admits: a batch and phase, no duration)."""
    ahead = CATALOGUE["kafka-passthrough"]
    actions = applicable_actions(["kafka"], sink_channel=True, database=False, refused=STANDALONE,
                                 kafka=ahead.kafka, kafka_fed=ahead.kafka_fed)
    assert actions == ("kill-broker", "pause-broker", "add-partitions")
    plan = plan_schedules(5, actions, 12, seed=7, phases=ahead.phases)
    grown = [parse_fault(f) for s in plan for f in s if f.startswith("add-partitions")]
    assert grown and {f.count for f in grown} <= {1, 2} and all(not f.timed and f.duration is None for f in grown)
    for schedule in plan:
        faults = [parse_fault(f) for f in schedule]
        validate_schedule(Scenario(pipeline="kafka-passthrough", events=1000, faults=faults), ahead)


def test_a_planned_damage_finds_something_to_damage_and_spares_a_stateless_querys_state():
    """Of the checkpoint damage a campaign drew on the Kafka pipelines, 11 of 20 found nothing to damage (state
    files of a stateless query, commits before batch 0 committed, a retention with one file): planned no more."""
    from chaos.scenario.faults import STATE_DAMAGE, damage_fires

    assert not damage_fires("truncate-commits", 0, "reading") and damage_fires("truncate-commits", 0, "committed")
    assert not damage_fires("retain-commits", 1, "planned") and damage_fires("retain-commits", 1, "committed")
    assert not damage_fires("retain-offsets", 0, "committed") and damage_fires("unrename-offsets", 0, "planned")
    for state in (False, True):
        plan = plan_schedules(6, ("damage-checkpoint",), 40, seed=7, state_first=state)
        damages = [parse_fault(s) for schedule in plan for s in schedule]
        assert damages and all(damage_fires(f.mode, f.batch, f.phase) for f in damages)
        assert any(f.mode in STATE_DAMAGE for f in damages) is state
