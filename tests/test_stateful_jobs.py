"""A job seen to keep state in its code gets the state store's window within a campaign's first three trials."""

from __future__ import annotations

import textwrap

from chaos.campaign.stored import Campaign, CampaignSpec
from chaos.jobs.reference import job_ref
from chaos.jobs.stateful import stateful_operators
from chaos.scenario.faults import PHASES, parse_fault
from pipelines_under_test import CATALOGUE, resolve
from properties.planning import STATE_WINDOW, canonical_windows, covered_windows, plan_schedules, window_names
from tests.conftest import REPO

KILLS = ("kill-driver", "kill-executor", "kill-worker")
ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def module(tmp_path, text: str):
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(text))
    return path


def test_operators_on_the_stream_count_and_those_inside_foreach_batch_do_not(tmp_path):
    path = module(tmp_path, """
        from pyspark.sql import functions as F

        def write(batch, batch_id):
            batch.groupBy("customer").count().write.jdbc("url", "t")   # a static micro-batch: no state
            batch.dropDuplicates(["order_id"]).write.jdbc("url", "u")

        def run(spark):
            orders = spark.readStream.format("kafka").load()
            seen = orders.withWatermark("ts", "1 minute").dropDuplicatesWithinWatermark(["order_id"])
            seen.writeStream.foreachBatch(write).start()
            seen.writeStream.foreachBatch(lambda b, i: b.groupBy("x").count().collect()).start()
    """)
    assert stateful_operators(path) == ["dropDuplicatesWithinWatermark (job.py:10)"]
    path = module(tmp_path, """
        def run(spark):
            orders = spark.readStream.format("kafka").load()
            customers = spark.read.parquet("customers")
            orders.join(customers, "customer").writeStream.format("console").start()
    """)
    assert stateful_operators(path) == []  # a stream-static join keeps no state
    path = module(tmp_path, """
        def run(spark):
            clicks = spark.readStream.format("kafka").load()
            views = spark.readStream.format("kafka").load()
            clicks.join(views, "id").writeStream.format("console").start()
    """)
    assert stateful_operators(path) == ["join (job.py:5)"]
    assert stateful_operators(tmp_path / "missing.py") == [] and stateful_operators(module(tmp_path, "def (")) == []


def test_a_pipeline_known_to_keep_state_opens_its_window_in_the_second_trial():
    for seed in range(1, 6):
        plan = plan_schedules(10, KILLS, 3, seed=seed, state_first=True)
        opened = set().union(*(covered_windows(s) for s in plan))
        assert STATE_WINDOW in opened, plan
        assert [(f.action, f.phase) for f in map(parse_fault, plan[1])] == [("kill-driver", "state-commit"),
                                                                           ("kill-driver", "committed")]
        assert plan[0] == plan_schedules(10, KILLS, 3, seed=seed)[0]  # the first trial is the same
        # Every window is still opened, the executor kill while writing a trial later.
        longer = plan_schedules(10, KILLS, 4, seed=seed, state_first=True)
        assert set(window_names(canonical_windows(KILLS, PHASES))) <= set().union(
            *(covered_windows(s) for s in longer))
    # Without the state store's phase, state_first changes nothing.
    stateless = tuple(p for p in PHASES if p != "state-commit")
    assert plan_schedules(10, KILLS, 3, seed=2, phases=stateless, state_first=True) == \
        plan_schedules(10, KILLS, 3, seed=2, phases=stateless)


def test_a_job_whose_write_tasks_report_their_commit_gets_the_executor_kill_there_in_the_second_trial():
    """Spark's JDBC writer in a foreachBatch (``executor_phases``): the executor kill in a committed write task, a
    third trial's window otherwise, moves to the second; with state known too, both share the second."""
    stateless = tuple(p for p in PHASES if p != "state-commit")
    for seed in range(1, 6):
        plan = plan_schedules(10, KILLS, 3, seed=seed, phases=stateless, task_write_first=True)
        assert ("kill-executor", "sink-write") in [(f.action, f.phase) for f in map(parse_fault, plan[1])], plan
        assert plan[0] == plan_schedules(10, KILLS, 3, seed=seed, phases=stateless)[0]
        both = plan_schedules(10, KILLS, 3, seed=seed, state_first=True, task_write_first=True)
        assert {(f.action, f.phase) for f in map(parse_fault, both[1])} == {("kill-driver", "state-commit"),
                                                                           ("kill-executor", "sink-write")}
    from pipelines_under_test.user_job import UserJob

    jdbc = resolve(job_ref(f"{REPO}/examples/orders_jdbc.py:run", ORDER, "postgres:orders", "", kafka="stand-in"))
    append = resolve(job_ref(f"{REPO}/examples/orders_append.py:run", ORDER, "postgres:orders", "", kafka="stand-in"))
    assert isinstance(jdbc, UserJob) and jdbc.executor_phases == ("sink-write",) and append.executor_phases == ()


def test_a_stateful_job_as_written_gets_the_state_window_in_three_trials(tmp_path):
    upsert = job_ref("examples.orders_upsert:run", ORDER, "postgres:customer_totals", "customer", kafka="stand-in")
    append = job_ref(f"{REPO}/examples/orders_append.py:run", ORDER, "postgres:orders", "", kafka="stand-in")
    assert resolve(upsert).state_known and not resolve(append).state_known
    assert any(n.startswith("its query keeps state (groupBy (orders_upsert.py:") for n in resolve(upsert).notes)
    assert CATALOGUE["key-count"].state_known and not CATALOGUE["passthrough-append"].state_known
    campaign = Campaign.create(tmp_path / "c", CampaignSpec(pipelines=[upsert, append], trials=3, events=400))
    opened = {}
    for entry in campaign.plan:
        opened.setdefault(entry["row"], set()).update(covered_windows(entry["scenario"]["faults"]))
    assert STATE_WINDOW in opened[upsert] and STATE_WINDOW not in opened[append]


class Harness:
    """Stands in for the trial runner only: writes each trial as a finished one (tests.campaign_samples)."""

    def __init__(self) -> None:
        self.ran: list[list[str]] = []

    def trial(self, scenario, run_dir, last=False):
        from tests.campaign_samples import write_trial

        self.ran.append(scenario.specs)
        write_trial(run_dir, scenario, "exactly-once", "exactly-once")


def test_a_state_store_learned_from_the_checkpoints_gets_one_trial_more(tmp_path, monkeypatch):
    from chaos.campaign.runner import Progress, Runner
    from chaos.scenario.scenario import Scenario
    from tests.campaign_samples import write_trial

    class Notes(Progress):
        def __init__(self) -> None:
            self.notes: list[str] = []

        def note(self, text: str) -> None:
            self.notes.append(text)

    hidden = job_ref(f"{REPO}/examples/orders_append.py:run", ORDER, "postgres:orders", "", kafka="stand-in")
    campaign = Campaign.create(tmp_path / "c", CampaignSpec(pipelines=[hidden], trials=3, events=1000,
                                                            shrink=False))
    for entry in campaign.plan:  # its code shows no state; its checkpoints do
        write_trial(campaign.trial_dir(entry["id"]), Scenario(**entry["scenario"]), "exactly-once", "exactly-once")
        state = campaign.trial_dir(entry["id"]) / "checkpoint" / "state" / "0" / "0"
        state.mkdir(parents=True)
        (state / "1.delta").write_bytes(b"x")
    harness, progress = Harness(), Notes()
    monkeypatch.setattr("chaos.campaign.runner.judge", lambda run_dir: None)  # the stand-in wrote its verdict
    summary = Runner(campaign, harness, progress).run()
    assert harness.ran == [["kill-driver@2:state-commit"]]
    assert any("one trial more, kill-driver@2:state-commit" in n for n in progress.notes), progress.notes
    row = summary["pipelines"][hidden]
    assert [t.endswith("-learned-state") for t in row["learned"]] == [True] and STATE_WINDOW in row["covered"]
    assert STATE_WINDOW not in row["not_covered"]
    # Resumed, it runs nothing more; a job whose checkpoints hold no state gets no extra trial.
    Runner(campaign, Harness(), Notes()).run()
    assert len(list((campaign.root / "trials").glob("*-learned-*"))) == 1


def test_helpers_of_a_foreach_batch_function_and_string_joins_are_not_state(tmp_path):
    path = module(tmp_path, """
        import functools
        import os

        def totals(batch):
            return batch.groupBy("customer").count()

        def write(batch, batch_id, table):
            totals(batch).write.jdbc(os.path.join("a", "b"), ",".join([table]))

        def run(spark):
            clicks = spark.readStream.format("kafka").load()
            views = spark.readStream.format("kafka").load()
            clicks.writeStream.foreachBatch(functools.partial(write, table="t")).start()
            return clicks.distinct().writeStream.format("console").start()
    """)
    assert stateful_operators(path) == ["distinct (job.py:15)"]
