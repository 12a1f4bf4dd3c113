"""The spare's hand-over rules, on a real process standing in for the spare's driver (no JVM)."""

from __future__ import annotations

import json
import sys

from chaos.procs import Owned, wait_until
from chaos.spare import Spare

SETTINGS = {"master": "spark://127.0.0.1:7077", "java_options": "-XX:+UseSerialGC", "class_archive": None,
            "cores_max": 2}
# Like chaos.driver --spare: catch SIGUSR1, say "ready" in its folder (the last argument), wait.
WAITER = ("import pathlib, signal, sys; signal.signal(signal.SIGUSR1, lambda *_: sys.exit(7)); "
          "pathlib.Path(sys.argv[-1], 'ready').touch(); signal.pause()")


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
