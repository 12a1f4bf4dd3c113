"""Jobs of the seeded-bug corpus (benchmarks/corpus/) on the shared harness: the sink windows of a row-level
foreach writer, columns no two runs share, writes handed to threads, and a fault fired at a time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.clusters.postgres import credentials, find_bindir
from tests.conftest import REPO
from tests.test_trials_spark import trial

pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(find_bindir() is None, reason="no PostgreSQL server binaries on this machine")]

TRUTHS = json.loads((REPO / "benchmarks" / "corpus" / "truths.json").read_text())


def corpus(harness, tmp: Path, name: str, *args: str) -> dict:
    job = TRUTHS["jobs"][name]
    key = ["--key", job["key"]] if job["key"] else []
    return trial(harness, tmp, f"{REPO}/benchmarks/corpus/{name}.py:run", "--schema", TRUTHS["schema"],
                 "--sink", job["sink"], *key, "--events", "1000", "--json", *args, name=name)


def test_a_foreach_writer_that_ignores_the_epoch_id_duplicates_the_batch_killed_after_it_closed(chaos_harness,
                                                                                                tmp_path):
    r = corpus(chaos_harness, tmp_path, "foreach_writer", "--fault", "kill-driver@3:sink-done",
               "--expect", "at-least-once")
    assert [f["fired"] for f in r["faults"]] == [True], r["faults"]  # reported by the executors, at close
    # The kill lands as the first partition closes: the partitions that had closed are written twice.
    assert r["verdict"] == "at-least-once" and 0 < r["anomaly_counts"]["duplicated"] <= 200
    assert {b for d in r["duplicated"] for b in d["batches"]} == {3}
    phases = [json.loads(line) for line in (Path(r["run_dir"]) / "history.jsonl").read_text().splitlines()]
    writes = [p for p in phases if p["kind"] == "phase" and p["phase"] == "sink-write" and p["batch"] == 0]
    assert writes and all(p["detail"].get("partition") is not None for p in writes)
    # The job sent DATABASE_URL, password and all, to its executors: no file of the run holds the password.
    secret = credentials().encode()
    assert not [p for p in Path(r["run_dir"]).rglob("*") if p.is_file() and secret in p.read_bytes()]


def test_stamped_columns_are_left_out_and_a_uuid_key_still_shows_its_duplicates(chaos_harness, tmp_path):
    twin = corpus(chaos_harness, tmp_path, "ingested_at", "--fault", "kill-driver@3:sink-done")
    assert twin["verdict"] == "exactly-once" and twin["keys"]["exact"] == 1000
    verdict = json.loads((Path(twin["run_dir"]) / "verdict.json").read_text())
    assert verdict["left_out"] == ["ingested_at"]
    bug = corpus(chaos_harness, tmp_path, "uuid_key", "--fault", "kill-driver@3:sink-done", "--expect",
                 "at-least-once")
    assert bug["verdict"] == "at-least-once" and bug["anomaly_counts"]["duplicated"] == 200
    assert json.loads((Path(bug["run_dir"]) / "verdict.json").read_text())["left_out"] == ["row_key"]


def test_a_write_handed_to_a_thread_is_in_the_answer_and_lost_with_its_driver(chaos_harness, tmp_path):
    r = corpus(chaos_harness, tmp_path, "background_write", "--fault", "kill-driver@3:committed",
               "--expect", "at-most-once")
    assert r["verdict"] == "at-most-once" and r["anomaly_counts"]["lost"] >= 200 and r["keys"]["under"] >= 200


def test_a_fault_at_a_time_fires_where_the_stream_is_and_the_answer_is_still_written(chaos_harness, tmp_path):
    r = corpus(chaos_harness, tmp_path, "append_insert", "--fault", "kill-driver@1.2s", "--expect",
               "at-least-once")
    (fault,) = r["faults"]
    assert fault["spec"] == "kill-driver@1.2s" and fault["fired"] and fault["detail"]["timed"] is True
    assert fault["batch"] is None or fault["batch"] >= 0
    assert (Path(r["run_dir"]) / "oracle" / "meta.json").exists()


@pytest.mark.long
def test_a_job_that_names_a_fresh_checkpoint_per_run_starts_over_after_a_restart(chaos_harness, tmp_path):
    """available_now_rerun checkpoints to a new temporary directory at each start: killed after commits/3, its next
    run reads the topic from the beginning, and batches 0-3 are written twice (run on one stable checkpoint, the
    harness would have resumed it and called it exactly-once)."""
    r = corpus(chaos_harness, tmp_path, "available_now_rerun", "--fault", "kill-driver@3:committed",
               "--expect", "at-least-once")
    assert r["verdict"] == "at-least-once" and r["anomaly_counts"]["duplicated"] == 800, r["anomaly_counts"]
    named = r["named_checkpoints"]
    assert named["per_start"] and named["started_over"] == 1 and len(set(named["starts"])) == 2
    assert (Path(r["run_dir"]) / "checkpoint.run-1" / "commits" / "3").exists()
