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


def _times_ms(value, path: str = "") -> dict[str, int]:
    """Every time in a row's value (a window's start and end inside a struct too), by its column's path, as epoch
    milliseconds (UTC)."""
    if isinstance(value, dict):
        return {k: ms for name, v in value.items() for k, ms in _times_ms(v, f"{path}.{name}").items()}
    if isinstance(value, str) and _TIME.match(value):
        try:
            at = datetime.fromisoformat(value)
        except ValueError:
            return {}
        return {path: int((at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp() * 1000)}
    return {}


def held_rows(lost: list[dict], trial_ms: int | None, answer_ms: int | None) -> tuple[list[dict], list[dict]]:
    """``lost`` (the row comparison's entries, each with its row as JSON in ``key``) split into the rows the
    trial's final watermark ``trial_ms`` still holds and the rest. A row's window ends one window after each of
    its times (a window's width: the smallest step between the column's distinct times among the missing rows, so
    a start or an end column both serve); it is held when that end is after ``trial_ms`` for every one of its time
    columns and none is past the answer's ``answer_ms``. Rows whose width cannot be told (a single window) stay
    lost: held is claimed only where the times show it."""
    if trial_ms is None or answer_ms is None or trial_ms >= answer_ms:
        return [], list(lost)
    rows = []
    for entry in lost:
        try:
            rows.append(_times_ms(json.loads(entry["key"])))
        except (KeyError, TypeError, ValueError):
            rows.append({})
    steps = {}
    for column in {c for times in rows for c in times}:
        values = sorted({times[column] for times in rows if column in times})
        gaps = [b - a for a, b in zip(values, values[1:], strict=False) if b > a]
        if gaps:
            steps[column] = min(gaps)
    held, rest = [], []
    for entry, times in zip(lost, rows, strict=True):
        ends = [ms + steps[c] for c, ms in times.items() if c in steps]
        inside = bool(ends) and min(ends) > trial_ms and max(times.values()) <= answer_ms
        (held if inside else rest).append(entry)
    return held, rest


def held_view(run_dir: Path, lost: list[dict]) -> tuple[dict | None, list[dict]]:
    """The held rows of a trial judged against Spark's answer (``run_dir``'s checkpoint against its answer's), as
    the verdict reports them, and the entries still lost."""
    trial_ms = final_watermark_ms(run_dir / "checkpoint")
    answer_ms = final_watermark_ms(run_dir / "oracle" / "checkpoint")
    held, rest = held_rows(lost, trial_ms, answer_ms)
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
