"""A trial's pre-warmed drivers: the standby that takes over a killed driver, and when the trial boots the
next trial's spares (chaos/driver/booted_ahead.py).

A standby is the next incarnation's driver, booted with its JVM, session and executors and then held
(``python -m chaos.driver.process ... --standby``); SIGUSR1 starts its query from the checkpoint. It costs a
second application on the trial's 2 cores, so it is booted only while a driver kill is still ahead:
the first beside the trial's first driver, later ones once the active driver has committed a batch (not
beside its recovery), or, with another kill ahead, in the downtime of a kill (``boot_next``), when the
dead application's cores are free. A driver kill at a phase where Spark is held waits until the standby
is warm (``await_ready``), so the kill lands at the same logical point and the takeover is measured, not
the standby's boot.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any, Protocol

from chaos.machine.processes import Group
from chaos.run.services import TrialServices


class TrialSide(Protocol):
    """What the standbys read and call of their trial (``chaos.run.trial.Trial`` is one)."""

    h: TrialServices
    dir: Path
    incarnation: int
    config: dict
    cores_max: int | None
    upgraded: Any
    controller: Any
    history: Any
    nemesis: Any
    pipeline: Any
    scenario: Any
    committed_by: int | None

    def spawn_driver(self, *args: Any, **kwargs: Any) -> Any: ...

STANDBY_WAIT = 90.0  # longest a held driver waits for its standby to be warm before the kill


class Standbys:
    """The standby (incarnation + 1) and the next standby (incarnation + 2, booted in a downtime) of a trial."""

    def __init__(self, trial: TrialSide, wanted: bool) -> None:
        self.trial = trial
        self.wanted = wanted  # a driver kill is planned before any upgrade, on a harness with standbys
        self.standby: Group | None = None
        self.next: Group | None = None
        self.spares_booted = False  # the next trial's spares, once per trial (``keep_spares``)

    def await_ready(self, detail: dict) -> None:
        """Before a driver kill at a phase where Spark is held (not one the watcher saw in the checkpoint):
        wait until the standby holds executors with their Python workers (chaos.driver.process.stand_by)."""
        standby, t = self.standby, self.trial
        if standby is None or detail.get("source") == "watcher":
            return
        incarnation = t.incarnation + 1
        deadline = time.monotonic() + STANDBY_WAIT
        while (incarnation not in t.controller.standby_ready and standby.alive()
               and time.monotonic() < deadline):
            time.sleep(0.05)

    def take_over(self) -> tuple[Group | None, str]:
        """Start the standby's query (SIGUSR1) as the new incarnation: ``(its group, "")``, or ``(None, why)``
        when there is none or it died while waiting. A standby booted in the downtime becomes the next."""
        standby, self.standby = self.standby, self.next
        self.next = None
        if standby is not None and standby.alive():
            standby.signal_leader(signal.SIGUSR1)
            return standby, ""
        if standby is not None:  # it died while waiting: forget it, start cold
            self.trial.h.owned.forget(standby)
            return None, "its standby died while waiting"
        return None, ""

    def keep(self) -> None:
        """Boot the next incarnation ahead: the first beside the first driver, later ones once the active
        driver has committed a batch, and only while a driver kill is still ahead."""
        t = self.trial
        if (self.standby is None and self.wanted and t.upgraded is None
                and any(f.action == "kill-driver" for f in t.controller.unfired())
                and (t.incarnation == 0 or t.committed_by == t.incarnation)):
            incarnation = t.incarnation + 1
            spare = (t.h.spares.take(t.config, t.pipeline.boot_conf(), standby=True)
                     if t.cores_max is None else None)
            if spare is not None:  # booted during the previous trial's tail: it only warms up now
                self.standby = spare.hand_over(t.dir, incarnation, standby=True)
                spare.link_log(t.dir / "logs" / f"driver-{incarnation}.log")
                t.history.add("driver", event="standby", incarnation=incarnation, pid=self.standby.pid,
                              spare=spare.folder.name)
                return
            self.standby = t.spawn_driver(incarnation, standby=True)
            t.history.add("driver", event="standby", incarnation=incarnation, pid=self.standby.pid)

    def boot_next(self) -> None:
        """At a driver kill that a standby will take over, with another driver kill ahead: boot that one's
        standby now, in the downtime, rather than after the takeover's first commit, beside the trial's
        batches: it is then warm before the next kill instead of holding it."""
        t = self.trial
        ends = sorted((f for f in t.controller.unfired() if f.action in ("kill-driver", "stop-driver")),
                      key=lambda f: f.batch)
        kill = t.nemesis.driver_kill
        if (self.standby is not None and self.standby.alive() and self.next is None
                and t.cores_max is None and kill is not None and kill.action == "kill-driver"
                and ends and ends[0].action == "kill-driver"):  # a stop-driver first would rescale: no standby
            incarnation = t.incarnation + 2
            self.next = t.spawn_driver(incarnation, standby=True)
            t.history.add("driver", event="standby", incarnation=incarnation, pid=self.next.pid)

    def keep_spares(self, at_kill: bool = False) -> None:
        """Boot the next trial's spares once this one's last driver runs: no driver kill ahead (nothing else
        will boot), no standby, and the active driver has committed a batch. With a recycled driver
        (``recycle`` in driver.json: it will be the next trial's first) that is the spare standby only, and
        then already at the last driver kill (``at_kill``, in its downtime): the next trial's first kill
        comes a few batches after its start, and the spare, niced, must be warm by then."""
        t = self.trial
        if not t.h.spares.enabled or self.spares_booted:
            return
        recycled = bool(t.config.get("recycle"))
        if at_kill:
            if not recycled:
                return
        elif self.standby is not None or t.committed_by != t.incarnation:
            return
        if any(f.action == "kill-driver" for f in t.controller.unfired()):  # checked last: it runs every 0.1 s
            return
        self.spares_booted = True
        for spare, role in t.h.boot_spares(t.scenario.workers, driver=not recycled):
            t.history.add("driver", event="spare", folder=spare.folder.name, pid=spare.group.pid, role=role)

    def drop(self) -> None:
        """Stop both standbys (a clean stop, a rescale or the trial's end: none of them serves what follows)."""
        for group in (self.standby, self.next):
            if group is not None:
                group.terminate(5.0)
                self.trial.h.owned.forget(group)
        self.standby = self.next = None

    def kill(self) -> None:
        """Interrupted: the user is waiting."""
        for group in (self.standby, self.next):
            if group is not None:
                group.kill()

    def cold_reason(self) -> str:
        """Why the trial's current incarnation boots a JVM and a session now (recorded with its start)."""
        t = self.trial
        if not t.h.standby:
            return "pre-warmed drivers are off (--no-standby)"
        if t.upgraded is not None:
            return f"it runs on PySpark {t.upgraded} after the upgrade: no standby is booted on another Spark"
        if t.incarnation == 0:
            if t.pipeline.boot_conf():
                return "the pipeline sets JVM options at boot (boot_conf): no spare was booted with them"
            if not t.h.spares.enabled:
                return "a run's first driver: a spare is booted only during a previous trial"
            return "no spare was ready: the run's first trial, or the previous trial ended before booting one"
        if not self.wanted:
            return "the schedule kills no driver: no standby was booted"
        return "no standby was ready: one boots only after the active driver's first commit"
