"""Windows a skipped re-run left behind its watermark are named held, not lost (properties/held.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from properties.held import final_watermark_ms, held_note, held_rows, held_view
from properties.rows import infer_from_rows
from properties.verdicts import AT_MOST_ONCE

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def ms(seconds: int) -> int:
    return int(T0.timestamp() * 1000) + seconds * 1000


def write_checkpoint(root: Path, batch_marks: list[int], next_marks: list[int]) -> None:
    """offsets/N and commits/N as Spark writes them: a version line, then the batch's metadata."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    for n, mark in enumerate(batch_marks):
        meta = {"batchWatermarkMs": mark, "batchTimestampMs": 0, "conf": {}}
        (root / "offsets" / str(n)).write_text(f"v1\n{json.dumps(meta)}\n{{\"0\": {n * 100}}}\n")
    for n, mark in enumerate(next_marks):
        (root / "commits" / str(n)).write_text(f"v1\n{json.dumps({'nextBatchWatermarkMs': mark})}\n")
    (root / "offsets" / ".3.tmp").write_text("not a batch")


def windows(starts: list[int]) -> pl.DataFrame:
    """A windowed sum's rows as a job writes them: the window's start and end, a customer, a total."""
    def at(seconds: int) -> datetime:
        return datetime.fromtimestamp(ms(seconds) / 1000, tz=UTC).replace(tzinfo=None)

    return pl.DataFrame({"window_start": [at(s) for s in starts], "window_end": [at(s + 10) for s in starts],
                         "customer": ["c1"] * len(starts), "total": [5] * len(starts)})


def test_the_final_watermark_is_the_largest_a_batch_ran_with_or_a_commit_left(tmp_path):
    write_checkpoint(tmp_path / "cp", [0, 0, ms(15), ms(25)], [ms(15), ms(25), ms(25)])
    assert final_watermark_ms(tmp_path / "cp") == ms(25)
    assert final_watermark_ms(tmp_path / "none") is None


def test_rows_of_windows_between_the_two_watermarks_are_held_and_the_rest_lost(tmp_path):
    """The trial's last commit kept watermark 25 s; the answer's run reached 55 s. Windows ending at 30-50 s wait
    in the state; the window of 10-20 s was due at 25 s already: that one is lost."""
    answer, observed = windows([0, 10, 20, 30, 40]), windows([0])
    found = infer_from_rows(answer, observed)
    assert found.verdict == AT_MOST_ONCE and len(found.lost) == 4
    held, lost = held_rows(found.lost, ms(25), ms(55), answer, observed)
    assert len(held) == 3 and len(lost) == 1 and '"2026-01-01T00:00:20"' in lost[0]["key"]
    assert held_rows(found.lost, ms(55), ms(55), answer, observed) == ([], found.lost)  # the same watermark
    assert held_rows(found.lost, None, ms(55), answer, observed) == ([], found.lost)  # a job without one

    run = tmp_path / "run"
    write_checkpoint(run / "checkpoint", [0, ms(15), ms(25)], [ms(15), ms(25), ms(25)])
    write_checkpoint(run / "oracle" / "checkpoint", [0, ms(55)], [ms(55), ms(55)])
    view, rest = held_view(run, found.lost, answer, observed)
    assert view["rows"] == 3 and (view["watermark_ms"], view["answer_watermark_ms"]) == (ms(25), ms(55))
    assert len(rest) == 1
    note = held_note(view)
    assert "3 row(s)" in note and "00:00:25" in note and "00:00:55" in note and "held, not lost" in note


def test_a_start_column_alone_takes_the_width_from_the_answers_starts_and_nothing_else_is_claimed():
    """The finding's gold table writes window_start only: a window's end is its start plus the step between the
    answer's starts (10 s), not the gap between the missing ones. A row with no window column (a stateless job's),
    an end-only row ending before the trial's watermark, and a window the sink holds at another count (an
    update-mode job's) stay lost."""
    answer = windows([0, 10, 20, 30, 40]).drop("window_end")
    missing = answer.filter(pl.col("window_start").dt.second().is_in([20, 40]))  # [20, 30) and [40, 50)
    found = infer_from_rows(answer, answer.join(missing, on=answer.columns, how="anti"))
    held, lost = held_rows(found.lost, ms(35), ms(55), answer, answer.join(missing, on=answer.columns, how="anti"))
    assert [json.loads(e["key"])["window_start"] for e in lost] == ["2026-01-01T00:00:20"]  # due at 30 s: lost
    assert len(held) == 1

    events = pl.DataFrame({"id": [1, 2], "event_time": [datetime.fromtimestamp(ms(s) / 1000, tz=UTC).replace(
        tzinfo=None) for s in (36, 40)]})
    stateless = infer_from_rows(events, events.head(0))
    assert held_rows(stateless.lost, ms(35), ms(55), events, events.head(0))[0] == []

    ends = windows([10, 20, 30]).drop("window_start")
    gone = infer_from_rows(ends, ends.head(0))
    held, lost = held_rows(gone.lost, ms(35), ms(55), ends, ends.head(0))
    assert {json.loads(e["key"])["window_end"] for e in lost} == {"2026-01-01T00:00:20", "2026-01-01T00:00:30"}

    updated = windows([30]).with_columns(total=pl.lit(3))  # the window written at an earlier count
    partial = infer_from_rows(windows([30]), updated)
    assert held_rows(partial.lost, ms(35), ms(55), windows([30]), updated)[0] == []
