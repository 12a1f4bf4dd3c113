"""The kinds of cluster ``--cluster`` names, one line each: the pattern of its spec and the class that is it.

A new kind is a folder (or a module) under chaos/clusters/ with a subclass of ``chaos.clusters.base.Cluster``, and
one line in ``KINDS``. Classes are imported when their spec is used (the Docker SDK and paramiko only when
needed), so the registry is cheap to consult before anything starts.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from chaos.clusters.base import Cluster, channels_of
from chaos.errors import UserError
from chaos.machine.processes import Owned

# (the spec's pattern, "module:Class", whether it leaves more than processes behind: ``Cluster.reap``, run at
# every harness start, so only those kinds are imported there)
KINDS: list[tuple[str, str, bool]] = [
    (r"standalone", "chaos.clusters.standalone:StandaloneCluster", False),
    (r"docker(:.+)?", "chaos.clusters.docker.nodes:DockerCluster", True),
    (r"ssh:.+", "chaos.clusters.ssh.cluster:HostsCluster", False),
    (r"local-cluster\[\d+,\d+,\d+\]", "chaos.clusters.standalone:LocalCluster", False),
    (r"spark://[^:/]+:\d+", "chaos.clusters.base:Cluster", False),
]
UNKNOWN = ("use standalone, docker (or docker:IMAGE), ssh:FILE, local-cluster[WORKERS,CORES,MEMORY_MB] "
           "(e.g. local-cluster[2,1,1024]) or a master URL spark://HOST:PORT")


def register(pattern: str, target: str, reaps: bool = False) -> None:
    """Add a kind (ahead of the others, so it may refine one): ``pattern`` of its spec, ``module:Class``."""
    KINDS.insert(0, (pattern, target, reaps))


def _load(target: str) -> type[Cluster]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def kind_of(spec: str) -> type[Cluster]:
    """The class of the cluster ``spec`` names; an unknown spec is a user error."""
    for pattern, target, _ in KINDS:
        if re.fullmatch(pattern, spec):
            return _load(target)
    raise UserError(f"unknown cluster {spec!r}: {UNKNOWN}")


def refusal(fault, spec: str) -> str | None:
    """Why the cluster ``spec`` cannot carry out ``fault`` (one line), or None: asked before anything starts."""
    if fault.target == "executor" and spec.startswith("local["):
        return f"{fault.spec}: local mode has no executor processes"
    return kind_of(spec).refusal(fault, spec)


def channels(pipeline, spec: str) -> tuple[bool, bool]:
    """Whether ``pipeline`` has a source and a sink channel on the cluster ``spec`` (the planner plans faults on
    those only)."""
    return channels_of(pipeline, kind_of(spec).kafka_proxied(spec))


def reap_every_kind() -> int:
    """What killed harnesses of this machine left through every kind of cluster that leaves more than processes
    (``Cluster.reap``); how many things."""
    return sum(_load(target).reap() for _, target, reaps in KINDS if reaps)


def make_cluster(spec: str, owned: Owned, workdir: Path, workers: int = 2, worker_cores: int = 1,
                 java_options: str = "", data_dir: Path | None = None) -> Cluster:
    """The cluster ``spec`` names, not started. ``data_dir``: where the trials' directories live (mounted into Docker
    nodes; on a cluster of hosts, on the shared storage: executors write state and files there)."""
    cluster = kind_of(spec).create(spec, owned, workdir, workers, worker_cores, java_options,
                                   Path(data_dir or workdir))
    cluster.spec = spec
    return cluster


def with_image(cluster: str, image: str | None) -> str:
    """The cluster spec ``--cluster docker --image IMAGE`` stands for (``docker:IMAGE``: stored with a scenario,
    so a replay runs on the same image)."""
    if image is None:
        return cluster
    if cluster != "docker":
        raise UserError(f"--image {image} names the image of Docker nodes: add --cluster docker")
    return f"docker:{image}"
