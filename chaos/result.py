"""Parts of a trial's result.json read back from what the trial stored: the batches Spark planned and
committed with their offsets (its checkpoint), and how long each driver kill took to the next commit (its
history). ``chaos.trial.Trial.summary`` puts them beside how the trial ended."""

from __future__ import annotations

from pathlib import Path

from chaos.source import read_offsets_file


def batch_offsets(checkpoint: Path) -> list[dict]:
    """Per committed-or-planned batch: its start and end offsets from the write-ahead log."""
    folder = checkpoint / "offsets"
    names = sorted(int(n.name) for n in folder.iterdir() if n.name.isdigit()) if folder.is_dir() else []
    commits = checkpoint / "commits"
    out, previous = [], None
    for n in names:
        ends = read_offsets_file(str(folder / str(n)))
        end = ends[0] if ends else None
        out.append({"batch": n, "start": previous, "end": end, "committed": (commits / str(n)).exists()})
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
