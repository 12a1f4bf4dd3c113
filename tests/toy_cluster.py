"""A toy kind of cluster for tests/test_cluster_kinds.py: what adding a kind takes (this file, one registry line)."""

from __future__ import annotations

from chaos.clusters.base import Cluster

EVENTS: list[tuple] = []  # what the toy was asked to do


class ToyCluster(Cluster):
    """Workers it can kill and restart, no pause, no node: each refusal in one line of its own."""

    kind = "toy"
    owns_workers = True
    workers = 2

    @classmethod
    def create(cls, spec, owned, workdir, workers, worker_cores, java_options, data_dir) -> ToyCluster:
        return cls("spark://127.0.0.1:1")

    @classmethod
    def refusal(cls, fault, spec: str) -> str | None:
        if fault.action == "pause-worker":
            return f"{fault.spec}: a toy worker cannot be paused, only killed (kill-worker)"
        if fault.target == "worker":
            return None
        return super().refusal(fault, spec)

    def worker_index(self, fault, detail, app_id) -> int:
        return fault.index or 0

    def kill_worker(self, i: int) -> int | None:
        EVENTS.append(("kill-worker", i))
        return 4242

    def restart_worker(self, i: int) -> None:
        EVENTS.append(("restart-worker", i))
