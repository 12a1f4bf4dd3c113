"""Two campaigns at once on one machine, in two directories, started within a second of each other: both
finish with the verdicts their schedules give alone (deterministic ones), and neither touches the other's
cluster, spares, scratch or PostgreSQL (the class archive cache is shared on purpose)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.clusters.postgres import find_bindir
from tests.conftest import left_by, require_java

pytestmark = [pytest.mark.spark, pytest.mark.long,  # the long tier: pytest -m long
              pytest.mark.skipif(find_bindir() is None, reason="no PostgreSQL server binaries on this machine")]

# Deterministic verdicts: a driver killed after the sink wrote always duplicates an append, never the
# rows of a sink that records each batch id with its rows.
CAMPAIGNS = {
    "append": ["--pipeline", "pg-append", "--example", "kill-driver@1:sink-done kill-driver@2:sink-done"],
    "upsert-by-batch": ["--pipeline", "pg-upsert-by-batch", "--example", "kill-driver@1:sink-done"],
}
COMMON = ["--trials", "1", "--events", "800", "--no-shrink", "--seed", "5"]


def start(name: str, root: Path) -> subprocess.Popen:
    root.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "chaos", "campaign", "run", *CAMPAIGNS[name], *COMMON,
                             "--out", str(root / name)], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def verdicts(campaign: Path) -> dict[str, str]:
    return {d.name: json.loads((d / "verdict.json").read_text())["verdict"]
            for d in sorted((campaign / "trials").iterdir())}


def finish(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=900)
    assert proc.returncode in (0, 1), err[-2000:]  # a violation of exactly-once is a result
    assert left_by(proc.pid) == []
    return err


def test_two_campaigns_at_once_give_the_verdicts_their_schedules_give_alone(tmp_path):
    require_java()
    first = start("append", tmp_path / "together")
    time.sleep(0.5)
    second = start("upsert-by-batch", tmp_path / "together")
    errs = [finish(first), finish(second)]
    assert set(verdicts(tmp_path / "together" / "append").values()) == {"at-least-once"}
    assert set(verdicts(tmp_path / "together" / "upsert-by-batch").values()) == {"exactly-once"}
    assert all(len(verdicts(tmp_path / "together" / name)) == 1 for name in CAMPAIGNS)
    # Each ran its own cluster (its own master) and its own PostgreSQL server.
    masters = [next(ln for ln in err.splitlines() if ln.startswith("cluster spark://")) for err in errs]
    assert masters[0] != masters[1], masters
    for name in CAMPAIGNS:
        assert (tmp_path / "together" / name / "harness").is_dir()
