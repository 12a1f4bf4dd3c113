"""Configuration variants (``--conf``): parsing, the campaign plan (every pipeline under every combination, with
the same schedules and seeds), rows and shrink records per variant, the grid in the summary and the report; and the
line the harness told a job inside a batch, read back from the query's error (chaos.scenario.variants). No JVM."""

from __future__ import annotations

import pytest

from chaos.campaign.stored import Campaign, CampaignSpec
from chaos.errors import UserError
from chaos.scenario.scenario import Scenario
from chaos.scenario.variants import grid, label, parse_conf, parse_matrix, raised_for_the_job, trigger_args, variants
from reports.data import campaign_view
from reports.html import render
from tests.campaign_samples import write_trial
from tests.conftest import cli

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKS = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"


def test_matrix_and_trial_conf_parse_or_say_what_is_wrong():
    matrix = parse_matrix([f"{PROVIDER}={HDFS},{ROCKS}", "asyncProgressTrackingEnabled=false,true"])
    combos = variants(matrix)
    assert len(combos) == 4 and combos[0] == {PROVIDER: HDFS, "asyncProgressTrackingEnabled": "false"}
    assert label(combos[3]) == "providerClass=RocksDBStateStoreProvider, asyncProgressTrackingEnabled=true"
    assert variants(None) == [{}]
    assert parse_conf(["trigger=processingTime:3s", "a.b=c=d"]) == {"trigger": "processingTime:3s", "a.b": "c=d"}
    assert trigger_args("processingTime:3s") == {"processingTime": "3000 milliseconds"}
    assert trigger_args("availableNow") == {"availableNow": True}
    for bad, message in [(["novalue"], "use KEY=VALUE"), (["k=a,,b"], "distinct, non-empty"),
                         (["k=a,a"], "distinct"), (["k=a", "k=b"], "given twice"),
                         (["trigger=sometimes"], "processingTime:0")]:
        with pytest.raises(UserError, match=message):
            parse_matrix(bad)


def test_every_pipeline_runs_under_every_variant_with_the_same_schedules_and_seeds(tmp_path):
    spec = CampaignSpec(pipelines=["windowed-count"], trials=2, seed=3,
                        conf=parse_matrix([f"{PROVIDER}={HDFS},{ROCKS}", "asyncProgressTrackingEnabled=false,true"]))
    campaign = Campaign.create(tmp_path / "c", spec)
    assert len(campaign.plan) == 8
    rows = campaign.rows()
    assert list(rows.values()) == ["windowed-count-c0", "windowed-count-c1", "windowed-count-c2", "windowed-count-c3"]
    by_row: dict[str, list[dict]] = {}
    for entry in campaign.plan:
        by_row.setdefault(entry["row"], []).append(entry["scenario"])
    schedules = [[(s["faults"], s["seed"]) for s in scenarios] for scenarios in by_row.values()]
    assert all(s == schedules[0] for s in schedules)  # only the configuration differs between variants
    confs = [scenarios[0]["conf"] for scenarios in by_row.values()]
    assert confs == variants(spec.conf)
    assert "--conf" in Scenario(**campaign.plan[0]["scenario"]).command()
    assert Campaign.load(tmp_path / "c").rows() == rows  # stored and reloaded as planned


def test_the_summary_has_a_row_per_variant_and_the_report_a_grid(tmp_path):
    spec = CampaignSpec(pipelines=["passthrough-append", "passthrough-idempotent"], trials=1, seed=1,
                        expect="exactly-once", conf=parse_matrix(["asyncProgressTrackingEnabled=false,true"]))
    campaign = Campaign.create(tmp_path / "c", spec)
    for entry in campaign.plan:
        scenario = Scenario(**entry["scenario"])
        broken = entry["pipeline"] == "passthrough-append" and scenario.conf["asyncProgressTrackingEnabled"] == "true"
        write_trial(campaign.trial_dir(entry["id"]), scenario, "at-least-once" if broken else "exactly-once",
                    "exactly-once")
    summary = campaign.summarize()
    names = list(summary["pipelines"])
    assert names == ["passthrough-append [asyncProgressTrackingEnabled=false]",
                     "passthrough-append [asyncProgressTrackingEnabled=true]",
                     "passthrough-idempotent [asyncProgressTrackingEnabled=false]",
                     "passthrough-idempotent [asyncProgressTrackingEnabled=true]"]
    row = summary["pipelines"]["passthrough-append [asyncProgressTrackingEnabled=true]"]
    assert row["verdict"] == "at-least-once" and row["meets"] is False and row["pipeline"] == "passthrough-append"
    assert summary["pipelines"]["passthrough-append [asyncProgressTrackingEnabled=false]"]["meets"] is True
    columns, cells = grid(summary)
    assert columns == ["asyncProgressTrackingEnabled=false", "asyncProgressTrackingEnabled=true"]
    assert cells["passthrough-append"]["asyncProgressTrackingEnabled=true"]["verdict"] == "at-least-once"
    html = render(campaign_view(tmp_path / "c"))
    assert '<table id="grid">' in html and "Verdicts by configuration" in html
    assert grid(Campaign.create(tmp_path / "plain", CampaignSpec(pipelines=["passthrough-append"])).summarize()) \
        is None


def test_bad_conf_on_the_command_line_is_one_line(tmp_path):
    for args in (["trial", "passthrough-append", "--conf", "oops"],
                 ["campaign", "run", "--pipeline", "passthrough-append", "--conf", "trigger=never"]):
        run = cli(*args, cwd=tmp_path)
        assert run.rc == 2 and len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr, run.stderr
        assert "--conf" in run.stderr or "trigger" in run.stderr
    assert not (tmp_path / "runs").exists()


def test_a_refused_variant_is_its_own_inconclusive_verdict(tmp_path):
    from chaos.run.judge import judge
    from chaos.store.atomic import write_json
    from properties.verdicts import aggregate, meets, weakest
    from tests.test_evidence import stored_run

    assert weakest(["refused", "refused"]) == "refused" and weakest(["refused", "stalled"]) == "stalled"
    assert weakest(["refused", "exactly-once"]) == "exactly-once" and meets("refused", "exactly-once") is None
    row = aggregate([{"pipeline": "p", "declared": "exactly-once", "verdict": "refused"}])["p"]
    assert row["verdict"] == "refused" and row["meets"] is None and row["refused"] == 1

    run_dir = tmp_path / "run"
    stored_run(run_dir, written_batches=[])
    result = {"pipeline": "passthrough-idempotent", "outcome": "refused", "seconds": 3.0, "offsets": [], "faults": [],
              "deliveries": None, "reason": "IllegalArgumentException: stateful operators are not supported"}
    write_json(run_dir / "result.json", result)
    v = judge(run_dir)
    assert v["verdict"] == "refused" and v["meets"] is None
    assert "stateful operators are not supported" in v["effect"]["note"]


def test_the_plugin_takes_variants_as_a_dict_or_as_on_the_command_line():
    from chaos.pytest_plugin import conf_matrix

    assert conf_matrix({"a": ["1", "2"], "trigger": "availableNow"}) == {"a": ["1", "2"], "trigger": ["availableNow"]}
    assert conf_matrix(["a=1,2"]) == {"a": ["1", "2"]} and conf_matrix(None) is None
    with pytest.raises(pytest.UsageError, match="trigger"):
        conf_matrix({"trigger": "sometimes"})


def test_what_the_harness_told_the_job_inside_a_batch_is_read_back_from_the_querys_error():
    error = ("[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach batch "
             "sink.\n  File \"/job.py\", line 9, in write\nchaos.errors.UserError: the job's kafka-python 2.0.2 "
             "cannot speak to the trial's Kafka 4.1.1\n\nJVM stacktrace: ...")
    assert raised_for_the_job(error) == "the job's kafka-python 2.0.2 cannot speak to the trial's Kafka 4.1.1"
    assert raised_for_the_job("psycopg.errors.UniqueViolation: duplicate key") is None
