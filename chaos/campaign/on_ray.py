"""A campaign on a Ray cluster: one long-lived harness per Ray node, trials handed out as nodes free up.

``campaign run --ray ADDRESS|auto`` keeps the campaign's head (plan, judging, shrinks, summary, report)
where the command runs and starts one ``NodeHarness`` actor on every alive node, pinned there. Each owns that
node's Spark cluster and pre-warmed drivers for the whole campaign, as one machine's harness does, so they
stay warm across trials. A trial runs in its actor's scratch directory and comes back through Ray as a tar
of its directory (no shared file system), unpacked into the campaign directory as it ends, then judged on
the head: ``campaign resume`` works as on one machine.

Ray never reruns a trial on its own (actors: ``max_restarts=0``, ``max_task_retries=0``). A node lost in the
middle of a trial leaves that trial ``lost`` (``lost.json``, and a line); it runs once more on another node.
Each actor starts ``chaos.run.reaper``: whatever its harness started dies with the actor, whether its node's
raylet died, the head was killed (Ray kills the actors it owned) or the user pressed Ctrl-C.

Ray is an optional extra (``pip install -e '.[ray]'``). On a loopback address (a cluster on this machine)
Ray must not pick another address of the machine: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` keeps its node
address at 127.0.0.1, as docs/scale.md explains.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import tarfile
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.campaign.runner import Runner
from chaos.errors import UserError
from chaos.machine import interrupt
from chaos.scenario.scenario import Scenario
from chaos.store.atomic import write_json

if TYPE_CHECKING:
    from chaos.campaign.stored import Campaign

INSTALL = "--ray needs Ray, an optional extra: pip install -e '.[ray]' (or pip install 'ray>=2.9')"
LOOPBACK = ("127.0.0.1", "localhost")
RAY_LOOPBACK = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray's node address stays the loopback one


def _target(address: str) -> str:
    """The ``HOST:PORT`` an address names (``auto``: RAY_ADDRESS, else the cluster ``ray start`` made here)."""
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS") or _current_cluster()
    return address.removeprefix("ray://")


def _current_cluster() -> str:
    """The address ``ray start`` on this machine wrote (what ``ray.init("auto")`` reads)."""
    path = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _answers(address: str) -> None:
    """Ray retries a silent address for minutes, logging each try: a plain TCP connect first says it at once."""
    host, _, port = _target(address).rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--ray {address}: give the Ray head's address as HOST:PORT (its GCS port, 6379 by default), "
                        "or auto for a cluster `ray start` made on this machine" if address != "auto" else
                        "--ray auto: no Ray cluster was started on this machine (`ray start --head`), and RAY_ADDRESS "
                        "is not set")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise UserError(f"--ray {address}: no Ray cluster answers there ({exc.strerror or exc}); start one with "
                        "`ray start --head`, or give its address as HOST:PORT") from None


def connect(address: str):
    """``ray`` connected to the cluster at ``address`` (``auto``: the one on this machine); one line if Ray is
    missing or nothing answers."""
    if _target(address).rpartition(":")[0] in LOOPBACK:
        os.environ[RAY_LOOPBACK] = "0"  # read when ray is first imported
    try:
        import ray
    except ImportError:
        raise UserError(INSTALL) from None
    _answers(address)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        return ray
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR", namespace="streamchaos")
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UserError(f"--ray {address}: no Ray cluster answers there ({str(exc).splitlines()[0][:160]}); "
                        "start one with `ray start --head`, or give its address as HOST:PORT") from None
    return ray


def pack(run_dir: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(run_dir, arcname=".")
    return buf.getvalue()


def unpack(data: bytes, run_dir: Path) -> None:
    """A trial's directory from its tar, whole or not at all (unpacked beside it, then renamed)."""
    partial = run_dir.with_name(f".{run_dir.name}.unpacking")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            tar.extractall(partial, filter="data")
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    shutil.rmtree(run_dir, ignore_errors=True)
    partial.rename(run_dir)


class NodeHarness:
    """A Ray actor: this node's harness for the whole campaign (wrapped by ``ray.remote`` in ``RayPool``)."""

    def __init__(self, options: dict) -> None:
        import ray

        from chaos.run import reaper
        from chaos.run.harness import Harness

        self.node = ray.get_runtime_context().get_node_id()
        self.scratch = Path(tempfile.mkdtemp(prefix="streamchaos-ray-"))
        reaper.watch(self.scratch)  # this actor killed: its processes, containers and scratch go too
        self.harness = Harness(**options, workdir=self.scratch / "harness", data_dir=self.scratch)
        self.harness.__enter__()

    def describe(self) -> dict:
        import pyspark

        from chaos.campaign.shards import harness_version

        return {"node": self.node, "host": socket.gethostname(), "pid": os.getpid(), "spark": pyspark.__version__,
                "harness": harness_version(), "master": self.harness.cluster.master_url}

    def trial(self, trial_id: str, scenario: dict) -> bytes:
        run_dir = self.scratch / "trials" / trial_id
        shutil.rmtree(run_dir, ignore_errors=True)
        self.harness.trial(Scenario(**scenario), run_dir)
        result = json.loads((run_dir / "result.json").read_text())
        write_json(run_dir / "result.json", {**result, "node": {"id": self.node, "host": socket.gethostname()}})
        try:
            return pack(run_dir)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)

    def close(self) -> None:
        try:
            self.harness.__exit__(None, None, None)
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)


class RayPool:
    """The head's side: one ``NodeHarness`` per alive node; ``trial`` runs one on the first free one (shrinks);
    ``RayRunner`` hands planned trials to all of them at once."""

    def __init__(self, address: str, campaign: Campaign, options: dict, note=print) -> None:
        self.address, self.campaign, self.note = address, campaign, note
        self.ray = connect(address)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        actor = self.ray.remote(max_restarts=0, max_task_retries=0, num_cpus=0)(NodeHarness)
        nodes = [n["NodeID"] for n in self.ray.nodes() if n.get("Alive")]
        self.actors = {node: actor.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
                       .remote(options) for node in nodes}
        self.info: dict[str, dict] = {}
        for node, handle in self.actors.items():
            try:
                self.info[node] = self.ray.get(handle.describe.remote())
            except self.ray.exceptions.RayError as exc:
                self.close()
                raise UserError(f"Ray node {node[:12]}: its harness did not start ({_cause(exc)}): install Java 17 "
                                "and streamchaos there, as on this machine") from None
        self.free = list(self.actors)
        self._check_versions()

    def _check_versions(self) -> None:
        want = {"spark": self.campaign.spec.spark, "harness": self.campaign.data.get("harness")}
        for node, info in self.info.items():
            for what, version in want.items():
                if version and info[what] != version:
                    self.close()
                    raise UserError(f"Ray node {info['host']} ({node[:12]}) runs {what} {info[what]}, the plan "
                                    f"{version}: install the same on every node")

    def lost(self, node: str) -> None:
        """A node whose actor died: no more trials go there."""
        self.actors.pop(node, None)
        if node in self.free:
            self.free.remove(node)

    def trial(self, scenario: Scenario, run_dir: Path, last: bool = False) -> None:
        """One trial on a free node, its directory unpacked into ``run_dir`` (a lost node: the next one)."""
        while self.actors:
            node = next(iter(self.actors))
            try:
                data = self.ray.get(self.actors[node].trial.remote(run_dir.name, scenario.to_dict()))
            except self.ray.exceptions.RayActorError as exc:
                self.note(f"{run_dir.name}: lost with Ray node {node[:12]} ({_cause(exc)}); running it elsewhere")
                self.lost(node)
                continue
            unpack(data, run_dir)
            return
        raise UserError("every Ray node of the campaign was lost: `streamchaos campaign resume --ray ...` "
                        "continues it")

    def close(self) -> None:
        """Each harness stopped (a few seconds each, in parallel), then the actors killed and Ray left."""
        ray = self.ray
        try:
            closing = [handle.close.remote() for handle in self.actors.values()]
            ray.wait(closing, num_returns=len(closing), timeout=120)
        except Exception:  # noqa: BLE001 (a dead actor: its reaper has done the rest)
            pass
        self.kill()

    def kill(self) -> None:
        """Ctrl-C: the actors killed at once (their reapers stop what their harnesses started)."""
        for handle in self.actors.values():
            self.ray.kill(handle, no_restart=True)
        self.actors.clear()
        self.ray.shutdown()


def _cause(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


class RayRunner(Runner):
    """The campaign's planned trials on every node at once; shrinks and the summary as on one machine."""

    harness: RayPool

    def run_planned(self, todo: list[dict]) -> None:
        pool, ray = self.harness, self.harness.ray
        queue = deque(todo)
        running: dict = {}  # object ref -> (entry, node)
        retried: set[str] = set()
        lost = self._lost()
        while queue or running:
            interrupt.check()
            while queue and pool.free:
                if self.budget_spent(len(queue)):
                    queue.clear()
                    break
                entry = queue.popleft()
                node = pool.free.pop(0)
                scenario = Scenario(**entry["scenario"])
                self.progress.trial_start(entry["id"], scenario)
                running[pool.actors[node].trial.remote(entry["id"], entry["scenario"])] = (entry, node)
            if not running:
                if queue and not pool.actors:
                    self.progress.note(f"every Ray node was lost: {len(queue)} planned trial(s) not run; "
                                       "`campaign resume --ray ...` runs them")
                break  # the time budget is spent, or nothing is left
            done, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
            for ref in done:
                entry, node = running.pop(ref)
                try:
                    data = ray.get(ref)
                except ray.exceptions.RayActorError as exc:
                    again = entry["id"] not in retried
                    lost.append({"trial": entry["id"], "node": node, "host": pool.info[node]["host"],
                                 "cause": _cause(exc), "rerun": again, "t": round(time.time(), 3)})
                    write_json(self.c.root / "lost.json", lost)
                    pool.lost(node)
                    self.progress.note(f"{entry['id']}: lost with Ray node {pool.info[node]['host']} "
                                       f"({node[:12]}): " + ("running it once more on another node" if again else
                                                             "lost twice, not run again (`campaign resume`)"))
                    if again:
                        retried.add(entry["id"])
                        queue.appendleft(entry)
                    continue
                pool.free.append(node)
                unpack(data, self.c.trial_dir(entry["id"]))
                self.finish_trial(entry["id"], Scenario(**entry["scenario"]))

    def _lost(self) -> list[dict]:
        path = self.c.root / "lost.json"
        return json.loads(path.read_text()) if path.exists() else []


def run_on_ray(campaign: Campaign, address: str, options: dict, progress, echo=print) -> dict:
    """The campaign on the Ray cluster at ``address``: its summary. Ctrl-C kills the actors at once."""
    pool = RayPool(address, campaign, options, note=progress.note)
    try:
        echo(f"Ray cluster {address}: {len(pool.info)} node(s), one harness each: "
             + ", ".join(f"{i['host']} ({node[:12]}, Spark {i['master']})" for node, i in pool.info.items()))
        summary = RayRunner(campaign, pool, progress).run()
    except BaseException:
        pool.kill()
        raise
    pool.close()
    return summary
