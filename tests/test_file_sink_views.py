"""The two views of a parquet file-sink table: through its ``_spark_metadata`` log, and raw."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipelines_under_test.files import PASSTHROUGH_FILE, PASSTHROUGH_FILE_RAW, log_files, raw_files


def part(table: Path, name: str, ids: list[int]) -> Path:
    path = table / f"part-{name}.snappy.parquet"
    pl.DataFrame({"id": ids, "key": ["k"] * len(ids), "value": [1] * len(ids),
                  "event_time": [0] * len(ids), "partition": [0] * len(ids), "offset": ids}).write_parquet(path)
    return path


def log(table: Path, name: str, paths: list[Path], action: str = "add") -> None:
    meta = table / "_spark_metadata"
    meta.mkdir(exist_ok=True)
    lines = ["v1"] + [json.dumps({"path": f"file:///elsewhere/{p.name}", "size": 1, "action": action}) for p in paths]
    (meta / name).write_text("\n".join(lines))


def test_log_view_reads_the_latest_compaction_and_later_entries_by_file_name(tmp_path):
    table = tmp_path / "sink" / "table"
    table.mkdir(parents=True)
    a, b, c = part(table, "a", [0, 1]), part(table, "b", [2]), part(table, "c", [3])
    replayed = part(table, "a-old", [0, 1])  # a batch written, then rewritten after a crash: not in the log
    log(table, "0", [a])
    log(table, "9.compact", [a, b])
    log(table, "10", [c])
    (table / "part-orphan.snappy.parquet").write_bytes(b"")
    assert sorted(p.name for p in log_files(table)) == sorted([a.name, b.name, c.name])
    readable, orphans = raw_files(table)
    assert replayed in readable and orphans == [{"file": "part-orphan.snappy.parquet", "bytes": 0}]

    through_log = PASSTHROUGH_FILE.read_output(tmp_path / "sink")
    raw = PASSTHROUGH_FILE_RAW.read_output(tmp_path / "sink")
    assert sorted(through_log["id"].to_list()) == [0, 1, 2, 3]
    assert sorted(raw["id"].to_list()) == [0, 0, 1, 1, 2, 3]
    findings = PASSTHROUGH_FILE.sink_findings(tmp_path / "sink")
    assert findings["not_in_log"] == [replayed.name] and findings["orphans"][0]["bytes"] == 0


def test_an_empty_table_reads_as_no_rows(tmp_path):
    (tmp_path / "table").mkdir()
    assert PASSTHROUGH_FILE.read_output(tmp_path).height == 0
    assert PASSTHROUGH_FILE_RAW.read_output(tmp_path).height == 0


def test_a_partitioned_sinks_files_are_found_under_their_directories_with_the_columns_from_the_path(tmp_path):
    from pipelines_under_test.files import in_table, partition_values

    table = tmp_path / "files"
    # On disk Spark escapes ':' in a value (``%3A``), not ' '; the log's URI escapes the path once more.
    uri = "file:/elsewhere/run/sink/files/at=09%253A30/symbol=A%20B/part-00000-x.c000.snappy.parquet"
    assert in_table(uri) == ["at=09%3A30", "symbol=A B", "part-00000-x.c000.snappy.parquet"]
    assert in_table("file:/t/files/part-1.parquet") == ["part-1.parquet"]
    (table / "_spark_metadata").mkdir(parents=True)
    (table / "_spark_metadata" / "0").write_text('v1\n{"path":"' + uri + '","size":1,"action":"add"}\n')
    [found] = log_files(table)
    assert found == table / "at=09%3A30" / "symbol=A B" / "part-00000-x.c000.snappy.parquet"
    assert partition_values(found, table) == {"at": "09:30", "symbol": "A B"}
    assert partition_values(table / "d=__HIVE_DEFAULT_PARTITION__" / "p.parquet", table) == {"d": None}
