"""The consistent-cut check (docs/verdicts.md): the state at every committed batch N equals the oracle's
state over exactly the events below the end offsets of ``offsets/N`` — no more, no less.

The driver dumps the state of each committed batch (``spark.read.format("statestore")`` with
``batchId``) to ``state/<N>.parquet`` after the query stops; this module only compares files, so a
stored run can be re-checked without Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from properties.watermark import RAN_BATCHES, batches_ran

MAX_MISMATCHES = 50


def events_below(events: pl.DataFrame, end: dict[str, int]) -> pl.DataFrame:
    """The events whose offset lies below ``end`` in their partition: what batches 0..N consumed."""
    bounds = pl.DataFrame({"partition": [int(p) for p in end], "end": [int(v) for v in end.values()]},
                          schema={"partition": pl.Int32, "end": pl.Int64})
    return events.join(bounds, on="partition", how="inner").filter(pl.col("offset") < pl.col("end")).drop("end")


def compare_state(expected: pl.DataFrame, actual: pl.DataFrame) -> list[dict]:
    """Keys whose state differs: ``{key, expected, actual}`` (None where a side has no such key)."""
    values = [c for c in expected.columns if c != "key"]
    joined = expected.join(actual.select("key", *values), on="key", how="full", coalesce=True, suffix="_actual")
    differs = pl.lit(False)
    for c in values:
        differs = differs | pl.col(c).ne_missing(pl.col(f"{c}_actual"))
    out = []
    for row in joined.filter(differs).sort("key").iter_rows(named=True):
        want = {c: row[c] for c in values}
        have = {c: row[f"{c}_actual"] for c in values}
        out.append({"key": row["key"],
                    "expected": None if all(v is None for v in want.values()) else want,
                    "actual": None if all(v is None for v in have.values()) else have})
    return out


def check_cut(state_dir: Path, events: pl.DataFrame, offsets: list[dict],
              expected_state: Callable[[pl.DataFrame], pl.DataFrame]) -> dict:
    """Compare every dumped batch's state with the oracle's; ``ok`` is None when nothing was dumped."""
    ends = {b["batch"]: b["end"] for b in offsets if b.get("committed") and b.get("end")}
    dumps = sorted((int(p.stem), p) for p in Path(state_dir).glob("*.parquet") if p.stem.isdigit())
    checked, mismatches = [], []
    for batch, path in dumps:
        if batch not in ends:
            mismatches.append({"batch": batch, "key": None, "why": "state dumped for a batch with no commit"})
            continue
        actual = pl.read_parquet(path)
        with batches_ran(b for b in RAN_BATCHES.get() if b <= batch):  # the state as of this batch's commit
            expected = expected_state(events_below(events, ends[batch]))
        for diff in compare_state(expected, actual):
            mismatches.append({"batch": batch, **diff})
        checked.append(batch)
    return {
        "ok": (not mismatches) if dumps else None,
        "batches_checked": checked,
        "committed_batches": len(ends),
        "mismatches": mismatches[:MAX_MISMATCHES],
        "mismatch_count": len(mismatches),
    }
