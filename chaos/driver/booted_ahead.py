"""The harness's drivers booted ahead of their trial: the next trial's first driver and its first standby
(each a ``chaos.driver.spare.Spare``), and a trial's last driver recycled as the next trial's first.

A spare boots during a trial's tail, once no driver kill is ahead, at a lower priority, and is handed
to the next trial if it booted like that trial's first driver would (``Spare.fits``). A recycled
driver has stopped its query and dumped its state, as any last driver does, and then waits in its
folder instead of exiting (chaos.driver.process.serve): its JVM, session and executors are not booted again.
It runs at most ``MAX_RECYCLED_TRIALS`` more trials: each leaves a stopped query and a session behind
in its JVM (Spark keeps a session's listener bus registered).
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

from chaos.driver.launch import driver_argv
from chaos.driver.spare import Spare, recycle_folder
from chaos.machine.processes import Group, Owned, wait_until

MAX_RECYCLED_TRIALS = 20


class Spares:
    """The spare driver, the spare standby and the recycled drivers of one harness."""

    def __init__(self, owned: Owned, folder: Path, enabled: bool, recycle: bool) -> None:
        self.owned = owned
        self.folder = folder  # spare-<n>/ and recycled-<pid>/ folders; emptied at the harness's start and close
        self.enabled = enabled
        self.recycle = enabled and recycle
        self.driver: Spare | None = None  # the next trial's first driver
        self.standby: Spare | None = None  # the next trial's first standby (``with_standby``)
        self.with_standby = False  # set by the harness once it knows its cluster's cores (Harness.standby_spares)
        self.booted = 0
        self.recycled: dict[int, int] = {}  # pid of a recycled driver -> trials it ran after its first
        self.next_trial = True  # False during a run's last trial: no spare is booted (or kept) for nobody
        self.env: dict[str, str] | None = None
        self.cwd: Path | None = None

    def boot(self, settings: dict, driver: bool = True) -> list[tuple[Spare, str]]:
        """Boot the next trial's first driver now, in the background, and with ``with_standby`` its first
        standby beside it; ``driver=False``: the standby only (the trial's last driver will be recycled).
        Returns what it booted."""
        if not self.enabled or not self.next_trial:
            return []
        booted = []
        if driver and (self.driver is None or not self.driver.group.alive()):
            self.driver = self._boot_one(settings)
            booted.append((self.driver, "driver"))
        if self.with_standby and (self.standby is None or not self.standby.group.alive()):
            self.standby = self._boot_one({**settings, "role": "standby"})
            booted.append((self.standby, "standby"))
        return booted

    def _boot_one(self, settings: dict) -> Spare:
        self.booted += 1
        return Spare.boot(self.owned, self.folder / f"spare-{self.booted}", settings, driver_argv(), self.env,
                          cwd=self.cwd)

    def take(self, config: dict, boot_conf: dict, standby: bool = False) -> Spare | None:
        """The spare (``standby``: the spare standby), if it boots like a cold driver of ``config`` would;
        else stop it (its executors would hold the cores this trial's standby needs)."""
        if standby:
            spare, self.standby = self.standby, None
        else:
            spare, self.driver = self.driver, None
        if spare is None:
            return None
        if spare.fits(config, boot_conf):
            return spare
        self.owned.end(spare.group, 5.0)
        return None

    def recycle_driver(self, group: Group, log: Path, grace: float, keep: bool) -> None:
        """Stop a trial's last driver whose driver.json names a ``recycle`` folder: SIGUSR2 stops its query
        and dumps its state as for any driver, then it waits there as a spare instead of exiting
        (chaos.driver.process.serve). ``keep``: it becomes the next trial's first driver (``self.driver``); else,
        or if it did not get there within ``grace``, its group is killed."""
        folder = recycle_folder(self.folder, group.pid)
        for name in ("ready", "listening", "go.json"):  # from its previous recycling
            (folder / name).unlink(missing_ok=True)
        group.signal_leader(signal.SIGUSR2)
        wait_until(lambda: (folder / "ready").exists() or not group.alive(), grace)
        uses = self.recycled.get(group.pid, 0)
        if (keep and group.alive() and (folder / "ready").exists() and self.driver is None
                and uses < MAX_RECYCLED_TRIALS):
            self.recycled[group.pid] = uses + 1
            self.driver = Spare(group, folder, json.loads((folder / "spare.json").read_text()))
            self.driver.adopt_log(log)
            return
        self.owned.end(group)

    def live_logs(self) -> list[Path]:
        """Logs a process of ours goes on writing after a trial (a recycled driver's)."""
        return [self.driver.log] if self.driver is not None else []
