"""Parts of a trial's result.json read back from what the trial stored: the batches Spark planned and
committed with their offsets (its checkpoint), and how long each driver kill took to the next commit (its
history). ``chaos.run.trial.Trial.summary`` puts them beside how the trial ended."""

from __future__ import annotations

from pathlib import Path

from chaos.store.checkpoint import read_offsets_file


def planned_ends(records: list[dict]) -> dict[int, dict]:
    """The end offsets the harness's source reported for each batch when it was last planned (history records)."""
    return {r["batch"]: r["detail"]["end"] for r in records
            if r.get("kind") == "phase" and r.get("phase") == "planned" and isinstance(r.get("detail"), dict)
            and isinstance(r["detail"].get("end"), dict)}


def batch_offsets(checkpoint: Path, records: list[dict] | None = None) -> list[dict]:
    """Per committed-or-planned batch: its start and end offsets from the write-ahead log.

    An entry the trial damaged (``damage-checkpoint``, truncated or deleted after Spark planned from it) reads as
    no offsets; its batch's end is then the one the source reported when the batch was last planned
    (``records``: the history's ``planned`` phases), if the batch committed or its file is there. Without it the
    checker would fold the batch into the next one and judge event-time pipelines by a watermark Spark never had.
    The same holds for the entries Spark purged itself: it keeps the last ``spark.sql.streaming.minBatchesToRetain``
    (100) of each log, and a processing-time query that runs a batch without data at every trigger (timers, TTL)
    passes 100 batches within a minute of waiting; every batch older than the oldest entry kept had committed."""
    folder = checkpoint / "offsets"
    names = {int(n.name) for n in folder.iterdir() if n.name.isdigit()} if folder.is_dir() else set()
    commits = checkpoint / "commits"
    planned = planned_ends(records or [])
    oldest = min(names, default=None)
    purged = {n for n in planned if oldest is not None and n < oldest}  # by Spark's retention: all committed
    names = sorted(names | purged | {n for n in planned if (commits / str(n)).exists()})  # deleted after it ran
    out, previous = [], None
    for n in names:
        ends = read_offsets_file(str(folder / str(n)))
        end = ends[0] if ends else planned.get(n)
        out.append({"batch": n, "start": previous, "end": end, "committed": n in purged or (commits / str(n)).exists()})
        previous = end
    return out


def recoveries(records: list[dict]) -> list[dict]:
    """For each driver kill: seconds from the kill to the next committed batch (the restart cost)."""
    out = []
    for i, rec in enumerate(records):
        if rec["kind"] != "fault" or not rec["detail"].get("spec", "").startswith("kill-driver"):
            continue
        nxt = next((r for r in records[i:] if r["kind"] == "phase" and r["phase"] == "committed"), None)
        out.append({"spec": rec["detail"]["spec"], "seconds": round(nxt["t"] - rec["t"], 2) if nxt else None})
    return out
