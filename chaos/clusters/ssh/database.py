"""The sink database on the hosts' file's database host: PostgreSQL started over SSH, as the Spark daemons are.

A Jepsen test runs its database on nodes it can crash and cut off; so does a cluster of hosts when the file names
``database = "HOST"``. The server is the host's own PostgreSQL (Debian's ``postgresql`` package, or any
``/usr/lib/postgresql/*/bin``), run as the ``postgres`` user (PostgreSQL refuses root) in a data directory of the
harness under ``/var/tmp/streamchaos`` on that host, listening on the host's address at a free port. It is a
tagged process like every other of the harness there (``chaos.clusters.ssh.remote``), so a killed host kills it and the
next start reaps it; the data directory carries its owner's tag in a file and is removed at the stop or by the next
start's reaping. Only the harness's own user gets in, with the harness's per-process password (sent by SFTP for
``initdb`` and removed at once, never on a command line), from this machine and the hosts' own network.

The faults reach it as they reach a worker: ``kill-sink-db`` SIGKILLs its session (PostgreSQL's crash recovery at
the restart on the same data), a node kill of its host kills it with the rest, and ``partition@B:P/node=sink``
drops what reaches its port (``chaos.clusters.ssh.cluster.HostsCluster.block_port``).
"""

from __future__ import annotations

import shlex
import tempfile
import time
from pathlib import Path

from chaos.clusters.postgres import PG_USER, PostgresServer, accepts, credentials
from chaos.clusters.ssh.remote import OWNED_DIRS, OWNER_FILE, HostProcs, remote_tag
from chaos.errors import HarnessError, UserError
from chaos.machine.processes import wait_until

HOME_PREFIX = "pg-"
RUN_AS = "postgres"
FIND_BINDIR = ("for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do "
               '[ -x "$d/initdb" ] && [ -x "$d/postgres" ] && { echo "$d"; exit 0; }; done; exit 1')
FREE_PORT = "import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])"


class HostDatabase:
    """PostgreSQL on the database host of a ``HostsCluster``; the surface of
    ``chaos.clusters.postgres.PostgresServer``."""

    def __init__(self, cluster, log_dir: Path) -> None:
        self.cluster = cluster
        self.host = cluster.file.host(cluster.file.database)
        self.remote = cluster.remotes[self.host.name]
        self.procs: HostProcs = cluster.procs[self.host.name]
        self.address = self.host.address
        self.port = 0
        self.log_dir = Path(log_dir)
        self.home = f"{OWNED_DIRS}/{HOME_PREFIX}{remote_tag().replace('/', '-').replace(':', '-')}"
        self.bindir = ""
        self.sid: int | None = None
        self.recovery_s: float | None = None

    dsn_via = staticmethod(PostgresServer.dsn_at)

    @property
    def dsn(self) -> str:
        return PostgresServer.dsn_at(self.address, self.port)

    @property
    def log(self) -> Path:
        return self.log_dir / "postgres.log"

    def start(self) -> HostDatabase:
        found = self.remote.run(["sh", "-c", FIND_BINDIR])
        if found.rc != 0:
            raise UserError(f"database host {self.host}: no PostgreSQL server (initdb, postgres) under "
                            "/usr/lib/postgresql/*/bin: install it there (Debian: apt-get install postgresql)")
        self.bindir = found.out.strip().splitlines()[0]
        if self.remote.run(["id", "-u", RUN_AS]).rc != 0:
            raise UserError(f"database host {self.host}: no user {RUN_AS!r} to run PostgreSQL as (it refuses root): "
                            "create it, or install Debian's postgresql package, which does")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log.write_text("")
        self.log.chmod(0o666)  # written by the server's user on the host, through the shared storage
        home, data = shlex.quote(self.home), shlex.quote(f"{self.home}/data")
        self.remote.run(["sh", "-c", f"mkdir -p {home} && chmod 700 {home} && "
                                     f"echo {shlex.quote(remote_tag())} > {home}/{OWNER_FILE} && "
                                     f"chown {RUN_AS} {home}"], check=True)
        with tempfile.TemporaryDirectory(prefix="streamchaos-pgpw-") as scratch:
            pw = Path(scratch) / "pw"
            pw.write_text(credentials() + "\n")
            pw.chmod(0o600)
            self.remote.put(pw, f"{self.home}/pw")
        control = self.cluster.host
        init = (f"chown {RUN_AS} {home}/pw && chmod 600 {home}/pw && "
                f"runuser -u {RUN_AS} -- {shlex.quote(self.bindir)}/initdb -D {data} -U {PG_USER} "
                f"--auth=scram-sha-256 --pwfile={home}/pw -E UTF8 --locale=C --no-sync --no-instructions "
                f">> {shlex.quote(str(self.log))} 2>&1; rc=$?; rm -f {home}/pw; [ $rc -eq 0 ] && "
                f"printf 'host all {PG_USER} %s/32 scram-sha-256\\nhost all {PG_USER} samenet scram-sha-256\\n' "
                f"{shlex.quote(control)} >> {data}/pg_hba.conf")
        ran = self.remote.run(["sh", "-c", init], timeout=120)
        if ran.rc != 0:
            raise HarnessError(f"initdb failed on database host {self.host}: see {self.log}")
        port = self.remote.run([self.cluster.file.python, "-c", FREE_PORT, self.address], check=True).out.strip()
        self.port = int(port)
        self._launch()
        return self

    def _launch(self) -> None:
        data = f"{self.home}/data"
        self.sid = self.procs.start(
            ["runuser", "-u", RUN_AS, "--", f"{self.bindir}/postgres", "-D", data, "-p", str(self.port),
             "-h", self.address, "-k", self.home, "-c", "fsync=off", "-c", "full_page_writes=off",
             "-c", "max_connections=50"], log=str(self.log))
        if not wait_until(self.ready, timeout=60, interval=0.2):
            tail = self.log.read_text(errors="replace").strip().splitlines()[-3:] if self.log.exists() else []
            raise HarnessError(f"PostgreSQL on database host {self.host} did not accept connections within 60 s: "
                               f"see {self.log}: " + " | ".join(tail))

    def ready(self) -> bool:
        return self.port > 0 and accepts(self.dsn)

    def kill(self) -> int | None:
        """SIGKILL the server's session on its host (the fault ``kill-sink-db``): postmaster and backends at once."""
        sid, self.sid = self.sid, None
        if sid is not None:
            self.procs.kill_session(sid)
        return sid

    def restart(self) -> None:
        """Start again on the same data directory (after a kill, or a node kill of its host): crash recovery."""
        started = time.monotonic()
        if self.sid is not None:
            self.kill()  # a node kill took it: nothing of the old session may hold the port
        self._launch()
        self.recovery_s = round(time.monotonic() - started, 2)

    def stop(self) -> None:
        try:
            if self.sid is not None:
                self.procs.stop_session(self.sid, grace=1)  # a smart shutdown would wait for every client
                self.sid = None
            self.remote.run(["rm", "-rf", self.home])
        except UserError:
            pass  # the host went away: the next start's reaping removes the directory

