"""A trial a full disk stopped is the harness's failure, never a stalled pipeline: the drivers' logs or the free
space say so (chaos.run.trial.Trial._raise_if_disk_full), and chaos.campaign.runner turns the OSError into its one
line."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from chaos.run import trial as trial_module
from chaos.run.trial import Trial

JAVA = ("org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 times, "
        "most recent failure: java.io.IOException: No space left on device")


def a_trial(run_dir: Path, log: str) -> Trial:
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / "logs" / "driver-1.log").write_text("streamchaos: driver 1 up\n")
    (run_dir / "logs" / "driver-2.log").write_text(log)
    trial = Trial.__new__(Trial)  # only its directory matters here
    trial.dir = run_dir
    return trial


def test_a_drivers_enospc_message_makes_the_trial_the_harness_failure(tmp_path):
    trial = a_trial(tmp_path / "t", "batch 3\n" + JAVA + "\n")
    with pytest.raises(OSError) as raised:
        trial._raise_if_disk_full()
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(tmp_path / "t")


def test_a_stall_with_space_and_no_such_message_stays_the_pipelines(tmp_path):
    trial = a_trial(tmp_path / "t", "batch 3\njava.io.IOException: Connection reset by peer\n")
    trial._raise_if_disk_full()  # nothing raised: the verdict stands


def test_next_to_nothing_free_is_a_full_disk_whatever_the_logs_say(tmp_path, monkeypatch):
    trial = a_trial(tmp_path / "t", "batch 3\n")
    monkeypatch.setattr(trial_module, "DISK_FULL_BYTES", 1 << 62)  # more than any disk here has free
    with pytest.raises(OSError) as raised:
        trial._raise_if_disk_full()
    assert raised.value.errno == errno.ENOSPC
