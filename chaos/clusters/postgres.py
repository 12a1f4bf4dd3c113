"""A throwaway PostgreSQL cluster owned by the harness: the sink database of the ``pg-*`` pipelines.

Started from the installed server binaries (``initdb``, ``postgres``), on a free loopback port,
as one process group the harness owns (so ``kill-sink-db`` is a SIGKILL of that group, and a
restart on the same data directory is PostgreSQL's own crash recovery). PostgreSQL refuses to run
as root; when the harness is root, the server runs as the ``postgres`` user and its data directory
lives in a private temporary directory that user can reach (the run directory may not be), removed
when the server stops.

Only its own user gets in, with a password generated per harness process (``credentials``): libpq reads it
from a private passfile named by ``PGPASSFILE``, so no DSN, log, run directory or report holds it; the
``DATABASE_URL`` jobs are given carries it, in their environment only.

``fsync=off``: the harness kills processes, never the machine; a committed transaction is in the
OS page cache and survives a process kill, so durability against the faults we inject is intact.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import re
import secrets
import shutil
import tempfile
import time
from pathlib import Path

from chaos.errors import HarnessError, UserError
from chaos.machine.maven import Coordinates, available, folder_of, not_shipped
from chaos.machine.private_files import private_file
from chaos.machine.processes import Group, Owned, wait_until
from chaos.machine.spark import free_port, spark_home

PG_USER = "streamchaos"
SEARCH = ("/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin", "/usr/pgsql-*/bin", "/opt/homebrew/bin")


PASSFILE_VAR = "PGPASSFILE"
PASSFILE_PREFIX = "streamchaos-pgpass-"  # + the harness process's pid: a dead one's is removed at a next start
_password: str | None = None


def credentials() -> str:
    """The password of the harness's database user, generated once per process. It lives in a passfile (0600, in
    a 0700 directory of the system's temporary directory, outside every run directory) that ``PGPASSFILE`` names
    for this process and every process it starts, drivers and executors included, so libpq connects without a
    password in any DSN. Called before the harness starts anything."""
    global _password
    if _password is not None and os.environ.get(PASSFILE_VAR, "").startswith(_passfile_root()):
        return _password
    _password = secrets.token_urlsafe(24)  # letters, digits, - and _: nothing a passfile must escape
    passfile = private_file(PASSFILE_PREFIX, "pgpass", f"*:*:*:{PG_USER}:{_password}\n")
    os.environ[PASSFILE_VAR] = str(passfile)
    atexit.register(shutil.rmtree, passfile.parent, True)
    return _password


def _passfile_root() -> str:
    return str(Path(tempfile.gettempdir()) / PASSFILE_PREFIX)


def password() -> str | None:
    """The harness's database password, as this process's passfile holds it (a driver reads its parent's)."""
    path = os.environ.get(PASSFILE_VAR)
    try:
        lines = Path(path).read_text().splitlines() if path else []
    except OSError:
        return None
    prefix = f"*:*:*:{PG_USER}:"
    return next((line[len(prefix):] for line in lines if line.startswith(prefix)), None)


def add_login(user: str, secret: str) -> None:
    """Another login for every process of the harness: a user's own database (``chaos.clusters.ssh.userdb``), whose
    password then lives where the harness's does, in the passfile, and nowhere else. First in the file, so libpq takes
    it for that user."""
    credentials()
    path = Path(os.environ[PASSFILE_VAR])
    start = f"*:*:*:{_passfile_field(user)}:"
    kept = [line for line in path.read_text().splitlines(keepends=True) if not line.startswith(start)]
    path.write_text(f"{start}{_passfile_field(secret)}\n" + "".join(kept))


def _passfile_field(text: str) -> str:
    return text.replace("\\", "\\\\").replace(":", "\\:")


def find_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``postgres``: PG_BINDIR, PATH, then the usual places."""
    candidates = [os.environ.get("PG_BINDIR", "")]
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    for pattern in SEARCH:
        candidates += sorted(glob.glob(pattern), reverse=True)
    for c in candidates:
        if c and (Path(c) / "initdb").exists() and (Path(c) / "postgres").exists():
            return Path(c)
    return None


def require_postgres() -> Path:
    found = find_bindir()
    if found is None:
        raise UserError("no PostgreSQL server binaries (initdb, postgres) found: install them "
                        "(Debian: apt-get install postgresql) or set PG_BINDIR; the pg-* pipelines need them")
    return found


# Spark's JDBC writer (``batch.write.jdbc(...)``, ``format("jdbc")``) needs PostgreSQL's JDBC driver beside the
# application: from Maven, else Debian's libpostgresql-jdbc-java.
JDBC_DRIVER = Coordinates("org.postgresql", "postgresql", "42.7.14")
DEBIAN_JDBC = Path("/usr/share/java/postgresql.jar")


def jdbc_driver_jars(*, say=None) -> list[Path]:
    """PostgreSQL's JDBC driver and what it needs, for every driver's ``spark.jars``: resolved through Maven once
    per machine, else Debian's, else none (a job writing through JDBC then fails with Spark's "No suitable driver",
    and ``doctor`` says why)."""
    if available(JDBC_DRIVER, say=say) is None:
        return not_shipped(folder_of(JDBC_DRIVER), Path(spark_home()) / "jars")
    return [DEBIAN_JDBC] if DEBIAN_JDBC.is_file() else []


class PostgresServer:
    address = "127.0.0.1"  # where it listens; the harness's other databases set theirs

    def __init__(self, owned: Owned, log_dir: Path) -> None:
        self.bindir = require_postgres()
        self.owned = owned
        self.log_dir = Path(log_dir)
        self.run_as = "postgres" if os.geteuid() == 0 else None
        self.port = 0
        self.group: Group | None = None
        self.data: Path | None = None
        self._home: Path | None = None

    @property
    def dsn(self) -> str:
        return self.dsn_at(self.address, self.port)

    @staticmethod
    def dsn_at(host: str, port: int) -> str:
        return f"host={host} port={port} user={PG_USER} dbname=postgres connect_timeout=10"

    # The DSN of this database reached at another ``host:port`` (the sink channel's proxy): every database of the
    # harness has one (``chaos.clusters.ssh.userdb``'s names the user's user and schema).
    dsn_via = dsn_at

    def start(self) -> PostgresServer:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._home = Path(tempfile.mkdtemp(prefix="streamchaos-pg-"))
        self.data = self._home / "data"
        if self.run_as:
            entry = pwd.getpwnam(self.run_as)
            os.chown(self._home, entry.pw_uid, entry.pw_gid)
        pwfile = self._home / "pw"  # for initdb only, read by the server's user, removed at once
        pwfile.write_text(credentials() + "\n")
        pwfile.chmod(0o600)
        if self.run_as:
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        init = self.owned.spawn(
            "pg-initdb",
            [str(self.bindir / "initdb"), "-D", str(self.data), "-U", PG_USER, "--auth=scram-sha-256",
             f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync", "--no-instructions"],
            log_path=self.log_dir / "postgres-initdb.log", user=self.run_as, cwd=self._home,
        )
        try:
            rc = init.proc.wait(timeout=120)
        finally:
            pwfile.unlink(missing_ok=True)
        self.owned.forget(init)
        if rc != 0:
            raise HarnessError(f"initdb failed (exit {rc}): see {self.log_dir / 'postgres-initdb.log'}")
        self.port = free_port()
        self._launch()
        return self

    def _launch(self) -> None:
        self.group = self.owned.spawn(
            "postgres",
            [str(self.bindir / "postgres"), "-D", str(self.data), "-p", str(self.port), "-h", "127.0.0.1",
             "-k", str(self._home), "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=50"],
            log_path=self.log_dir / "postgres.log", user=self.run_as, cwd=self._home,
        )
        if not wait_until(self.ready, timeout=60, interval=0.1):
            raise HarnessError(f"PostgreSQL did not accept connections within 60 s: see {self.log_dir}/postgres.log")

    def ready(self) -> bool:
        return self.group is not None and self.group.alive() and accepts(self.dsn)

    def kill(self) -> int | None:
        """SIGKILL the server's process group (the fault ``kill-sink-db``)."""
        pid, self.group = self.owned.end(self.group), None
        return pid

    def restart(self) -> None:
        """Start again on the same data directory: PostgreSQL replays its WAL (crash recovery)."""
        started = time.monotonic()
        self._launch()
        self.recovery_s = round(time.monotonic() - started, 2)

    def stop(self) -> None:
        self.owned.end(self.group, 10)
        self.group = None
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None


def accepts(dsn: str) -> bool:
    """The server at ``dsn`` takes a connection (within 2 s)."""
    import psycopg

    try:
        with psycopg.connect(dsn, connect_timeout=2):
            return True
    except psycopg.Error:
        return False


def other_database(dsn: str, dbname: str) -> str:
    """The same server's DSN for another database of it."""
    return " ".join(f"dbname={dbname}" if part.startswith("dbname=") else part for part in dsn.split())


def export_table(dsn: str, table: str, path: Path) -> None:
    """A table's rows to parquet (an empty frame if the job never created it): a stored run is judged
    without the database."""
    import polars as pl
    import psycopg

    with psycopg.connect(dsn) as conn:
        exists = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is not None
        if not exists:
            pl.DataFrame().write_parquet(path)
            return
        cur = conn.execute(f"SELECT * FROM {table}")  # the name is checked by chaos.jobs.reference (an identifier)
        columns = [d.name for d in cur.description]
        rows = cur.fetchall()
    frame = pl.DataFrame(rows, schema=columns, orient="row", infer_schema_length=None) if rows else \
        pl.DataFrame({c: [] for c in columns})
    frame.write_parquet(path)


# A default that is a constant (``'new'::text``, ``0``, ``true``, ``NULL``) is a value the job could as well have
# written; anything else (``nextval(...)``, ``now()``, ``CURRENT_TIMESTAMP``, ``gen_random_uuid()``) differs between
# two databases given the same rows.
_CONSTANT_DEFAULT = re.compile(
    r"^(?:'(?:[^']|'')*'(?:::[\w .\[\]\"]+)?|-?\d+(?:\.\d+)?(?:::[\w ]+)?|true|false|NULL.*)$", re.IGNORECASE)


def filled_by_database(dsn: str, table: str) -> list[str]:
    """The columns of ``table`` the database fills itself: identity and serial columns, generated columns, and
    defaults computed at insert (``now()``, a sequence, a random id). Two runs of a job that write the same rows get
    different values in them, so they are not the job's output; an empty list if the table does not exist."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT a.attname, a.attidentity, a.attgenerated, pg_get_expr(d.adbin, d.adrelid) "
            "FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
            "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            (table,)).fetchall()
    return [name for name, identity, generated, default in rows
            if identity or generated or (default is not None and not _CONSTANT_DEFAULT.match(default.strip()))]
