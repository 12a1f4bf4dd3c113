"""Frozen evidence: the sink as it was when its trial ended, and what reached it afterwards.

A trial is judged from a snapshot of its sink taken when the trial ends (``frozen/sink``), not from
the live ``sink/`` directory: a pipeline may go on writing after its query stopped (a background
thread in a driver the harness keeps for the next trial, a sink's asynchronous flush), and those
writes would change a stored run's verdict on every later re-check. The snapshot keeps the verdict
reproducible. A manifest of the live files as they were (size, mtime, digest) lets every later
check tell whether the sink changed since: a finding, "rows written after the trial ended",
reported beside the verdict and never folded into it.

SQLite files are copied with SQLite's backup API (a consistent database even while another process
writes); their journals are neither copied nor compared (a finished write shows in the database).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

FROZEN = "frozen"
MANIFEST = "manifest.json"
JOURNALS = ("-journal", "-wal", "-shm")
SQLITE_MAGIC = b"SQLite format 3\x00"


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def _copy(path: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if _is_sqlite(path):
        try:
            src = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
            dst = sqlite3.connect(target)
            try:
                src.backup(dst)
                return
            finally:
                src.close()
                dst.close()
        except sqlite3.Error:
            target.unlink(missing_ok=True)  # fall back to the bytes as they are
    shutil.copy2(path, target)


def _live_files(sink: Path) -> dict[str, Path]:
    if not sink.is_dir():
        return {}
    return {str(p.relative_to(sink)): p for p in sorted(sink.rglob("*"))
            if p.is_file() and not p.name.endswith(JOURNALS)}


def _fingerprint(path: Path) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": _digest(path)}


def freeze(run_dir: Path) -> Path:
    """Snapshot ``run_dir/sink`` into ``run_dir/frozen/sink`` with a manifest of the live files; returns the
    snapshot. Written beside and renamed into place: a killed harness leaves no half snapshot."""
    run_dir = Path(run_dir)
    tmp = run_dir / f"{FROZEN}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "sink").mkdir(parents=True)
    files = {}
    for rel, path in _live_files(run_dir / "sink").items():
        try:
            files[rel] = _fingerprint(path)
            _copy(path, tmp / "sink" / rel)
        except FileNotFoundError:  # removed while we looked (a sink's temporary file)
            files.pop(rel, None)
    (tmp / MANIFEST).write_text(json.dumps({"frozen_at": time.time(), "files": files}, indent=1))
    final = run_dir / FROZEN
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return final / "sink"


def judged_sink(run_dir: Path) -> Path:
    """The sink a verdict is judged from: the snapshot, or the live directory of a run stored before snapshots."""
    frozen = Path(run_dir) / FROZEN / "sink"
    return frozen if (Path(run_dir) / FROZEN / MANIFEST).exists() else Path(run_dir) / "sink"


def late_writes(run_dir: Path) -> dict | None:
    """What changed in the live sink since it was frozen: ``{changed, added, removed}`` file lists, or None."""
    try:
        manifest = json.loads((Path(run_dir) / FROZEN / MANIFEST).read_bytes())["files"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    if not isinstance(manifest, dict) or not all(
            isinstance(m, dict) and {"size", "mtime_ns", "sha256"} <= set(m) for m in manifest.values()):
        return None  # a damaged manifest claims nothing
    live = _live_files(Path(run_dir) / "sink")
    changed = []
    for rel, path in live.items():
        before = manifest.get(rel)
        if before is None:
            continue
        try:
            st = path.stat()
            if st.st_size == before["size"] and st.st_mtime_ns == before["mtime_ns"]:
                continue
            if _digest(path) != before["sha256"]:
                changed.append(rel)
        except FileNotFoundError:
            continue
    added = sorted(set(live) - set(manifest))
    removed = sorted(set(manifest) - set(live))
    if not (changed or added or removed):
        return None
    return {"changed": changed, "added": added, "removed": removed}
