"""A query reading another query's table (bronze to silver): its offsets counted in the stream's events, its
naming on the command line. Files laid out as Spark and Delta write them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.errors import UserError
from chaos.jobs.chains import Chain
from chaos.jobs.reference import JobSpec
from chaos.store.chained import describe
from chaos.store.checkpoint import read_offsets_file

META = '{"batchWatermarkMs":0,"batchTimestampMs":1}'


def offsets(checkpoint: Path, batch: int, source: dict) -> Path:
    path = checkpoint / "offsets" / str(batch)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"v1\n{META}\n{json.dumps(source)}")
    return path


def upstream(tmp_path: Path) -> Path:
    """The first query's checkpoint: its batches 0 and 1 read 10 and then 25 events of the stream."""
    checkpoint = tmp_path / "checkpoint-upstream"
    offsets(checkpoint, 0, {"0": 6, "1": 4})
    offsets(checkpoint, 1, {"0": 15, "1": 10})
    return checkpoint


def delta_table(tmp_path: Path) -> Path:
    """Version 0 made by CREATE TABLE, versions 1 and 2 the first query's batches 0 and 1 (their txn)."""
    log = tmp_path / "bronze" / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020}.json").write_text('{"commitInfo":{"operation":"CREATE TABLE"}}\n')
    for version, batch in ((1, 0), (2, 1)):
        (log / f"{version:020}.json").write_text(
            f'{{"txn":{{"appId":"q","version":{batch}}}}}\n{{"commitInfo":{{"operation":"STREAMING UPDATE"}}}}\n')
    return log.parent


@pytest.mark.parametrize(("version", "index", "starting", "ends"), [
    (1, -1, False, {}),  # only the empty version 0 read
    (2, -1, False, {"0": 6, "1": 4}),  # versions 0 and 1: batch 0's events
    (3, -1, False, {"0": 15, "1": 10}),
    (2, 3, False, {"0": 6, "1": 4}),  # version 2 read in part: batch 1 not yet
    (2, 2**63 - 1 - 100, False, {"0": 15, "1": 10}),  # version 2 read past its last file
    (2, 3, True, {}),  # a starting snapshot read in part
])
def test_a_delta_source_offset_counts_the_events_of_the_batches_it_read_in_full(tmp_path, version, index, starting,
                                                                                 ends):
    checkpoint = tmp_path / "checkpoint"
    describe(str(checkpoint), str(upstream(tmp_path)), str(delta_table(tmp_path)), "delta")
    entry = offsets(checkpoint, 4, {"sourceVersion": 1, "reservoirId": "r", "reservoirVersion": version,
                                    "index": index, "isStartingVersion": starting})
    assert read_offsets_file(str(entry)) == [ends]


def file_log(folder: Path, batch: int, entries: list[dict], suffix: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{batch}{suffix}").write_text("v1\n" + "\n".join(json.dumps(e) for e in entries))


def test_a_file_source_offset_counts_the_batches_whose_files_it_took(tmp_path):
    table = tmp_path / "files-upstream"
    meta = table / "_spark_metadata"
    file_log(meta, 0, [{"path": f"file://{table}/part-0.json", "action": "add"}])
    file_log(meta, 1, [{"path": f"file://{table}/part-1.json", "action": "add"},
                       {"path": f"file://{table}/part-2.json", "action": "add"}])
    checkpoint = tmp_path / "checkpoint"
    describe(str(checkpoint), str(upstream(tmp_path)), str(table), "files")
    sources = checkpoint / "sources" / "0"
    file_log(sources, 0, [{"path": f"file:///{table}/part-0.json", "timestamp": 1, "batchId": 0}])
    file_log(sources, 1, [{"path": f"file:{table}/part-1.json", "timestamp": 1, "batchId": 1}])
    assert read_offsets_file(str(offsets(checkpoint, 0, {"logOffset": 0}))) == [{"0": 6, "1": 4}]
    # Batch 1's second file not taken yet: batch 1 is not read in full.
    assert read_offsets_file(str(offsets(checkpoint, 1, {"logOffset": 1}))) == [{"0": 6, "1": 4}]
    # Compacted, as Spark does every ten entries: the compacted file's entries keep their batch ids.
    file_log(sources, 2, [{"path": f"file://{table}/part-{k}.json", "timestamp": 1, "batchId": b}
                          for k, b in ((0, 0), (1, 1), (2, 2))], ".compact")
    assert read_offsets_file(str(offsets(checkpoint, 2, {"logOffset": 2}))) == [{"0": 15, "1": 10}]


def test_without_a_chain_a_file_sources_offset_reads_as_before(tmp_path):
    entry = offsets(tmp_path / "checkpoint", 0, {"logOffset": 3})
    assert read_offsets_file(str(entry)) == [{"logOffset": 3}]


def test_the_sink_names_the_table_between_the_queries_then_the_sink_under_test():
    spec = JobSpec("job.py:run", sink="delta:/lake/bronze,delta:/lake/silver").validate()
    assert (spec.upstream, spec.sink_kind, spec.table) == (("delta", "/lake/bronze"), "delta", "/lake/silver")
    spec = JobSpec("job.py:run", sink="parquet:/lake/bronze, postgres:orders").validate()
    assert (spec.upstream, spec.sink_kind, spec.table) == (("parquet", "/lake/bronze"), "postgres", "orders")
    assert JobSpec("job.py:run", sink="delta:/lake/silver").upstream is None
    for bad in ("postgres:raw,delta:/lake/silver", "delta,delta:/lake/silver", "delta:/a,delta:/b,delta:/c"):
        with pytest.raises(UserError, match="delta:PATH,SINK or parquet:PATH,SINK"):
            JobSpec("job.py:run", sink=bad).validate()
    with pytest.raises(UserError, match="are the same"):
        JobSpec("job.py:run", sink="delta:/lake/silver/,delta:/lake/silver").validate()


def test_a_chains_table_is_read_by_the_jobs_path_in_any_spelling(tmp_path, monkeypatch):
    monkeypatch.delenv("STREAMCHAOS_DELTA_ROOT", raising=False)
    chain = Chain("parquet", "/lake/bronze/orders/", str(tmp_path / "checkpoint"), tmp_path / "sink" / "files")
    assert chain.table == str(tmp_path / "sink" / "files-upstream") and Path(chain.table).is_dir()
    assert not chain.reads("delta", "/lake/bronze/orders") and not chain.reads("json", "/lake/silver")
    assert not chain.read
    assert chain.reads("json", "file:/lake/bronze/orders") and chain.reads("parquet", "/lake/bronze//orders")
    assert chain.read
    assert chain.feeds("json", True, "/lake/bronze/orders") and not chain.feeds("delta", False, "/lake/bronze/orders")
    assert chain.checkpoint == str(tmp_path / "checkpoint-upstream")
    assert chain.source_options({"controller": "h:1", "checkpoint": "c", "eventlog": "u"}) == {
        "checkpoint": chain.checkpoint, "eventlog": "u"}


def test_a_chain_whose_table_no_query_writes_or_the_tested_one_does_not_read_is_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv("STREAMCHAOS_DELTA_ROOT", raising=False)
    chain = Chain("parquet", "/lake/bronze", str(tmp_path / "checkpoint"), tmp_path / "sink" / "files")
    with pytest.raises(UserError, match="none of the job's queries writes /lake/bronze as a streaming file sink"):
        chain.started("parquet", object(), [(object(), True, "files")])
    chain.feeders.append(object())
    with pytest.raises(UserError, match="does not read /lake/bronze as a stream"):
        chain.started("parquet", object(), [(object(), True, "files")])


def test_a_delta_table_with_no_commit_and_no_query_writing_it_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMCHAOS_DELTA_ROOT", str(tmp_path / "sink"))
    chain = Chain("delta", "/lake/bronze", str(tmp_path / "checkpoint"), tmp_path / "sink" / "files")
    with pytest.raises(UserError, match=r"before it has a commit: .*CREATE TABLE IF NOT EXISTS delta.`/lake/bronze`"):
        chain.await_table()
    log = Path(chain.table) / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020}.json").write_text("{}\n")
    chain.await_table()  # a commit: read at once
