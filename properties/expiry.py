"""The clock of a processing-time pipeline, replayed from its output: what a TTL and a timer must have done.

``keyed-state-expiry`` (pipelines_under_test/expiry.py) writes, with every event, the timestamp of the batch that
read it (``at``, Spark's logged ``batchTimestampMs``), the key's running count (``n``, kept in a ValueState with a
TTL) and the timestamp of the batch whose processing-time timer emitted it (``flushed``). The checker knows
which batch read each event (``batch``, from the write-ahead offsets), so per key and batch in order:

* one batch has one clock: every event a batch read carries the same ``at``;
* a timer fires at or after the batch it was set in: ``flushed >= at``;
* the count goes on from the key's previous batch when that batch's clock lies less than the TTL before, and
  starts again at 1 when more (exactly the TTL apart, either), counting the batch's events in id order.

A lost event does not break the chain (its batch's other events still place the count); a batch whose clock is
unknown (none of its events written) lets either branch through.
"""

from __future__ import annotations

import polars as pl


def unexplained(output: pl.DataFrame, events: pl.DataFrame, ttl_ms: int, limit: int = 1000) -> list[dict]:
    """Rows whose counts or timestamps no run of the logged clock explains."""
    if "batch" not in events.columns or output.is_empty():
        return []
    rows = output.unique(subset="id", keep="first").select("id", "n", "at", "flushed")
    wrong = [{"id": r["id"], "why": f"emitted by the timer of a batch at {r['flushed']} ms, before the batch that "
                                    f"read it at {r['at']} ms"}
             for r in rows.filter(pl.col("flushed") < pl.col("at")).iter_rows(named=True)]
    read = events.filter(pl.col("batch") >= 0).select("id", "key", "batch").join(rows, on="id", how="left")
    clocks = read.filter(pl.col("at").is_not_null()).group_by("batch").agg(pl.col("at").unique().alias("ats"))
    clock: dict[int, int] = {}
    for batch, ats in clocks.iter_rows():
        if len(ats) == 1:
            clock[batch] = ats[0]
        else:
            wrong += [{"id": r["id"], "why": f"batch {batch}'s events carry {len(ats)} clocks ({sorted(ats)[:3]} ms)"}
                      for r in read.filter(pl.col("batch") == batch).iter_rows(named=True) if r["at"] is not None]
    for _, group in read.sort("key", "batch", "id").group_by("key", maintain_order=True):
        wrong += _chain(group, clock, ttl_ms)
        if len(wrong) >= limit:
            break
    return wrong[:limit]


def _chain(group: pl.DataFrame, clock: dict[int, int], ttl_ms: int) -> list[dict]:
    """One key's batches in order: the counts each allows (``lasts``: what the previous batch may have left)."""
    wrong: list[dict] = []
    lasts: set[int] | None = None  # None: the key's first batch
    previous: int | None = None
    for (batch,), part in group.group_by("batch", maintain_order=True):
        at = clock.get(batch)
        if lasts is None:
            bases = {0}
        elif at is None or previous is None or at - previous == ttl_ms:
            bases = {0} | lasts
        else:
            bases = lasts if at - previous < ttl_ms else {0}
        seen = [(j, r["id"], r["n"]) for j, r in enumerate(part.iter_rows(named=True), 1) if r["n"] is not None]
        fits = {b for b in bases if all(n == b + j for j, _, n in seen)}
        if seen and not fits:
            gap = "" if at is None or previous is None else f", {at - previous} ms after the key's previous batch"
            wrong += [{"id": i, "why": f"count {n} in batch {batch}{gap}: the logged clock and a {ttl_ms} ms TTL "
                                       f"allow {sorted(b + j for b in bases)}"} for j, i, n in seen]
            fits = {seen[0][2] - seen[0][0]}  # go on from what was written: one wrong batch, not a cascade
        lasts = {b + part.height for b in fits} if fits else {b + part.height for b in bases}
        previous = at
    return wrong
