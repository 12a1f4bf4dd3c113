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


def _commit_time(history: list[dict], batch: int) -> float | None:
    """When ``batch`` was first committed, or None if it never was."""
    return next((r["t"] for r in history if r["kind"] == "phase" and r["phase"] == "committed"
                 and r["batch"] == batch), None)


def fired_faults(history: list[dict]) -> list[dict]:
    """The fault records whose fault fired, in history order."""
    return [r for r in history if r["kind"] == "fault" and r["detail"].get("done")]


def fault_before_commit(history: list[dict], batch: int) -> str | None:
    """The nearest fault that fired before ``batch`` was committed (or before the end, if it never was)."""
    committed = _commit_time(history, batch)
    limit = float("inf") if committed is None else committed
    fired = [r for r in fired_faults(history) if r["t"] <= limit]
    return fired[-1]["detail"]["spec"] if fired else None


def fault_for_loss(history: list[dict], batch: int) -> tuple[str | None, str]:
    """The fault that explains a loss of ``batch``'s events, and why.

    A fault that fired at that batch before it committed comes first (the replay after it lost rows).
    A batch that committed before any such fault lost its rows after its commit: its write was still
    pending (an asynchronous sink, a background thread) when the first fault after the commit cut it.
    Otherwise the nearest fault before the commit, as for duplicates."""
    committed = _commit_time(history, batch)
    limit = float("inf") if committed is None else committed
    fired = fired_faults(history)
    during = [r for r in fired if r["t"] <= limit and r["batch"] == batch]  # the batch the controller fired it at
    if during:
        return during[-1]["detail"]["spec"], f"fired while batch {batch} ran, before its commit"
    after = [r for r in fired if r["t"] > limit]
    if after:
        return after[0]["detail"]["spec"], (f"first fault after batch {batch} committed: it cut the batch's "
                                            "still pending write")
    before = fault_before_commit(history, batch)
    return before, (f"nearest fault before batch {batch} committed" if before else "no fault fired")


def attribute(ids: list[int], id_batches: pl.DataFrame, history: list[dict], lost: bool = False) -> list[dict]:
    """One record per id: ``{id, batch, fault, why}``; ``lost``: the ids are losses (``fault_for_loss``)."""
    if not ids:
        return []
    found = pl.DataFrame({"id": pl.Series(ids, dtype=pl.Int64)}).join(id_batches, on="id", how="left")
    faults: dict[int, tuple[str | None, str]] = {}
    out = []
    for row in found.iter_rows(named=True):
        b = row["batch"]
        if b is not None and b not in faults:
            if lost:
                faults[b] = fault_for_loss(history, b)
            else:
                before = fault_before_commit(history, b)
                faults[b] = (before, f"nearest fault before batch {b} committed" if before else "no fault fired")
        fault, why = faults.get(b, (None, "read by no planned batch"))
        out.append({"id": row["id"], "batch": b, "fault": fault, "why": why})
    return out
