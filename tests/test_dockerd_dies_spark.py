"""dockerd dies mid-trial on ``--cluster docker``: the trial is inconclusive in one line, nothing of the harness
runs on, and once dockerd is back the next start removes the containers and network the trial left.

The test runs a dockerd of its own (its own socket, data root, exec root, pidfile and address pool, reached through
``DOCKER_HOST``), kills that one by its pid, and never touches the machine's dockerd. It needs root, dockerd and
iptables, as the other Docker tests do; the node image comes from ``streamchaos image build`` into the test's
daemon (the root filesystem the machine's build kept, chaos.clusters.docker.image.rootfs_cache, or debootstrap once).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

import psutil
import pytest

from chaos.clusters.docker.containers import OWNER_LABEL
from chaos.machine.processes import wait_until
from tests.conftest import cli, left_by, require_java

pytestmark = [pytest.mark.spark, pytest.mark.long,  # the long tier: pytest -m long
              pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("dockerd") or not shutil.which("iptables"),
                                 reason="a dockerd of the test's own needs root, dockerd and iptables")]

POOL = "10.213.0.0/16"  # the test daemon's networks: apart from the machine's dockerd's 172.17-31 pools


class OwnDockerd:
    """A dockerd started, killed and started again by the test, on files of its own."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="scd-", dir="/tmp"))  # short: containerd's socket path is
        self.socket = self.root / "docker.sock"                           # limited to 108 bytes
        self.host = f"unix://{self.socket}"
        self.pidfile = self.root / "docker.pid"
        self.proc: subprocess.Popen | None = None
        self.rule = ["FORWARD", "-s", POOL, "-d", POOL, "-j", "ACCEPT", "-m", "comment", "--comment",
                     f"streamchaos-test-dockerd-{os.getpid()}"]

    def start(self) -> None:
        self.pidfile.unlink(missing_ok=True)
        log = (self.root / "dockerd.log").open("ab")
        # No iptables of its own (the machine's dockerd owns the DOCKER chains) and no default bridge; the one rule
        # it needs, traffic within its pool past a FORWARD policy of DROP (br_netfilter), is the test's own.
        self.proc = subprocess.Popen(
            ["dockerd", "--host", self.host, "--data-root", str(self.root / "data"),
             "--exec-root", str(self.root / "exec"), "--pidfile", str(self.pidfile), "--bridge", "none",
             "--iptables=false", "--ip6tables=false", "--default-address-pool", f"base={POOL},size=24"],
            stdout=log, stderr=log, start_new_session=True)
        assert wait_until(self.answers, 60, 0.5), (self.root / "dockerd.log").read_text()[-2000:]

    def answers(self) -> bool:
        import docker

        try:
            with closing(docker.DockerClient(base_url=self.host, timeout=5)) as found:
                return found.ping()
        except Exception:  # not listening yet
            return False

    def kill(self) -> None:
        """SIGKILL, as an OOM killer or a crash would: its containerd goes with it, the shims stay."""
        os.kill(int(self.pidfile.read_text()), signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        for line in subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines():
            if "containerd-shim" in line and str(self.root) in line:  # a shim of this daemon's containers
                os.kill(int(line.split()[0]), signal.SIGKILL)
        subprocess.run(["umount", "-R", str(self.root / "data")], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def owned(self) -> list[str]:
        """The names of the containers and networks with the harness's owner label that this daemon holds."""
        import docker

        with closing(docker.DockerClient(base_url=self.host, timeout=30)) as found:
            return ([c.name for c in found.containers.list(all=True, filters={"label": OWNER_LABEL})]
                    + [n.name for n in found.networks.list(filters={"label": OWNER_LABEL})])


@pytest.fixture(scope="module")
def own_dockerd():
    require_java()
    daemon = OwnDockerd()
    subprocess.run(["iptables", "-I", *daemon.rule], check=True)
    try:
        daemon.start()
        built = cli("image", "build", cwd=daemon.root, env={**os.environ, "DOCKER_HOST": daemon.host}, timeout=1800)
        assert built.rc == 0, built.stderr[-2000:]
        yield daemon
    finally:
        daemon.stop()
        subprocess.run(["iptables", "-D", *daemon.rule], check=False)


def committed(history: Path) -> int:
    """How many batches the trial has committed so far."""
    try:
        lines = history.read_text().splitlines()
    except OSError:
        return 0
    return sum(1 for ln in lines if ln.strip().endswith("}") and (e := json.loads(ln))["kind"] == "phase"
               and e["phase"] == "committed")


def test_dockerd_killed_mid_trial_is_inconclusive_and_its_nodes_are_reaped_once_it_is_back(own_dockerd, tmp_path):
    env = {**os.environ, "DOCKER_HOST": own_dockerd.host}
    machines = [p.pid for p in psutil.process_iter(["name", "cmdline"])  # the dockerd .ci/run started, if any
                if p.info["name"] == "dockerd" and own_dockerd.host not in " ".join(p.info["cmdline"] or [])]
    run_dir = tmp_path / "run"
    trial = subprocess.Popen([sys.executable, "-m", "chaos", "trial", "key-count", "--cluster", "docker",
                              "--events", "2000", "--fault", "kill-node@6:sink-write", "--keep", str(run_dir)],
                             cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: committed(run_dir / "history.jsonl") >= 2 or trial.poll() is not None, 300, 0.2)
        assert trial.poll() is None, trial.communicate()
        own_dockerd.kill()  # batches 2-5 still to come, and the node kill at 6
        out, err = trial.communicate(timeout=600)
    finally:
        if trial.poll() is None:
            trial.kill()
    assert trial.returncode == 3, out + err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    failure = [ln for ln in lines if ln.startswith("harness failure")]
    assert failure == [lines[-1]], err
    assert f"the Docker daemon at {own_dockerd.host} stopped answering during the trial" in failure[0], err
    print(failure[0])  # the line the user sees (pytest -s)
    assert "Traceback" not in err and not (run_dir / "result.json").exists() and "verdict" not in out
    assert left_by(trial.pid) == []  # no driver, executor or Python worker of the trial runs on

    own_dockerd.start()  # back, holding what the dead trial made
    left = own_dockerd.owned()
    assert len(left) >= 4, left  # master, two workers, their network
    t0 = time.monotonic()
    reaped = cli("reap", cwd=tmp_path, env=env)
    assert reaped.rc == 0 and f"{len(left)} container(s) and network(s)" in reaped.stdout, reaped.stdout
    assert own_dockerd.owned() == []
    assert all(psutil.pid_exists(pid) for pid in machines)  # the machine's dockerd was never touched
    print(f"reaped {left} in {time.monotonic() - t0:.1f}s")
