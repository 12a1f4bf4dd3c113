"""The campaign's file system fills during a trial: the campaign stops inconclusive with one line naming the path
and ENOSPC, what it stored before is intact, and `campaign resume` finishes it once space is freed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.machine.processes import wait_until
from tests.conftest import cli, left_by, require_java

pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None,
                                 reason="mounting a size-limited tmpfs needs root")]


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=150m", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Another process takes what is left of the file system."""
    filler = disk / "filler"
    with filler.open("wb") as out:  # the campaign keeps writing meanwhile: take what is free, in ever smaller pieces
        size, chunk = 0, shutil.disk_usage(disk).free
        while chunk >= 4096:
            try:
                os.posix_fallocate(out.fileno(), size, chunk)
                size += chunk
            except OSError:
                chunk //= 2
    return filler


@pytest.mark.long
def test_a_full_disk_stops_the_campaign_in_one_line_and_resume_finishes_it(small_disk, spark_cluster):
    """On the session's cluster: the campaign's own files (runs, checkpoints, sinks) are on the small disk."""
    require_java()
    root = small_disk / "c"
    campaign = subprocess.Popen([sys.executable, "-m", "chaos", "campaign", "run", "--pipeline", "passthrough-append",
                                 "--trials", "2", "--events", "1000", "--no-shrink", "--seed", "4", "--out", str(root),
                                 "--cluster", spark_cluster.master_url],
                                cwd=small_disk, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = root / "trials" / "passthrough-append-000"
        assert wait_until(lambda: (first / "verdict.json").exists(), 300, 0.2), "the first trial never finished"
        assert wait_until(lambda: (root / "trials" / "passthrough-append-001" / "history.jsonl").exists(), 120, 0.1)
        time.sleep(3)  # the second trial is under way
        filler = fill(small_disk)
        _, err = campaign.communicate(timeout=600)
    finally:
        if campaign.poll() is None:
            campaign.kill()
    assert campaign.returncode == 3, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.startswith("harness failure")]
    assert len(lines) == 1 and "no space left on device (ENOSPC) writing " + str(root) in lines[0], err[-3000:]
    print(lines[0])  # the line the user sees (pytest -s)
    assert "Traceback" not in err and left_by(campaign.pid) == []
    filler.unlink()
    again = cli("analyze", str(root), cwd=small_disk)  # what was stored before judges to the same verdicts
    assert ", 0 changed, " in again.stdout and "unfinished (resume the campaign)" in again.stdout, again.stdout
    assert again.rc in (0, 1, 3) and "Traceback" not in again.stderr, again.stderr
    resumed = cli("campaign", "resume", str(root), cwd=small_disk, timeout=900)
    assert resumed.rc == 0, resumed.stdout + resumed.stderr
    summary = json.loads((root / "summary.json").read_text())
    assert summary["finished"] == 2 and summary["planned"] == 2
