"""The spare's hand-over rules, on a real process standing in for the spare's driver (no JVM)."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

from chaos.driver.spare import Spare, can_renice
from chaos.machine.processes import Owned, wait_until
from chaos.machine.spark import driver_scratch, sweep_driver_scratch

SETTINGS = {"master": "spark://127.0.0.1:7077", "java_options": "-XX:+UseSerialGC", "class_archive": None,
            "locality_wait": "0s", "cores_max": 2, "interpreted_sql": True}
# Like chaos.driver.process --spare: catch SIGUSR1, say "listening" and "ready" in its folder (the last argument), wait.
WAITER = ("import pathlib, signal, sys; signal.signal(signal.SIGUSR1, lambda *_: sys.exit(7)); "
          "pathlib.Path(sys.argv[-1], 'listening').touch(); pathlib.Path(sys.argv[-1], 'ready').touch(); "
          "signal.pause()")
# A standby spare: the first SIGUSR1 hands it over ("handed"), the second makes it take over (exit 7).
TWICE = ("import pathlib, signal, sys; folder = pathlib.Path(sys.argv[-1]); n = []\n"
         "def got(*_):\n    n.append(1); (folder / 'handed').touch()\n    if len(n) == 2: sys.exit(7)\n"
         "signal.signal(signal.SIGUSR1, got); (folder / 'listening').touch(); (folder / 'ready').touch()\n"
         "while True: signal.pause()")
# A spare that is still importing when the trial starts: it catches SIGUSR1 only after 2 s.
SLOW = ("import pathlib, signal, sys, time; time.sleep(2); signal.signal(signal.SIGUSR1, lambda *_: sys.exit(7)); "
        "pathlib.Path(sys.argv[-1], 'listening').touch(); signal.pause()")


def test_a_spare_fits_only_a_first_driver_that_would_boot_the_same_way(tmp_path):
    owned = Owned()
    try:
        spare = Spare.boot(owned, tmp_path / "spare-1", SETTINGS, [sys.executable, "-c", WAITER], env=None)
        assert wait_until(lambda: (tmp_path / "spare-1" / "ready").exists(), 10)
        assert json.loads((tmp_path / "spare-1" / "spare.json").read_text()) == SETTINGS
        config = {**SETTINGS, "pipeline": "api-count", "checkpoint": "/x"}
        assert spare.fits(config, boot_conf={})
        assert not spare.fits({**config, "cores_max": 1}, boot_conf={})  # a rescaled or smaller trial
        assert not spare.fits({**config, "java_options": ""}, boot_conf={})  # another harness's JVM flags
        assert not spare.fits({**config, "locality_wait": None}, boot_conf={})  # Harness(quick_scheduling=False)
        assert not spare.fits({**config, "interpreted_sql": False}, boot_conf={})  # Harness(quick_sql=False)
        assert not spare.fits(config, boot_conf={"spark.driver.extraClassPath": "hooks.jar"})  # JVM conf at boot
        assert not spare.fits({**config, "spark_conf": {"spark.sql.shuffle.partitions": "4"}}, boot_conf={})
        group = spare.hand_over(tmp_path / "run", 0)
        assert json.loads((tmp_path / "spare-1" / "go.json").read_text()) == {"run_dir": str(tmp_path / "run"),
                                                                              "incarnation": 0}
        assert group.proc.wait(10) == 7  # the signal reached it
        assert not spare.fits(config, boot_conf={})  # a dead spare fits nothing
    finally:
        owned.stop_all()


def test_the_run_directory_keeps_the_spares_log_as_its_own_file(tmp_path):
    folder = tmp_path / "spare-2"
    folder.mkdir()
    (folder / "driver.log").write_text("booted\nran the trial\n")
    spare = Spare(group=None, folder=folder, settings=SETTINGS)  # type: ignore[arg-type]
    target = tmp_path / "run" / "logs" / "driver-0.log"
    target.parent.mkdir(parents=True)
    spare.link_log(target)
    assert target.is_symlink() and target.read_text() == "booted\nran the trial\n"
    Spare.keep_log(target)
    assert target.is_file() and not target.is_symlink() and target.read_text().endswith("ran the trial\n")
    assert not (folder / "driver.log").exists()
    Spare.keep_log(tmp_path / "run" / "logs" / "driver-1.log")  # a cold driver's log: nothing to do


# A driver that lives through several trials: it writes "trial <i>" once the folder (last argument) has step-<i>.
LIVES_ON = ("import pathlib, sys, time; folder = pathlib.Path(sys.argv[-1])\n"
            "for i in range(3):\n"
            "    while not (folder / f'step-{i}').exists(): time.sleep(0.02)\n"
            "    print(f'trial {i}', flush=True); (folder / f'wrote-{i}').touch()\n"
            "time.sleep(60)")


def test_a_recycled_drivers_log_is_split_between_the_trials_it_ran(tmp_path):
    """The process keeps its open log across trials (moved, never reopened); each run directory keeps
    exactly the part written while that trial ran, and the last one the rest once the process is gone."""
    steps = tmp_path / "steps"
    steps.mkdir()
    logs = [tmp_path / f"run-{k}" / "logs" / f"driver-{k}.log" for k in range(3)]
    for log in logs:
        log.parent.mkdir(parents=True)
    owned = Owned()
    try:
        group = owned.spawn("driver-0", [sys.executable, "-c", LIVES_ON, str(steps)], log_path=logs[0])

        def step(i: int) -> None:
            (steps / f"step-{i}").touch()
            assert wait_until(lambda: (steps / f"wrote-{i}").exists(), 10)

        step(0)
        folder = tmp_path / "spares" / f"recycled-{group.pid}"
        folder.mkdir(parents=True)
        spare = Spare(group, folder, SETTINGS)
        spare.adopt_log(logs[0])  # a cold driver's own file moves into the folder, the process follows it
        assert logs[0].is_symlink() and spare.log == folder / "driver.log"
        Spare.keep_log(logs[0], live=[spare.log])
        assert logs[0].read_text() == "trial 0\n" and not logs[0].is_symlink()
        step(1)
        spare.link_log(logs[1])
        spare.adopt_log(logs[1])  # recycled again: it goes on writing to the same file
        Spare.keep_log(logs[1], live=[spare.log])
        assert logs[1].read_text() == "trial 1\n"
        step(2)
        spare.link_log(logs[2])
        group.kill()  # a fault killed it in its third trial
        Spare.keep_log(logs[2], live=[])
        assert logs[2].read_text() == "trial 2\n"
        assert list(folder.iterdir()) == [], "the spent log and its mark stay behind"
        assert logs[0].read_text() == "trial 0\n"
    finally:
        owned.stop_all()


def test_a_hand_over_waits_until_the_spare_catches_the_signal(tmp_path):
    owned = Owned()
    try:
        spare = Spare.boot(owned, tmp_path / "spare-1", SETTINGS, [sys.executable, "-c", SLOW], env=None)
        group = spare.hand_over(tmp_path / "run", 0)  # at once: the spare has not installed its handler yet
        assert group.proc.wait(10) == 7, "SIGUSR1 killed a spare that was still starting"
    finally:
        owned.stop_all()


def test_a_standby_spare_boots_in_a_low_priority_session_and_gets_its_share_back_at_the_hand_over(tmp_path):
    """Its boot runs during the previous trial's tail; the hand-over makes it an ordinary standby, which
    starts the query at a second signal."""
    owned = Owned()
    try:
        spare = Spare.boot(owned, tmp_path / "spare-2", {**SETTINGS, "role": "standby"},
                           [sys.executable, "-c", TWICE], env=None)
        autogroup = Path(f"/proc/{spare.group.pid}/autogroup")
        renices = autogroup.exists() and can_renice()
        if renices:
            assert autogroup.read_text().split()[-1] == "10"
        assert wait_until(lambda: (tmp_path / "spare-2" / "ready").exists(), 10)
        group = spare.hand_over(tmp_path / "run", 1, standby=True)
        assert json.loads((tmp_path / "spare-2" / "go.json").read_text()) == {
            "run_dir": str(tmp_path / "run"), "incarnation": 1, "standby": True}
        assert wait_until(lambda: (tmp_path / "spare-2" / "handed").exists(), 10)
        assert group.alive()
        if renices:
            assert autogroup.read_text().split()[-1] == "0"
        group.signal_leader(signal.SIGUSR1)  # the active driver died: take over
        assert group.proc.wait(10) == 7
    finally:
        owned.stop_all()


# Like chaos.driver.process.serve at the harness's stop (SIGUSR2): wait in spares/recycled-<pid> (the last argument is
# the spares folder) with spare.json and "ready", as often as it is stopped.
RECYCLABLE = ("import json, os, pathlib, signal, sys\n"
              "folder = pathlib.Path(sys.argv[-1], f'recycled-{os.getpid()}')\n"
              "def stopped(*_):\n"
              "    folder.mkdir(parents=True, exist_ok=True)\n"
              "    (folder / 'spare.json').write_text(json.dumps({'cores_max': 2}))\n"
              "    (folder / 'ready').touch()\n"
              "signal.signal(signal.SIGUSR2, stopped)\n"
              "print('trial 0', flush=True)\n"
              "while True: signal.pause()")


def test_a_recycled_driver_is_kept_a_bounded_number_of_times_and_only_when_asked(tmp_path, monkeypatch):
    from chaos.driver import booted_ahead as spares_module
    from chaos.run.harness import Harness

    monkeypatch.setattr(spares_module, "MAX_RECYCLED_TRIALS", 2)
    harness = Harness(workdir=tmp_path / "harness", spare=True)  # not entered: no cluster, only its rules
    spares = harness.spares.folder
    try:
        group = harness.owned.spawn("driver-2", [sys.executable, "-u", "-c", RECYCLABLE, str(spares)],
                                    log_path=tmp_path / "driver-2.log")
        assert wait_until(lambda: "trial 0" in (tmp_path / "driver-2.log").read_text(), 10)
        kept = None
        for k in range(2):  # kept twice: it becomes the next trial's first driver
            log = tmp_path / f"run-{k}" / "driver.log"
            log.parent.mkdir()
            if kept is not None:
                kept.link_log(log)
            else:
                log.write_text("")
                (tmp_path / "driver-2.log").replace(log)  # the trial's own file, as spawned
            harness.spares.recycle_driver(group, log, grace=10, keep=True)
            assert harness.spares.driver is not None and harness.spares.driver.group is group and group.alive()
            assert harness.spares.driver.folder == spares / f"recycled-{group.pid}" and log.is_symlink()
            kept, harness.spares.driver = harness.spares.driver, None  # handed to the next trial
        harness.spares.recycle_driver(group, tmp_path / "run-2.log", grace=10, keep=True)  # its third: enough
        assert harness.spares.driver is None and not group.alive() and group not in harness.owned.groups
        other = harness.owned.spawn("driver-0", [sys.executable, "-u", "-c", RECYCLABLE, str(spares)],
                                    log_path=tmp_path / "other.log")
        assert wait_until(lambda: "trial 0" in (tmp_path / "other.log").read_text(), 10)
        harness.spares.recycle_driver(other, tmp_path / "run-3.log", grace=10, keep=False)  # e.g. a stalled trial
        assert harness.spares.driver is None and not other.alive()
    finally:
        harness.owned.stop_all()


def test_a_dead_drivers_scratch_directory_is_swept_a_live_ones_stays(tmp_path):
    """Each driver JVM (and its executors) keeps temporary files in a directory named by its pid; a SIGKILLed
    one deletes nothing, so the harness removes the directories of drivers it no longer runs."""
    owned = Owned()
    live = owned.spawn("live", [sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for pid in (live.pid, 999_999_999):
            folder = driver_scratch(tmp_path, pid)
            (folder / "blockmgr-1").mkdir(parents=True)
            (folder / "liblz4-java-1.so").write_bytes(b"\0" * 1024)
        (tmp_path / "spark-other").mkdir()  # not a driver's: left to the harness's close
        assert sweep_driver_scratch(tmp_path, {g.pid for g in owned.groups}) == 1
        assert sorted(p.name for p in tmp_path.iterdir()) == [f"driver-{live.pid}", "spark-other"]
    finally:
        owned.stop_all()
