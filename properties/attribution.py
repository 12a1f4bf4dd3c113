"""Attribution: which batch first read an event, and which fault preceded that batch's commit."""

from __future__ import annotations

import numpy as np
import polars as pl


def batch_of_events(events: pl.DataFrame, offsets: list[dict]) -> pl.DataFrame:
    """``id -> batch``: the first batch whose write-ahead end offset lies beyond the event.

    A micro-batch query's ends only grow. A continuous query's need not: a partition restarted from
    an older epoch reports ends below an earlier epoch's, so an event is attributed by the running
    maximum of the ends, i.e. to the batch that read it first.
    """
    parts = []
    ranges = [b for b in offsets if b.get("end")]
    for p in sorted(events["partition"].unique().to_list()):
        ends = np.maximum.accumulate(np.array([int(b["end"].get(str(p), 0)) for b in ranges], dtype=np.int64))
        batches = np.array([b["batch"] for b in ranges], dtype=np.int64)
        part = events.filter(pl.col("partition") == p).select("id", "offset")
        idx = np.searchsorted(ends, part["offset"].to_numpy(), side="right")
        known = idx < len(ends)
        batch = np.where(known, batches[np.minimum(idx, len(ends) - 1)] if len(ends) else -1, -1)
        parts.append(pl.DataFrame({"id": part["id"], "batch": pl.Series(batch, dtype=pl.Int64)}))
    return pl.concat(parts) if parts else pl.DataFrame({"id": [], "batch": []})


def fault_before_commit(history: list[dict], batch: int) -> str | None:
    """The nearest fault that fired before ``batch`` was committed (or before the end, if it never was)."""
    committed = [r["t"] for r in history if r["kind"] == "phase" and r["phase"] == "committed" and r["batch"] == batch]
    limit = committed[0] if committed else float("inf")
    fired = [r for r in history if r["kind"] == "fault" and r["detail"].get("done") and r["t"] <= limit]
    return fired[-1]["detail"]["spec"] if fired else None


def attribute(ids: list[int], id_batches: pl.DataFrame, history: list[dict]) -> list[dict]:
    """One record per id: ``{id, batch, fault}``."""
    if not ids:
        return []
    found = pl.DataFrame({"id": pl.Series(ids, dtype=pl.Int64)}).join(id_batches, on="id", how="left")
    faults: dict[int, str | None] = {}
    out = []
    for row in found.iter_rows(named=True):
        b = row["batch"]
        if b is not None and b not in faults:
            faults[b] = fault_before_commit(history, b)
        out.append({"id": row["id"], "batch": b, "fault": faults.get(b)})
    return out
