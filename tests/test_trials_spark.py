"""Real trials on a real standalone Spark cluster, through the CLI as a user runs it."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import polars as pl
import pytest
import typer

from chaos.cli.commands import app
from chaos.machine.spark import QUICK_JVM_OPTIONS
from chaos.run.admission import trial_scenario
from chaos.run.judge import run_trial, trial_exit_code
from tests.conftest import cli, left_by

pytestmark = pytest.mark.spark

APPEND_KILL = ["--events", "1000", "--seed", "11", "--fault", "kill-driver@3:sink-done", "--json"]


# `streamchaos trial`'s own option parser: the shared-harness trials below take the same arguments.
TRIAL_COMMAND = typer.main.get_command(app).get_command(None, "trial")


def trial(harness, tmp: Path, pipeline: str, *args: str, name: str = "run", code: int = 0) -> dict:
    """``streamchaos trial PIPELINE ARGS --json`` run on the session's shared harness (the plugin's
    ``chaos_harness``: each trial's first driver and first standby were booted during the previous test's
    trial, or recycled from it), as a campaign runs its trials. Its result is what the command prints, and
    it must end as the command's exit ``code`` would (0: drained, the pipeline's guarantee met, a consistent
    cut; 1: a violation; 3: inconclusive)."""
    params = TRIAL_COMMAND.make_context("trial", [pipeline, *args]).params
    asked = {k: params[k] for k in ("cluster", "workers", "toxiproxy", "standby", "keep")}
    shared = {"cluster": harness.cluster_spec, "workers": harness.workers, "toxiproxy": harness.toxiproxy,
              "standby": harness.standby, "keep": None}
    assert asked == shared, f"options of another harness than the shared one need cli_trial: {asked}"
    wanted = inspect.signature(trial_scenario).parameters
    options = {k: list(v) if isinstance(v, tuple) else v for k, v in params.items() if k in wanted}
    result = run_trial(harness, trial_scenario(**options), tmp / name, last=False, expect=params.get("expect"))
    result = json.loads(json.dumps(result, default=str))
    assert trial_exit_code(result) == code, result
    return result


def cli_trial(cluster, tmp: Path, pipeline: str, *args: str, name: str = "run") -> dict:
    """The same through the CLI in its own process (its own harness) on the session's cluster."""
    run = cli("trial", pipeline, "--cluster", cluster.master_url, "--keep", str(tmp / name), *args, cwd=tmp)
    assert run.rc == 0, run.stderr[-2000:]
    assert left_by(run.pid) == [], "the trial left processes behind"
    return run.json


def history(result: dict) -> list[dict]:
    return [json.loads(line) for line in (Path(result["run_dir"]) / "history.jsonl").read_text().splitlines()]


def ids_of_batch(result: dict, batch: int) -> set[int]:
    """The event ids batch N covers, from its offsets in the checkpoint's write-ahead log."""
    entry = next(b for b in result["offsets"] if b["batch"] == batch)
    events = pl.read_parquet(Path(result["run_dir"]) / "events.parquet")
    ids: set[int] = set()
    for part, end in entry["end"].items():
        start = entry["start"][part]
        chunk = events.filter((pl.col("partition") == int(part)) & pl.col("offset").is_between(start, end - 1))
        ids |= set(chunk["id"].to_list())
    return ids


@pytest.fixture(scope="module")
def append_kill(spark_cluster, tmp_path_factory):
    return cli_trial(spark_cluster, tmp_path_factory.mktemp("append"), "passthrough-append", *APPEND_KILL,
                     "--no-standby")


def test_append_sink_duplicates_exactly_the_replayed_batch(append_kill):
    r = append_kill
    assert r["events"] == 1000 and r["outcome"] == "drained" and r["batches"] == 5
    [fault] = r["faults"]
    assert fault["spec"] == "kill-driver@3:sink-done" and fault["fired"]
    assert (fault["batch"], fault["phase"]) == (3, "sink-done") and fault["t"] > 0
    assert r["restarts"] == 1 and r["incarnations"] == 2
    assert r["multiplicity"] == {"0": 0, "1": 800, ">1": 200}
    run_dir = Path(r["run_dir"])
    from chaos.stream.sinks.sqlite import read_output

    counts = read_output(run_dir / "sink" / "sink.sqlite").group_by("id").len()
    twice = set(counts.filter(pl.col("len") == 2)["id"].to_list())
    assert twice == ids_of_batch(r, 3)
    assert counts["len"].max() == 2
    # the checker's verdict, with attribution to the batch and the fault
    assert r["verdict"] == "at-least-once" and r["meets"] is True
    assert r["anomaly_counts"] == {"lost": 0, "duplicated": 200, "unexpected": 0}
    assert {(a["batch"], a["fault"]) for a in r["duplicated"]} == {(3, "kill-driver@3:sink-done")}
    assert r["redelivered"] == [{"batch": 3, "times": 2, "effective": "more than once"}]


def test_the_replay_reruns_the_same_batch_id_with_the_same_offsets(append_kill):
    planned = [h for h in history(append_kill) if h["kind"] == "phase" and h["phase"] == "planned"]
    batch3 = [h for h in planned if h["batch"] == 3]
    assert [h["detail"]["incarnation"] for h in batch3] == [0, 1]
    assert batch3[0]["detail"]["end"] == batch3[1]["detail"]["end"]
    assert batch3[0]["detail"]["start"] == batch3[1]["detail"]["start"]
    kinds = [h["kind"] for h in history(append_kill)]
    assert kinds.count("restart") == 1


def test_cold_restart_replays_what_the_standby_replayed(append_kill, spark_cluster, tmp_path):
    """The same scenario, once restarted cold (--no-standby) and once with the standby driver taking over (the
    default): the same offsets per batch, the same fault placement, the same replayed batch, the same verdict."""
    again = cli_trial(spark_cluster, tmp_path, "passthrough-append", *APPEND_KILL)
    assert any(r["detail"].get("standby") for r in history(again) if r["kind"] == "driver")
    assert not any(r["detail"].get("standby") for r in history(append_kill) if r["kind"] == "driver")
    # How each incarnation started, and why a cold one was cold, in --json.
    # (driver 0 was booted as a spare beside the harness's start, while the cluster came up)
    assert [d["driver_start"] for d in again["drivers"]] == ["spare", "standby"]
    assert [(d["driver_start"], d["why"]) for d in append_kill["drivers"]] == \
        [("cold", "pre-warmed drivers are off (--no-standby)")] * 2
    # The standby was ready (an executor and its Python workers) before the kill, which waited for it.
    standby_log = (Path(again["run_dir"]) / "logs" / "driver-1.log").read_text()
    assert "standby incarnation 1 booted, warm" in standby_log
    # Every driver got the quick-start flags and the class archives the harness built for drivers and executors.
    config = json.loads((Path(again["run_dir"]) / "driver.json").read_text())
    assert config["java_options"] == QUICK_JVM_OPTIONS
    assert config["class_archive"] and Path(config["class_archive"]).is_file()
    assert config["executor_archive"] and Path(config["executor_archive"]).is_file()
    # Their executors' Python daemons imported the installed pyspark, not pyspark.zip (chaos/driver/pydaemon.py).
    apps = {r["detail"]["app_id"] for r in history(again) if r["kind"] == "driver" and r["detail"].get("app_id")}
    logs = [log.read_text() for app in apps for log in spark_cluster.workdir.glob(f"worker-*/{app}/*/stderr")]
    daemons = [line for text in logs for line in text.splitlines() if "streamchaos: python daemon" in line]
    assert daemons and all(".zip" not in line for line in daemons)
    # Janino's unsigned copies come first on the executors' class path (chaos/machine/jvm/unsigned.py), so the
    # executors' archive holds its classes.
    assert "janino" in config["class_path"]
    commands = [text.splitlines()[0] for text in logs if text.startswith("Spark Executor Command:")]
    assert commands and all(f'"-cp" "{config["class_path"]}:' in line for line in commands)
    # The JVMs' temporary files (a killed driver's blockmgr-*, lz4's library) went to the harness's folder,
    # removed at its close, and the executors' local directories to the cluster's own
    # (chaos.machine.spark.scratch_option).
    assert all(f"-Djava.io.tmpdir={config['tmp_dir']}/driver-" in line for line in commands)
    assert not Path(config["tmp_dir"]).exists()
    assert any(spark_cluster.tmp.glob("spark-*"))
    # One driver kill, one standby: none is booted once no driver kill is ahead.
    booted = [r for r in history(again) if r["kind"] == "driver" and r["detail"].get("event") == "standby"]
    assert len(booted) == 1

    def ranges(r):
        return [(b["batch"], b["start"], b["end"]) for b in r["offsets"]]

    def placement(r):
        return [(f["spec"], f["batch"], f["phase"], f["fired"]) for f in r["faults"]]

    def fault_context(r):
        """What the sink had seen when the fault fired: the phases before it, in order."""
        h = history(r)
        at = next(i for i, x in enumerate(h) if x["kind"] == "fault")
        return [(x["batch"], x["phase"]) for x in h[:at] if x["kind"] == "phase" and x["phase"] != "reading"]

    assert ranges(again) == ranges(append_kill)
    assert placement(again) == placement(append_kill)
    assert fault_context(again) == fault_context(append_kill)
    assert again["multiplicity"] == append_kill["multiplicity"]
    assert again["verdict"] == append_kill["verdict"]


@pytest.mark.long  # the standby itself: test_cold_restart_replays_what_the_standby_replayed
def test_a_second_driver_kill_finds_its_standby_booted_in_the_first_kills_downtime(chaos_harness, tmp_path):
    """An idempotent sink under two driver kills: batches 1 and 3 delivered twice, each effective once; the second
    kill's standby was booted in the first kill's downtime."""
    r = trial(chaos_harness, tmp_path, "passthrough-idempotent", "--events", "1000", "--standby",
              "--fault", "kill-driver@1:sink-done", "--fault", "kill-driver@3:sink-done", "--json")
    assert [f["fired"] for f in r["faults"]] == [True, True] and r["restarts"] == 2
    assert r["verdict"] == "exactly-once" and r["meets"] is True
    assert r["multiplicity"] == {"0": 0, "1": 1000, ">1": 0}
    delivered = pl.DataFrame(r["deliveries"]).group_by("batch_id").len()
    assert sorted(delivered.filter(pl.col("len") > 1)["batch_id"].to_list()) == [1, 3]
    assert r["redelivered"] == [{"batch": 1, "times": 2, "effective": "once"},
                                {"batch": 3, "times": 2, "effective": "once"}]
    drivers = [x["detail"] for x in history(r) if x["kind"] == "driver"]

    def at(event: str, incarnation: int) -> int:
        return next(i for i, d in enumerate(drivers) if d["event"] == event and d["incarnation"] == incarnation)

    assert at("exit", 0) < at("standby", 2) < at("start", 1)  # in the downtime, before the first takeover
    assert [d.get("standby") for d in drivers if d["event"] == "start"] == [None, True, True]
    assert [d["rc"] for d in drivers if d["event"] == "exit" and d.get("killed_by")] == [-9, -9]
    log = (Path(r["run_dir"]) / "logs" / "driver-2.log").read_text()
    assert "standby incarnation 2" in log and "trial over" in log  # it took over and ran to the trial's end


def test_killed_executor_is_replaced_without_a_driver_restart(chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, "passthrough-idempotent", "--events", "1000",
              "--fault", "kill-executor@2:reading", "--json")
    [fault] = r["faults"]
    assert fault["fired"] and fault["phase"] == "reading" and fault["batch"] == 2
    assert r["restarts"] == 0 and r["outcome"] == "drained"
    assert r["multiplicity"] == {"0": 0, "1": 1000, ">1": 0}
    killed = fault["detail"]["executor_id"]
    h = history(r)
    at = next(i for i, x in enumerate(h) if x["kind"] == "fault")
    before = {x["detail"].get("executor") for x in h[:at] if x["phase"] == "reading"}
    # Batch 2's other task may have started on the killed executor before the kill and report just after it.
    after = {x["detail"].get("executor") for x in h[at:] if x["phase"] == "reading" and x["batch"] > 2}
    assert killed in before and killed not in after
    assert after - before, "a new executor took over the reading"


@pytest.mark.long
@pytest.mark.parametrize("spec", ["pause-driver@2:planned/5s", "damage-checkpoint@4:committed/truncate-offsets"])
def test_pause_and_checkpoint_damage_end_in_a_recorded_outcome(spark_cluster, tmp_path, spec):
    run = cli("trial", "passthrough-idempotent", "--cluster", spark_cluster.master_url, "--events", "1200",
              "--keep", str(tmp_path / "run"), "--fault", spec, "--recovery-timeout", "120", "--json", cwd=tmp_path)
    assert run.rc in (0, 3), run.stderr[-2000:]
    r = run.json
    assert json.loads((tmp_path / "run" / "result.json").read_text())["outcome"] == r["outcome"]
    assert r["outcome"] in ("drained", "stalled", "failed")
    assert r["faults"][0]["fired"], r["faults"]
    assert left_by(run.pid) == []
    if spec.startswith("pause"):
        heals = [x for x in history(r) if x["kind"] == "heal"]
        assert [x["detail"]["spec"] for x in heals] == [spec]
        assert r["outcome"] == "drained" and r["multiplicity"]["1"] == 1200
    else:
        assert r["faults"][0]["detail"]["file"].startswith("offsets/")


@pytest.mark.long
def test_local_cluster_mode_runs_with_real_executor_processes(tmp_path):
    run = cli("trial", "passthrough-idempotent", "--cluster", "local-cluster[2,1,1024]", "--events", "1000",
              "--fault", "kill-executor@2:reading", "--keep", str(tmp_path / "run"), "--json", cwd=tmp_path)
    assert run.rc == 0, run.stderr[-2000:]
    r = run.json
    assert r["cluster"]["kind"] == "local-cluster"
    assert r["faults"][0]["fired"] and r["faults"][0]["detail"]["executor_id"]
    assert r["verdict"] == "exactly-once" and r["multiplicity"]["1"] == 1000 and r["restarts"] == 0
    assert left_by(run.pid) == []


ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def test_a_configuration_variant_reaches_the_pipelines_query(chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, "key-count", "--events", "600", "--seed", "3", "--json",
              "--conf", f"spark.sql.streaming.stateStore.providerClass={ROCKSDB}", "--conf", "trigger=processingTime:0",
              "--fault", "kill-driver@1:sink-done")
    run_dir = Path(r["run_dir"])
    assert r["verdict"] == "exactly-once" and r["faults"][0]["fired"]
    assert json.loads((run_dir / "scenario.json").read_text())["conf"]["trigger"] == "processingTime:0"
    assert list((run_dir / "checkpoint" / "state").rglob("*.zip")), "RocksDB writes N.zip state files"
    logs = " ".join(p.read_text(errors="replace") for p in (run_dir / "logs").glob("driver-*.log"))
    assert logs.count("query started with providerClass=RocksDBStateStoreProvider, trigger=processingTime:0") == 2


def test_a_variant_spark_refuses_is_refused_with_its_message(chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, "passthrough-idempotent", "--events", "600",
              "--conf", "asyncProgressTrackingEnabled=true", "--json", code=3)
    assert r["outcome"] == "refused" and r["verdict"] == "refused" and r["meets"] is None
    assert "does not support async progress tracking" in r["reason"]
    assert r["restarts"] == 0


def test_spark_refuses_a_checkpoint_without_its_metadata_file(chaos_harness, tmp_path):
    """Since SPARK-55058 (4.2) Spark will not restart a query whose checkpoint lost its ``metadata`` file (and
    with it the query id a (query id, batch id) sink deduplicates by): the verdict is ``refused``, with
    Spark's message, at the first restart. tests/test_spark_versions_spark.py runs the same on 4.1."""
    r = trial(chaos_harness, tmp_path, "query-batch-dedup", "--events", "1000", "--seed", "5",
              "--fault", "damage-checkpoint@2:committed/delete-metadata",
              "--fault", "kill-driver@3:sink-done", "--recovery-timeout", "60", "--json", code=3)
    assert [f["fired"] for f in r["faults"]] == [True, True] and r["faults"][0]["detail"]["file"] == "metadata"
    assert r["outcome"] == "refused" and "STREAMING_CHECKPOINT_MISSING_METADATA_FILE" in r["reason"], r["reason"]
    assert r["verdict"] == "refused" and r["restarts"] == 1
