"""The event-time, dedup and nondeterministic catalogue pipelines on the real cluster, and
``streamchaos conformance`` reproducing documented rows.

Each pipeline gets a faulted trial whose verdict is its declared guarantee. Where that guarantee is
exactly-once, the faulted trial is also the no-false-alarm check (an exactly-once verdict through
driver kills is stronger evidence than one without faults); pipelines declared weaker get a no-fault
trial as well. The stateful ones keep a consistent cut at every committed batch through driver kills
at ``state-commit`` and ``sink-done``, on each of the three state stores (RocksDB's on checkpoint format v2 too);
chained stateful operators, transformWithState's event-time timers and an outer join (under AvailableNow) stay
exactly-once through the same kills.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import cli, left_by
from tests.test_trials_spark import trial

pytestmark = pytest.mark.spark

SMALL = ["--events", "1000", "--json"]
CUT_FAULTS = ["--fault", "kill-driver@2:state-commit", "--fault", "kill-driver@4:sink-done"]


# The default store in every run; the long tier adds RocksDB with changelog checkpointing (as most production jobs
# run it) and RocksDB on checkpoint format v2: between them every state file the dump reads (.delta, .changelog,
# .zip, by unique id).
@pytest.mark.parametrize("pipeline", ["windowed-count",
                                      pytest.param("windowed-count-changelog", marks=pytest.mark.long),
                                      pytest.param("windowed-count-rocksdb-v2", marks=pytest.mark.long)])
def test_windowed_count_is_exactly_once_with_a_consistent_cut_through_driver_kills(chaos_harness, tmp_path, pipeline):
    # 5% late events: the oracle must drop exactly those the watermark drops (none in batch 0).
    r = trial(chaos_harness, tmp_path, pipeline, "--seed", "3", "--late-fraction", "0.05", *CUT_FAULTS, *SMALL)
    assert [f["fired"] for f in r["faults"]] == [True, True] and r["restarts"] == 2
    assert r["verdict"] == "exactly-once", r
    assert r["multiplicity"]["1"] > 500 and r["multiplicity"][">1"] == 0  # windows the watermark closed
    cut = r["consistent_cut"]
    assert cut["ok"] is True and cut["batches_checked"] == [0, 1, 2, 3, 4], cut
    store = Path(r["run_dir"]) / "checkpoint" / "state" / "0" / "0"
    names = {p.suffix for p in store.iterdir()}
    expected = {"windowed-count": ".delta", "windowed-count-rocksdb": ".zip",
                "windowed-count-changelog": ".changelog"}[pipeline.removesuffix("-v2")]
    assert expected in names, names  # the variant really ran on its state store
    if pipeline.endswith("-v2"):  # the commit log, not the newest file, names batch 2's state (version 3)
        commit = json.loads((Path(r["run_dir"]) / "checkpoint" / "commits" / "2").read_text().splitlines()[-1])
        ids = commit["stateUniqueIds"]["0"]
        versions = [sorted(f.name for f in (store.parent / str(part)).glob(f"3_*{expected}")) for part in (0, 1)]
        assert all(f"3_{ids[part][0]}{expected}" in versions[part] for part in (0, 1)), (ids, versions)
        assert any(len(files) == 2 for files in versions), versions  # the killed attempt's file stays beside it
    # The cut above was read by replaying the change feed where the store keeps one (chaos/driver/statedump.py).
    last_log = Path(r["run_dir"]) / "logs" / f"driver-{r['incarnations'] - 1}.log"
    how = "per batch" if pipeline.startswith("windowed-count-rocksdb") else "replayed"
    assert f"batches dumped ({how})" in last_log.read_text(), last_log.read_text()[-2000:]


def test_dedup_within_watermark_drops_the_resent_copies_exactly_once(chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, "dedup-within-watermark", "--seed", "6",
              "--fault", "kill-driver@2:sink-done", *SMALL)
    assert r["verdict"] == "exactly-once" and r["meets"] is True, r
    assert r["multiplicity"]["0"] > 50  # the re-sent copies (10%) were dropped, as the oracle said
    assert r["redelivered"] == [{"batch": 2, "times": 2, "effective": "once"}]


def test_stream_join_emits_every_pair_once_through_driver_kills(chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, "stream-join", "--seed", "3", "--fault", "kill-driver@2:state-commit", *SMALL)
    assert r["faults"][0]["fired"] and r["restarts"] == 1
    assert r["verdict"] == "exactly-once" and r["unexpected"] == [], r
    assert r["multiplicity"]["1"] + r["multiplicity"][">1"] > 100  # events with partners; more than one is owed


def test_file_sink_through_its_log_is_exactly_once_and_the_raw_directory_shows_the_replay(chaos_harness, tmp_path):
    """One run, two views: the kill lands after batch 2's part files and before _spark_metadata/2."""
    raw = trial(chaos_harness, tmp_path, "passthrough-file-raw", "--seed", "3",
                "--fault", "kill-driver@2:sink-write", *SMALL)
    assert raw["verdict"] == "at-least-once" and raw["anomaly_counts"]["duplicated"] == 200, raw
    assert {d["batch"] for d in raw["duplicated"]} == {2}
    assert {d["fault"] for d in raw["duplicated"]} == {"kill-driver@2:sink-write"}
    run_dir = Path(raw["run_dir"])
    sink = json.loads((run_dir / "verdict.json").read_text())["sink"]
    assert len(sink["not_in_log"]) >= 1 and sink["in_log"] == sink["part_files"] - len(sink["not_in_log"])

    # The same stored directory judged through the log (Spark's rule): exactly-once.
    scenario = json.loads((run_dir / "scenario.json").read_text())
    (run_dir / "scenario.json").write_text(json.dumps({**scenario, "pipeline": "passthrough-file"}))
    logged = cli("check", str(run_dir), "--json", cwd=tmp_path)
    assert logged.rc == 0 and logged.json["verdict"] == "exactly-once", logged.stdout[-2000:]


@pytest.mark.long  # the faulted run's two views: the test above
def test_file_sink_without_faults_is_exactly_once_in_both_views(chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, "passthrough-file-raw", "--seed", "5", *SMALL)
    assert r["verdict"] == "exactly-once", r
    run_dir = Path(r["run_dir"])
    scenario = json.loads((run_dir / "scenario.json").read_text())
    (run_dir / "scenario.json").write_text(json.dumps({**scenario, "pipeline": "passthrough-file"}))
    assert cli("check", str(run_dir), "--json", cwd=tmp_path).json["verdict"] == "exactly-once"


def test_foreach_writer_is_at_least_once_and_clean_without_faults(chaos_harness, tmp_path):
    quiet = trial(chaos_harness, tmp_path, "foreach-writer", "--seed", "3", *SMALL, name="quiet")
    assert quiet["verdict"] == "exactly-once", quiet
    faulted = trial(chaos_harness, tmp_path, "foreach-writer", "--seed", "3",
                    "--fault", "kill-driver@1:sink-done", *SMALL, name="faulted")
    assert faulted["verdict"] == "at-least-once" and faulted["meets"] is True, faulted
    assert {d["batch"] for d in faulted["duplicated"]} == {1}  # the partition(s) of epoch 1 written before the kill


# ttl: the value counter with a TTL'd ValueState; evolve: restarted on code whose state has a field more
@pytest.mark.parametrize("kind", ["ttl", pytest.param("evolve", marks=pytest.mark.long),
                                  pytest.param("list", marks=pytest.mark.long),
                                  pytest.param("map", marks=pytest.mark.long)])
def test_keyed_state_is_exactly_once_with_a_consistent_cut(chaos_harness, tmp_path, kind):
    r = trial(chaos_harness, tmp_path, f"keyed-state-{kind}", "--seed", "3", "--fault", "kill-driver@2:state-commit",
              *SMALL)
    assert r["faults"][0]["fired"] and r["restarts"] == 1
    assert r["verdict"] == "exactly-once" and r["multiplicity"] == {"0": 0, "1": 1000, ">1": 0}, r
    # Every batch with data checked; the TTL's processing-time mode may run a batch without data before the end.
    checked = r["consistent_cut"]["batches_checked"]
    assert r["consistent_cut"]["ok"] is True and checked[:5] == [0, 1, 2, 3, 4] and len(checked) <= 5 + (kind == "ttl")
    if kind == "evolve":  # the restarted code's schema (with ``last``) was taken at the rerun batch 2, beside batch 0's
        schema_dir = Path(r["run_dir"]) / "checkpoint" / "state" / "0" / "_stateSchema" / "default"
        schemas = sorted(schema_dir.glob("[0-9]*"))
        assert [f.name.split("_")[0] for f in schemas] == ["0", "2"], schemas
        assert b'"last"' in schemas[-1].read_bytes() and b'"last"' not in schemas[0].read_bytes()


@pytest.mark.parametrize(("pipeline", "conf"), [("dedup-window-count", []),
                                              pytest.param("keyed-state-timers", [], marks=pytest.mark.long),
                                              pytest.param("stream-join-outer", ["--conf", "trigger=availableNow"],
                                                           marks=pytest.mark.long),
                                              pytest.param("join-window-count", [], marks=pytest.mark.long)])
def test_chained_operators_timers_and_outer_join_are_exactly_once_through_driver_kills(chaos_harness, tmp_path,
                                                                                       pipeline, conf):
    r = trial(chaos_harness, tmp_path, pipeline, "--seed", "5", *conf, *CUT_FAULTS, *SMALL)
    assert [f["fired"] for f in r["faults"]] == [True, True] and r["restarts"] == 2, r["faults"]
    assert r["verdict"] == "exactly-once" and r["unexpected"] == [], r
    # Windows closed, timers fired, pairs and lone rows; a join's windows count only its pairs' events.
    assert r["multiplicity"]["1"] + r["multiplicity"][">1"] > (150 if pipeline == "join-window-count" else 500)
    if conf:  # AvailableNow, restarted into the same checkpoint twice: 200 rows a batch, not the log in batch 0
        assert r["batches"] == 5, r["batches"]
        last_log = Path(r["run_dir"]) / "logs" / f"driver-{r['incarnations'] - 1}.log"
        assert "query started with trigger=availableNow" in last_log.read_text()


@pytest.mark.long
def test_processing_time_timers_and_a_short_ttl_run_on_the_logged_clock_through_a_driver_and_an_executor_kill(
        chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, "keyed-state-expiry", "--seed", "3", "--fault", "kill-driver@2:sink-done",
              "--fault", "kill-executor@3:state-commit", *SMALL)
    assert [f["fired"] for f in r["faults"]] == [True, True] and r["restarts"] == 1, r["faults"]
    # Every event emitted once by a timer, its count where the batch timestamps Spark logged put it.
    assert r["verdict"] == "exactly-once" and r["unexpected"] == [], r
    assert r["multiplicity"] == {"0": 0, "1": 1000, ">1": 0}
    assert r["batches"] >= 7  # five with data, then two without that fire the last timers


def test_nondeterministic_key_without_faults_is_exactly_once(chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, "nondeterministic-key", "--seed", "8", *SMALL)
    assert r["verdict"] == "exactly-once" and r["unexpected"] == [], r


@pytest.mark.long
def test_conformance_reproduces_documented_rows_and_stores_the_table(spark_cluster, tmp_path):
    """With --standby: pre-warmed drivers take over, and the documented verdicts come out all the same."""
    out = tmp_path / "conf"
    run = cli("conformance", "--trials", "1", "--only", "passthrough-append", "--only", "nondeterministic-key",
              "--cluster", spark_cluster.master_url, "--out", str(out), "--standby", cwd=tmp_path, timeout=1500)
    assert run.rc == 0, run.stderr[-2000:]
    assert left_by(run.pid) == []
    starts = [json.loads(line)["detail"] for history in (out / "trials").glob("*/history.jsonl")
              for line in history.read_text().splitlines() if '"kind": "driver"' in line]
    assert any(d.get("standby") for d in starts if d.get("event") == "start"), "no standby took over"
    assert any(d.get("spare") for d in starts if d.get("event") == "start"), "no trial started on a spare"
    table = json.loads((out / "conformance.json").read_text())
    rows = {r["pipeline"]: r for r in table["rows"]}
    assert rows["passthrough-append"]["measured"] == "at-least-once" and rows["passthrough-append"]["agrees"]
    assert "kill-driver@1:sink-done" in rows["passthrough-append"]["example"]
    assert rows["nondeterministic-key"]["measured"] == "incorrect" and rows["nondeterministic-key"]["agrees"]
    assert "counted under" in rows["nondeterministic-key"]["example"]
    assert table["contradictions"] == 0
    assert "agrees" in run.stdout
    html = (out / "report.html").read_text()
    assert 'id="conformance"' in html and "nondeterministic" in html


@pytest.mark.long
def test_socket_source_is_clean_without_faults_and_not_fault_tolerant_with_one(chaos_harness, spark_cluster, tmp_path):
    quiet = trial(chaos_harness, tmp_path, "socket-source", "--seed", "3", *SMALL, name="quiet")
    assert quiet["verdict"] == "exactly-once" and quiet["outcome"] == "drained", quiet
    run = cli("trial", "socket-source", "--cluster", spark_cluster.master_url, "--keep", str(tmp_path / "killed"),
              "--seed", "3", "--fault", "kill-driver@2:sink-done", "--recovery-timeout", "30", *SMALL, cwd=tmp_path)
    assert "Traceback" not in run.stderr and left_by(run.pid) == []
    r = run.json
    assert r["faults"][0]["fired"] and r["restarts"] >= 1
    # What Spark documents: the lines the dead driver had buffered are gone, or the restart fails.
    assert r["verdict"] in ("at-most-once", "none", "stalled"), r
    if r["verdict"] != "stalled":
        assert r["anomaly_counts"]["lost"] > 0


@pytest.mark.long
def test_rescale_stop_and_restart_on_fewer_cores_with_a_code_change_stays_exactly_once(chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, "rescale", "--seed", "3", "--fault", "stop-driver@2:committed/1", *SMALL)
    assert r["faults"][0]["fired"] and r["restarts"] == 1
    assert r["verdict"] == "exactly-once" and r["multiplicity"] == {"0": 0, "1": 1000, ">1": 0}, r
    assert r["consistent_cut"]["ok"] is True and r["consistent_cut"]["batches_checked"] == [0, 1, 2, 3, 4]
    records = [json.loads(line) for line in (Path(r["run_dir"]) / "history.jsonl").read_text().splitlines()]
    exits = [x["detail"] for x in records if x["kind"] == "driver" and x["detail"].get("event") == "exit"]
    assert exits[0]["rc"] == 0 and exits[0]["killed_by"] == "stop-driver@2:committed/1"  # a clean stop
    starts = [x["detail"] for x in records if x["kind"] == "driver" and x["detail"].get("event") == "start"]
    assert starts[1].get("cores_max") == 1


@pytest.mark.long
def test_continuous_map_duplicates_only_the_epoch_printed_before_the_kill(chaos_harness, tmp_path):
    # Epoch 2 ends 18 s after the query starts, its tasks run from 4-7 s: it holds rows.
    faulted = trial(chaos_harness, tmp_path, "continuous-map", "--seed", "3", "--fault", "kill-driver@2:sink-done",
                    *SMALL, name="faulted")
    assert faulted["faults"][0]["fired"] and faulted["restarts"] == 1
    assert faulted["verdict"] == "at-least-once" and faulted["meets"] is True, faulted
    assert faulted["multiplicity"]["0"] == 0  # every id delivered: the other epochs exactly once
    assert {d["batch"] for d in faulted["duplicated"]} == {2}
    assert {d["fault"] for d in faulted["duplicated"]} == {"kill-driver@2:sink-done"}
    printed = {(d["batch_id"], d["incarnation"]) for d in faulted["deliveries"] if d["rows"]}
    assert (2, 0) in printed  # the killed incarnation printed epoch 2 before the kill

