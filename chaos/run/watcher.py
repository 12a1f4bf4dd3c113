"""Watches the checkpoint directory for the phases no Python hook can see.

* ``committed``: commits/N appeared (Spark writes it after the sink returned).
* ``state-commit``: a state store file of version N+1 appeared or was rewritten (batch N).
* offsets/N appearing is recorded as a ``checkpoint`` record (the ``planned`` phase itself is
  reported by the source, which waits there).

Faults on these phases fire the moment the file is observed: the watcher polls often (20 ms) and
the controller fires synchronously, but Spark is not held, so the next step may already be under
way. The watcher also tells the trial when the input is drained: a committed batch whose end
offsets cover every event.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from chaos.nemesis.actions import state_version_of
from chaos.nemesis.controller import Controller, History
from chaos.store.checkpoint import read_offsets_file
from chaos.store.result import planned_ends

POLL = 0.02


class CheckpointWatcher:
    def __init__(self, checkpoint: Path, controller: Controller, history: History, total_events: int,
                 feed=None, drain_commits: int = 0) -> None:
        self.checkpoint = Path(checkpoint)
        # Commits wanted after the first that covers the input (``Pipeline.drain_commits``), and that first one.
        self.drain_commits = drain_commits
        self.covered: int | None = None
        self.controller = controller
        self.history = history
        self.total = total_events
        self.feed = feed  # chaos.stream.socketfeed.SocketFeed, for pipelines that read it
        self.seen: dict[str, int] = {}
        self.committed: set[int] = set()
        self.drained = threading.Event()
        self.progress = threading.Event()  # set on every commit; the trial clears it
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="checkpoint-watcher", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(10)

    def _changed(self, key: str, mtime: int) -> bool:
        if self.seen.get(key) == mtime:
            return False
        self.seen[key] = mtime
        return True

    def _loop(self) -> None:
        while not self._stop.wait(POLL):
            self.scan()

    def scan(self) -> None:
        root = str(self.checkpoint)
        for name, mtime in _numbered_files(f"{root}/offsets"):
            if self._changed(f"offsets/{name}", mtime):
                self.history.add("checkpoint", name, None, file=f"offsets/{name}")
        for rel, version, mtime in sorted(_state_files(root, "state")):
            if self._changed(rel, mtime):
                self.controller.report(version - 1, "state-commit", file=rel, source="watcher")
        commits = self.checkpoint / "commits"
        for name, mtime in _numbered_files(str(commits)):
            if self._changed(f"commits/{name}", mtime):
                self.committed.add(name)
                self.controller.report(name, "committed", source="watcher")
                self.progress.set()
                if self.feed is None and self.covered is None and self._covers_all(name):
                    self.covered = name
                if self.covered is not None and name >= self.covered + self.drain_commits:
                    self.drained.set()
        if self.feed is not None and self._feed_drained(commits):
            self.drained.set()

    def _feed_drained(self, commits: Path) -> bool:
        """A socket source's offsets restart with every connection, so they cannot say "all read": the
        feed can, once it sent everything and the last planned batch is committed and nothing follows."""
        planned, done = _numbered(self.checkpoint / "offsets"), _numbered(commits)
        if not done or (planned and planned[-1] not in self.committed):
            return False
        return self.feed.quiet((commits / str(done[-1])).stat().st_mtime)

    def _covers_all(self, batch: int) -> bool:
        ends = read_offsets_file(str(self.checkpoint / "offsets" / str(batch)))
        # An entry damaged after Spark planned from it: the end the source reported planning it (chaos.store.result).
        end = ends[0] if ends else planned_ends(list(self.history.records)).get(batch)
        return end is not None and sum(int(v) for v in end.values()) >= self.total


# The watcher scans every 20 ms in the harness, on the trial's cores: os.scandir and plain strings, not
# pathlib's rglob and two stats a file (0.48 -> ~0.1 ms a scan on a finished 10-batch checkpoint).

def _state_files(root: str, rel: str) -> list[tuple[str, int, int]]:
    """Every versioned state store file under ``root/rel``: (its path relative to ``root``, version, mtime)."""
    found: list[tuple[str, int, int]] = []
    try:
        entries = list(os.scandir(f"{root}/{rel}"))
    except (FileNotFoundError, NotADirectoryError):
        return found
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                found += _state_files(root, f"{rel}/{entry.name}")
            elif (version := state_version_of(entry.name)) is not None:
                found.append((f"{rel}/{entry.name}", version, entry.stat().st_mtime_ns))
        except FileNotFoundError:  # removed between the listing and the stat (Spark's temporary files)
            continue
    return found


def _numbered_files(folder: str) -> list[tuple[int, int]]:
    """(number, mtime) of the files named by a batch number in ``folder``, in batch order."""
    found = []
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return []
    for entry in entries:
        if entry.name.isdigit():
            try:
                found.append((int(entry.name), entry.stat().st_mtime_ns))
            except FileNotFoundError:
                continue
    return sorted(found)


def _numbered(folder: Path) -> list[int]:
    return [name for name, _ in _numbered_files(str(folder))]
