"""The next trial's first driver, booted ahead: ``python -m chaos.driver.process --spare DIR``.

A trial's first driver costs a JVM boot, a SparkSession, executors and their Python workers before
batch 0 can run, on the 2 cores the previous trial has just stopped using. With ``standby`` on, the
harness boots one spare during the previous trial's tail (once no driver kill is ahead) and hands it
the next trial: it then does what a cold first driver does, start the query on an empty checkpoint,
only sooner. A spare boots on the harness's settings alone (master, JVM flags, class archive, executor
cores), so a trial whose driver needs other settings, or JVM conf of its pipeline (``boot_conf``), gets
a cold driver and the spare is stopped (its executors would hold the cores the trial's standby needs).

With ``standby`` on as well, a second spare boots in the same tail and becomes the next trial's first
standby (only on the harness's own cluster, whose workers then have a third core for its executors):
handed over with ``standby``, it is that incarnation's standby and starts the query at a second
SIGUSR1, as a standby started by the trial would. A trial's first driver kill then no longer waits for
a JVM boot. Until its hand-over its session runs at a lower priority (``session_nice``).
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
from collections.abc import Collection
from pathlib import Path

from chaos.machine.processes import Group, Owned, wait_until
from chaos.store.atomic import write_json

# What a spare boots with; chaos.driver.process checks them again at the hand-over.
SPARE_KEYS = ("master", "java_options", "class_path", "class_archive", "executor_archive", "python_daemon",
              "locality_wait", "cores_max", "tmp_dir", "worker_cores", "interpreted_sql",
              "driver_host", "cluster_conf", "jars", "plugins")


def recycle_folder(root: str | Path, pid: int) -> Path:
    """Where the driver process ``pid`` waits, recycled, as the next trial's first driver
    (chaos.driver.process.serve)."""
    return Path(root) / f"recycled-{pid}"


class Spare:
    def __init__(self, group: Group, folder: Path, settings: dict, log: Path | None = None) -> None:
        self.group = group
        self.folder = folder
        self.settings = settings
        self.log = log or folder / "driver.log"  # where the process writes (a recycled driver: an older file)

    @classmethod
    def boot(cls, owned: Owned, folder: Path, settings: dict, argv: list[str], env: dict[str, str] | None,
             cwd: Path | None = None) -> Spare:
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / "spare.json", settings)
        group = owned.spawn(folder.name, argv + ["--spare", str(folder)], env=env, log_path=folder / "driver.log",
                            cwd=cwd)
        if settings.get("role") == "standby" and can_renice():
            # Its boot must not slow this trial's tail (the state dump, the next spare's boot): it has until
            # the next trial's first driver kill. The hand-over gives it a normal share again.
            session_nice(group.pid, 10)
        return cls(group, folder, settings)

    def fits(self, config: dict, boot_conf: dict) -> bool:
        """Would a cold first driver of ``config`` boot exactly like this spare did?"""
        return (self.group.alive() and not boot_conf and not config.get("spark_conf")
                and all(config.get(k) == self.settings.get(k) for k in SPARE_KEYS))

    def hand_over(self, run_dir: Path, incarnation: int, standby: bool = False) -> Group:
        """The spare becomes ``incarnation`` of the trial in ``run_dir`` (go.json first, then the signal);
        ``standby``: it warms up as that incarnation's standby and starts the query at the next signal.
        A spare that has not yet caught SIGUSR1 (still importing) would die of it: wait until it does."""
        write_json(self.folder / "go.json", {"run_dir": str(run_dir), "incarnation": incarnation,
                                             **({"standby": True} if standby else {})})
        if self.settings.get("role") == "standby" and can_renice():
            session_nice(self.group.pid, 0)
        wait_until(lambda: (self.folder / "listening").exists() or not self.group.alive(), 30)
        self.group.signal_leader(signal.SIGUSR1)
        return self.group

    def link_log(self, target: Path) -> None:
        """While it runs, the trial's ``logs/driver-<k>.log`` is a link to the spare's log."""
        target.symlink_to(self.log)

    def adopt_log(self, target: Path) -> None:
        """A recycled driver (chaos.driver.process.serve) goes on writing where it did: the trial's ``target`` (a
        cold driver's own file: moved into the folder, the process's open file follows) or a link to an
        older spare's log. ``target`` is then a link to it, which ``keep_log`` turns into the trial's part."""
        if target.is_symlink():
            self.log = target.resolve()
            return
        if target.exists():
            target.replace(self.log)
            target.symlink_to(self.log)

    @staticmethod
    def keep_log(target: Path, live: Collection[Path] = ()) -> None:
        """After the trial, the link becomes the file: a run directory holds its own logs. A log a live
        process (``live``: a recycled driver) goes on writing stays where it is: the trial keeps a copy of
        what was written since the last trial's copy (``<log>.start``), and the next trial the rest."""
        if not target.is_symlink():
            return
        source = target.resolve()
        target.unlink()
        if not source.exists():
            return
        mark = source.with_name(source.name + ".start")
        start = int(mark.read_text()) if mark.exists() else 0
        if source not in live and start == 0:
            shutil.move(source, target)
            return
        with open(source, "rb") as f:
            f.seek(start)
            part = f.read()
        target.write_bytes(part)
        if source in live:
            mark.write_text(str(start + len(part)))
        else:
            source.unlink()
            mark.unlink(missing_ok=True)


def can_renice() -> bool:
    """Whether this process may give a session its normal share back (root, or RLIMIT_NICE allows it)."""
    return os.geteuid() == 0 or resource.getrlimit(resource.RLIMIT_NICE)[0] >= 20


def session_nice(pid: int, nice: int) -> None:
    """The nice value of the session's autogroup: with autogroups on (Linux's default), CPU is shared
    between sessions first, so a process's own nice means little against another session."""
    try:
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))
    except OSError:
        pass
