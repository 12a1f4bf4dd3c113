"""A campaign on a real two-node Ray cluster on this machine, loopback only: a trial on the second node lost
mid-trial and run again on the head, a killed head, Ctrl-C; nothing of ours left on either node."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from chaos.machine.processes import OWNER_VAR, wait_until
from tests.conftest import REPO, cli, require_java

pytestmark = [pytest.mark.spark, pytest.mark.long]  # the long tier: pytest -m long
ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install -e '.[ray]'")

PLAN = ["--pipeline", "passthrough-append", "--events", "1000", "--trials", "2", "--seed", "3"]


@pytest.fixture(scope="module")
def ray_cluster():
    """Ray's own multi-node test cluster: a head and a second node, each a raylet of its own, on 127.0.0.1 (Ray
    keeps that address only with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0; its processes inherit it from here)."""
    require_java()
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                            "node_ip_address": "127.0.0.1"})
    cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        cluster.shutdown()


def raylet_pid(node) -> int:
    from ray._private import ray_constants

    return node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid


def ours_on_ray() -> list[str]:
    """Processes of a harness other than this test session's (a node's actor started them), the actors' reapers
    and scratch directories: what a Ray campaign must not leave behind."""
    me = f"{os.getpid()}:"
    left = []
    for proc in psutil.process_iter(["pid"]):
        try:
            tag = proc.environ().get(OWNER_VAR)
            cmd = " ".join(proc.cmdline())
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
        except (psutil.Error, OSError):
            continue
        if (tag is not None and not tag.startswith(me)) or "chaos.run.reaper" in cmd:
            left.append(f"{proc.pid} {cmd[:120]}")
    left += [str(p) for p in Path(tempfile.gettempdir()).glob("streamchaos-ray-*")]
    return left


def nothing_left() -> bool:
    return wait_until(lambda: not ours_on_ray(), 60, 0.5)


def start_campaign(tmp_path: Path, address: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "chaos", "campaign", "run", *PLAN, "--ray", address,
                             "--out", "c", *extra], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def trial_running_under(raylet: int) -> bool:
    """A trial runs under that node's harness actor (a child of its raylet): the actor holds the trial's
    history.jsonl open. Not merely a driver process there: the harness boots the next trial's spare driver before
    its start is done, and a node lost then is a harness that did not start, not a trial lost mid-way."""
    try:
        for actor in psutil.Process(raylet).children():
            if any(f.path.endswith("/history.jsonl") for f in actor.open_files()):
                return True
    except psutil.Error:
        return False
    return False


def results(root: Path) -> dict[str, dict]:
    return {d.name: json.loads((d / "result.json").read_text()) for d in (root / "trials").iterdir()
            if (d / "result.json").exists()}


def test_a_node_lost_mid_trial_leaves_that_trial_lost_and_run_once_more_elsewhere(ray_cluster, tmp_path):
    worker = next(iter(ray_cluster.worker_nodes))
    raylet = raylet_pid(worker)
    campaign = start_campaign(tmp_path, ray_cluster.address)
    try:
        assert wait_until(lambda: trial_running_under(raylet), 300, 0.5), "no trial reached the second node"
        os.kill(raylet, signal.SIGKILL)  # the node is gone: its raylet, then its workers with it
        out, err = campaign.communicate(timeout=900)
    finally:
        if campaign.poll() is None:
            campaign.kill()
        ray_cluster.remove_node(worker, allow_graceful=False)
        ray_cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")  # two nodes again for the next test
    assert campaign.returncode == 0, out + err
    lost = json.loads((tmp_path / "c" / "lost.json").read_text())
    assert len(lost) == 1 and lost[0]["rerun"] is True, lost
    assert "running it once more on another node" in err
    assert "2 node(s), one harness each" in err
    found = results(tmp_path / "c")
    assert len(found) == 2 and all((tmp_path / "c" / "trials" / t / "verdict.json").exists() for t in found)
    assert found[lost[0]["trial"]]["node"]["id"] != lost[0]["node"]  # each trial records its node
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summary["finished"] == 2 and summary["lost"][0]["trial"] == lost[0]["trial"]
    assert summary["pipelines"]["passthrough-append"]["trials"] == 2
    assert "<th>Ray node</th>" in (tmp_path / "c" / "report.html").read_text()  # where each trial ran
    # The campaign's directory is an ordinary campaign: analyze re-judges it to the same verdicts.
    again = cli("analyze", "c", cwd=tmp_path)
    assert again.rc == 0 and "0 changed" in again.stdout, again.stdout + again.stderr
    assert nothing_left(), ours_on_ray()


def test_a_killed_head_leaves_nothing_and_resume_finishes_on_ray(ray_cluster, tmp_path):
    campaign = start_campaign(tmp_path, ray_cluster.address)
    try:
        assert wait_until(lambda: any(trial_running_under(raylet_pid(n))
                                      for n in [ray_cluster.head_node, *ray_cluster.worker_nodes]), 300, 0.5)
        campaign.kill()  # SIGKILL: Ray kills the actors it owned, their reapers what the harnesses started
        campaign.wait(30)
    finally:
        if campaign.poll() is None:
            campaign.kill()
    assert nothing_left(), ours_on_ray()
    resumed = cli("campaign", "resume", "c", "--ray", ray_cluster.address, cwd=tmp_path, timeout=900)
    assert resumed.rc == 0, resumed.stdout + resumed.stderr
    assert json.loads((tmp_path / "c" / "summary.json").read_text())["finished"] == 2
    assert nothing_left(), ours_on_ray()


def test_ctrl_c_stops_the_campaign_and_every_nodes_harness(ray_cluster, tmp_path):
    campaign = start_campaign(tmp_path, ray_cluster.address)
    try:
        assert wait_until(lambda: any(trial_running_under(raylet_pid(n))
                                      for n in [ray_cluster.head_node, *ray_cluster.worker_nodes]), 300, 0.5)
        campaign.send_signal(signal.SIGINT)
        _, err = campaign.communicate(timeout=120)
    finally:
        if campaign.poll() is None:
            campaign.kill()
    assert campaign.returncode == 130 and "Traceback" not in err, err
    assert nothing_left(), ours_on_ray()


def test_without_ray_or_a_cluster_the_command_says_what_to_do(tmp_path):
    """No Ray listening there: one line, exit 2, no campaign directory."""
    run = cli("campaign", "run", *PLAN, "--ray", "127.0.0.1:9", "--out", "c", cwd=tmp_path, timeout=300)
    assert run.rc == 2 and "--ray 127.0.0.1:9: no Ray cluster answers there" in run.stderr, run.stderr
    assert len([ln for ln in run.stderr.splitlines() if ln.strip()]) == 1
    assert REPO.exists() and not (tmp_path / "c").exists()
