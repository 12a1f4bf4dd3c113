"""Rows a crash left waiting in the state, not lost: windows behind a watermark the restart did not move.

A batch re-run after its sink committed it is skipped by the file and Delta sinks without running, so its
``commits/N`` keeps the batch's own watermark, not the one its records set (docs/findings/004): the windows those
records closed stay in the state until the next record moves the watermark. Against Spark's answer (the job over
every record, run until its watermark stops moving) the trial then misses exactly the rows of windows ending after
its own final watermark and no later than the answer's. Those rows are held, not lost: the verdict names them and
the two watermarks instead of calling the sink at-most-once.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from properties.rows import _plain

_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def final_watermark_ms(checkpoint: Path) -> int | None:
    """The watermark a checkpoint leaves its next batch: the largest of its batches' ``batchWatermarkMs``
    (``offsets/N``) and ``nextBatchWatermarkMs`` (``commits/N``); None when it holds neither."""
    marks = [mark for folder, field in (("offsets", "batchWatermarkMs"), ("commits", "nextBatchWatermarkMs"))
             for mark in _logged(Path(checkpoint) / folder, field)]
    return max(marks) if marks else None


def _logged(folder: Path, field: str) -> list[int]:
    found = []
    for entry in folder.iterdir() if folder.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            meta = json.loads(entry.read_text().splitlines()[1])
        except (OSError, IndexError, ValueError):
            continue
        if isinstance(meta, dict) and isinstance(meta.get(field), int):
            found.append(meta[field])
    return found


def _ms(value) -> int | None:
    if isinstance(value, datetime):
        return int((value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp() * 1000)
    if isinstance(value, str) and _TIME.match(value):
        try:
            return _ms(datetime.fromisoformat(value))
        except ValueError:
            return None
    return None


def _times(row: dict, path: str = "") -> dict[str, int]:
    """A row's times by column path (a window struct's ``start`` and ``end`` too), as epoch ms (UTC)."""
    found = {}
    for name, value in row.items():
        if isinstance(value, dict):
            found.update(_times(value, f"{path}{name}."))
        elif (ms := _ms(value)) is not None:
            found[f"{path}{name}"] = ms
    return found


def _role(column: str) -> str | None:
    leaf = column.rsplit(".", 1)[-1].lower()
    return "end" if "end" in leaf else "start" if "start" in leaf else None


def _signature(row: dict) -> str:
    """A row without its numbers: the group it counts (a window and a customer, say)."""
    return json.dumps({k: v for k, v in row.items() if not isinstance(v, int | float) or isinstance(v, bool)},
                      sort_keys=True, default=str)


def _plain_rows(frame: pl.DataFrame) -> list[dict]:
    """Rows with their values as the row comparison writes them into an entry's ``key`` (``properties.rows``)."""
    return [{k: _plain(v) for k, v in row.items()} for row in frame.iter_rows(named=True)]


def held_rows(lost: list[dict], trial_ms: int | None, answer_ms: int | None, answer: pl.DataFrame,
              observed: pl.DataFrame) -> tuple[list[dict], list[dict]]:
    """``lost`` (the row comparison's entries, each row as JSON in ``key``) split into the windows the trial's final
    watermark ``trial_ms`` still holds and the rest. Claimed only where the rows show it: a row whose window end
    (a column named like ``end``, or one named like ``start`` plus the width, the smallest step between the
    starts of Spark's ``answer``) is after ``trial_ms`` and no later than the answer's ``answer_ms``, and whose group
    the sink (``observed``) holds no row of at all (an append of a window not emitted yet; an update-mode or
    stateless job's row was written, at another count, or is lost)."""
    if trial_ms is None or answer_ms is None or trial_ms >= answer_ms:
        return [], list(lost)
    answers = [_times(row) for row in answer.iter_rows(named=True)]
    steps = {}
    for column in {c for times in answers for c in times if _role(c) == "start"}:
        values = sorted({times[column] for times in answers if column in times})
        gaps = [b - a for a, b in zip(values, values[1:], strict=False) if b > a]
        if gaps:
            steps[column] = min(gaps)
    written = {_signature(row) for row in _plain_rows(observed)}
    held, rest = [], []
    for entry in lost:
        try:
            row = json.loads(entry["key"])
        except (KeyError, TypeError, ValueError):
            rest.append(entry)
            continue
        times = _times(row) if isinstance(row, dict) else {}
        ends = [ms for c, ms in times.items() if _role(c) == "end"] or \
               [ms + steps[c] for c, ms in times.items() if _role(c) == "start" and c in steps]
        inside = bool(ends) and all(trial_ms < end <= answer_ms for end in ends)
        unwritten = "have" not in entry and _signature(row) not in written
        (held if inside and unwritten else rest).append(entry)
    return held, rest


def held_view(run_dir: Path, lost: list[dict], answer: pl.DataFrame,
              observed: pl.DataFrame) -> tuple[dict | None, list[dict]]:
    """The held rows of a trial judged against Spark's answer (``run_dir``'s checkpoint against its answer's), as
    the verdict reports them, and the entries still lost."""
    trial_ms = final_watermark_ms(run_dir / "checkpoint")
    answer_ms = final_watermark_ms(run_dir / "oracle" / "checkpoint")
    held, rest = held_rows(lost, trial_ms, answer_ms, answer, observed)
    if not held:
        return None, rest
    return {"rows": sum(-e.get("delta", -1) for e in held), "watermark_ms": trial_ms,
            "answer_watermark_ms": answer_ms, "sample": held[:20]}, rest


def held_note(held: dict) -> str:
    """The verdict's one line for held rows."""
    def at(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")

    return (f"drained, but {held['rows']} row(s) of windows ending after the last commit's watermark "
            f"({at(held['watermark_ms'])}) and by the answer's ({at(held['answer_watermark_ms'])}) wait in the "
            "state for the next record: held, not lost (a batch re-run after its sink committed it keeps its old "
            "watermark: docs/findings/004-skipped-batch-keeps-the-watermark.md)")
