"""The checkpoint watcher on a checkpoint laid out as Spark writes it (no JVM): which files become which
phases, once each, and when the input counts as drained."""

from __future__ import annotations

import os
from pathlib import Path

from chaos.nemesis.controller import Controller, History
from chaos.run.watcher import CheckpointWatcher

METADATA = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{"spark.sql.shuffle.partitions":"2"}}'


def _offsets(checkpoint: Path, batch: int, ends: dict[str, int]) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    parts = ", ".join(f'"{p}": {n}' for p, n in ends.items())
    (checkpoint / "offsets" / str(batch)).write_text(f"v1\n{METADATA}\n{{{parts}}}\n")


def _touch(path: Path, mtime_ns: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    if mtime_ns is not None:
        os.utime(path, ns=(mtime_ns, mtime_ns))


def _phases(history: History) -> list[tuple]:
    return [(r["kind"], r["batch"], r["phase"], r["detail"].get("file")) for r in history.snapshot()]


def test_each_file_is_one_phase_once_and_a_rewrite_is_another(tmp_path):
    checkpoint = tmp_path / "checkpoint"
    history = History()
    controller = Controller(history, [], lambda fault, record: {})
    watcher = CheckpointWatcher(checkpoint, controller, history, total_events=5)
    try:
        watcher.scan()  # no checkpoint yet: nothing, no error
        assert history.snapshot() == []
        _offsets(checkpoint, 0, {"0": 2, "1": 1})
        _touch(checkpoint / "state" / "0" / "1" / "1.delta", 1_000)
        _touch(checkpoint / "state" / "0" / "0" / "1.delta", 1_000)
        _touch(checkpoint / "state" / "0" / "0" / ".1.delta.b7c2.TID3.tmp")  # Spark's temporary file
        _touch(checkpoint / "state" / "0" / "_metadata" / "schema")
        watcher.scan()
        watcher.scan()  # unchanged files are not reported again
        assert _phases(history) == [("checkpoint", 0, None, "offsets/0"),
                                    ("phase", 0, "state-commit", "state/0/0/1.delta"),
                                    ("phase", 0, "state-commit", "state/0/1/1.delta")]
        assert not watcher.committed and not watcher.drained.is_set()

        _touch(checkpoint / "state" / "0" / "0" / "1.delta", 2_000)  # rewritten by a replay of batch 0
        _touch(checkpoint / "commits" / "0")
        watcher.scan()
        assert _phases(history)[3:] == [("phase", 0, "state-commit", "state/0/0/1.delta"),
                                        ("phase", 0, "committed", None)]
        assert watcher.committed == {0} and watcher.progress.is_set()
        assert not watcher.drained.is_set()  # 3 of 5 events read

        _offsets(checkpoint, 1, {"0": 3, "1": 2})
        _touch(checkpoint / "commits" / "1")
        watcher.scan()
        assert watcher.committed == {0, 1} and watcher.drained.is_set()
        assert [r["detail"]["attempt"] for r in history.snapshot()
                if r["phase"] == "state-commit" and r["batch"] == 0] == [1, 2, 3]
    finally:
        controller.close()
