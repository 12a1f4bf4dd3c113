"""Docker for the harness: one client, the labels every container and network it makes carries, and the
reaping of what a killed harness left behind (the containers' side of ``chaos.machine.processes.reap_orphans``).

A container or network is the harness's own when it carries ``streamchaos.owner`` = the owner tag of the
harness process that made it (``chaos.machine.processes.my_tag``: pid and start time). At the next start, anything whose
owner is no longer alive is removed, containers before their networks. Nothing without the label is touched.
"""

from __future__ import annotations

import os
from contextlib import closing
from pathlib import Path

from chaos.errors import UserError
from chaos.machine.processes import my_tag, owner_alive

OWNER_LABEL = "streamchaos.owner"
KIND_LABEL = "streamchaos.kind"  # node-master, node-worker, node-db, network, ssh-host, volume
DEFAULT_SOCKET = Path("/var/run/docker.sock")
START_DOCKERD = ("start it: `dockerd >/var/log/dockerd.log 2>&1 &` as root (Debian: apt-get install docker.io), "
                 "or point DOCKER_HOST at a running one")


def configured() -> bool:
    """Whether a dockerd may be there to ask, without asking (no import, no connection): cheap at every start."""
    return bool(os.environ.get("DOCKER_HOST")) or DEFAULT_SOCKET.exists()


def client(timeout: int = 60):
    """A client of the dockerd ``DOCKER_HOST`` (or the default socket) names; one clear error if none answers."""
    import docker

    try:
        found = docker.from_env(timeout=timeout)
        found.ping()
    except Exception as exc:  # docker.errors.DockerException, requests' connection errors
        raise UserError(f"no Docker daemon answers at {address()} ({type(exc).__name__}); {START_DOCKERD}") from None
    return found


def address() -> str:
    """Where the harness asks dockerd: ``DOCKER_HOST``, else the default socket."""
    return os.environ.get("DOCKER_HOST") or f"unix://{DEFAULT_SOCKET}"


def labels(kind: str, owner: str | None = None) -> dict[str, str]:
    """The labels of a container or network this harness makes."""
    return {OWNER_LABEL: owner or my_tag(), KIND_LABEL: kind}


def remove(container) -> None:
    """A container of the harness's gone with its anonymous volumes (quietly, if it is gone already)."""
    if container is None:
        return
    try:
        container.remove(force=True, v=True)
    except Exception:  # docker.errors.NotFound: gone already
        pass


def reap_containers() -> int:
    """Remove the containers, networks and volumes of harnesses that are gone (SIGKILLed). Returns how many."""
    if not configured():
        return 0
    try:
        docker_client = client(timeout=20)
    except UserError:
        return 0
    removed = 0
    with closing(docker_client):
        owned = {"label": OWNER_LABEL}
        for container in docker_client.containers.list(all=True, filters=owned):
            if not owner_alive(container.labels.get(OWNER_LABEL, "")):
                container.remove(force=True, v=True)
                removed += 1
        for network in docker_client.networks.list(filters=owned):
            if not owner_alive(network.attrs.get("Labels", {}).get(OWNER_LABEL, "")):
                network.remove()
                removed += 1
        for volume in docker_client.volumes.list(filters=owned):  # the shared storage of SSH test hosts
            if not owner_alive((volume.attrs.get("Labels") or {}).get(OWNER_LABEL, "")):
                volume.remove(force=True)
                removed += 1
    return removed
