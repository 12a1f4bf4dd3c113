"""The sink database as a node of a Docker cluster: PostgreSQL in a container on the nodes' network.

On ``--cluster docker`` the ``pg-*`` pipelines' database is a machine of its own, so a partition can cut it off
(``partition@B:P/node=sink/DURATION``) like any worker node: ``docker network disconnect`` drops every packet
between it and the host, where the sink channel's proxy and the drivers are. Its server is this machine's
PostgreSQL (the same binaries as ``chaos.clusters.postgres``, mounted read-only at their paths; the node image holds the
libraries they link), started as ``nobody`` on a data directory inside the container, so ``kill-sink-db`` (docker
kill, then docker start of the same container) is PostgreSQL's crash recovery on the data it had.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.clusters.docker.containers import labels, remove
from chaos.clusters.postgres import PG_USER, PostgresServer, accepts, credentials, require_postgres
from chaos.errors import HarnessError
from chaos.machine.processes import wait_until

if TYPE_CHECKING:
    from chaos.clusters.base import Cluster as DockerCluster  # the Docker nodes (chaos.clusters.docker.nodes)

PORT = 5432
DATA = "/tmp/pg/data"  # in the container's own filesystem: kept across a docker kill and start, gone at removal


def install_dirs(bindir: Path) -> list[str]:
    """The directories the server needs from this machine: its binaries' tree, its share and lib directories
    (``pg_config``; Debian keeps share apart from bin)."""
    dirs = {str(bindir.parent)}
    debian_share = bindir.parent.parent.parent / "share" / "postgresql" / bindir.parent.name
    if debian_share.is_dir():
        dirs.add(str(debian_share))
    if (bindir / "pg_config").exists():
        for flag in ("--sharedir", "--pkglibdir"):
            out = subprocess.run([str(bindir / "pg_config"), flag], capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip():
                dirs.add(out.stdout.strip())
    return sorted(d for d in dirs if not any(d != o and d.startswith(o + "/") for o in dirs))


class PostgresNode:
    """PostgreSQL in a container of ``cluster``'s network; the same surface as ``PostgresServer``."""

    def __init__(self, cluster: DockerCluster, log_dir: Path) -> None:
        self.bindir = (require_postgres() / "postgres").resolve().parent  # the real tree, not a PATH symlink
        self.cluster = cluster
        self.log_dir = Path(log_dir)
        self.container = None
        self.address = ""
        self.port = PORT
        self.recovery_s: float | None = None

    dsn_via = staticmethod(PostgresServer.dsn_at)

    @property
    def dsn(self) -> str:
        return PostgresServer.dsn_at(self.address, PORT)

    @property
    def log(self) -> Path:
        return self.log_dir / "postgres.log"

    def start(self) -> PostgresNode:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log.write_text("")
        self.log.chmod(0o666)  # written by the server's user in the container
        postgres = f"{self.bindir}/postgres"
        # Its own user with the harness's password, from the node's own network only (samenet): the host's end
        # of it, where the sink's proxy is. The password reaches initdb through the container's environment.
        initdb = (f'printf "%s\\n" "$PGPW" >/tmp/pg/pw && {self.bindir}/initdb -D {DATA} -U {PG_USER} '
                  f'--auth=scram-sha-256 --pwfile=/tmp/pg/pw -E UTF8 --locale=C --no-sync --no-instructions '
                  f'>>{self.log} 2>&1 && rm -f /tmp/pg/pw && '
                  f'echo "host all all samenet scram-sha-256" >>{DATA}/pg_hba.conf')
        script = (f'set -e; [ -f {DATA}/PG_VERSION ] || {{ {initdb}; }}; '
                  f'ip=$(hostname -i | cut -d" " -f1); exec {postgres} -D {DATA} -p {PORT} -h "$ip" -k /tmp/pg '
                  f'-c fsync=off -c full_page_writes=off -c max_connections=50 >>{self.log} 2>&1')
        volumes = {d: {"bind": d, "mode": "ro"} for d in install_dirs(self.bindir)}
        volumes[str(self.log_dir)] = {"bind": str(self.log_dir), "mode": "rw"}
        c = self.cluster
        self.container = c.docker.containers.run(
            c.image, ["/bin/sh", "-c", f"mkdir -p /tmp/pg && {script}"], name=f"{c.prefix}-sink-db",
            hostname="sink-db", user="nobody", network=c.network.name, labels=labels("node-db", c.owned.tag),
            volumes=volumes, environment={"PGPW": credentials()}, detach=True, init=True)
        self.address = c.address(self.container)
        self._wait()
        return self

    def _wait(self) -> None:
        if not wait_until(self.ready, timeout=60, interval=0.2):
            tail = self.log.read_text(errors="replace").strip().splitlines()[-3:] if self.log.exists() else []
            raise HarnessError(f"PostgreSQL node did not accept connections within 60 s: see {self.log}: "
                               + " | ".join(tail))

    def ready(self) -> bool:
        return self.container is not None and accepts(self.dsn)

    def kill(self) -> int | None:
        """``docker kill`` the node (the fault ``kill-sink-db``): its server dies with every connection."""
        self.container.reload()
        pid = self.container.attrs["State"].get("Pid") or None
        self.container.kill()
        return pid

    def restart(self) -> None:
        """The same container again, attached at its address: PostgreSQL replays its WAL (crash recovery)."""
        started = time.monotonic()
        if not self.cluster.attached(self.container):
            self.cluster.reconnect(self.container)
        self.container.reload()
        if self.container.status == "paused":
            self.container.unpause()
        elif self.container.status != "running":
            self.container.start()
        self._wait()
        self.recovery_s = round(time.monotonic() - started, 2)

    def stop(self) -> None:
        remove(self.container)
        self.container = None
