"""The user's own PostgreSQL as the sink database: ``database = "DATABASE_URL"`` in a hosts file.

A team testing on its staging cluster often has its staging database too, and no host of the file on which the
harness may run a server of its own. The harness then writes into the database ``DATABASE_URL`` names (read from
the environment, so the password is in no file a team commits), and touches nothing of the user's there:

* every table of a trial lives in a schema of the harness's own, ``streamchaos_<hex>``, reached through the
  connection's ``search_path``; the schema's comment holds its owner's tag; it is dropped at the stop, and by the
  next start of any harness of this machine once its owner is gone (another machine's is left);
* the password goes into the harness's passfile (``chaos.clusters.postgres``), never into a DSN, log or run directory;
* the server is the user's: faults that kill or cut off the database itself are refused in one line; the sink
  channel between the sinks and the server still takes its faults (``down-sink``, ``cut-sink``, ``delay-sink``).
"""

from __future__ import annotations

import secrets
from pathlib import Path

from chaos.clusters.postgres import accepts, add_login
from chaos.clusters.ssh.dburl import VAR, DatabaseUrl
from chaos.clusters.ssh.remote import gone, remote_tag
from chaos.errors import HarnessError, UserError

SCHEMA_PREFIX = "streamchaos_"
OWNER_NOTE = "streamchaos owner "


class UserDatabase:
    """The surface of ``chaos.clusters.postgres.PostgresServer`` over a schema of the harness's own in the user's
    database."""

    def __init__(self, url: DatabaseUrl, log_dir: Path) -> None:
        self.url = url
        self.address = url.host
        self.port = url.port
        self.log_dir = Path(log_dir)
        self.schema = f"{SCHEMA_PREFIX}{secrets.token_hex(6)}"
        self.recovery_s: float | None = None

    def dsn_via(self, host: str, port: int) -> str:
        """The DSN of the harness's schema reached at ``host:port`` (the sink channel's proxy, or the server)."""
        return f"{self._server_dsn(host, port)} options=-csearch_path={self.schema}"

    def _server_dsn(self, host: str, port: int) -> str:
        extra = "".join(f" {k}={v}" for k, v in self.url.params)
        return f"host={host} port={port} user={self.url.user} dbname={self.url.dbname} connect_timeout=10{extra}"

    @property
    def dsn(self) -> str:
        return self.dsn_via(self.address, self.port)

    def start(self) -> UserDatabase:
        import psycopg
        from psycopg import sql

        try:
            with self._connect() as conn:
                reap_schemas(conn)
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))
                conn.execute(sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
                    sql.Identifier(self.schema), sql.Literal(OWNER_NOTE + remote_tag())))
        except psycopg.errors.InsufficientPrivilege:
            raise self._no_create() from None
        (self.log_dir / "database.txt").parent.mkdir(parents=True, exist_ok=True)
        (self.log_dir / "database.txt").write_text(f"{self.url!r} schema {self.schema}\n")
        return self

    def probe(self) -> None:
        """Log in and check that the user may create the harness's schema, creating nothing (``doctor``)."""
        with self._connect() as conn:
            if not conn.execute("SELECT has_database_privilege(current_database(), 'CREATE')").fetchone()[0]:
                raise self._no_create()

    def _connect(self):
        """A connection to the user's database as the URL's user (password from the passfile); one line if not."""
        import psycopg

        if self.url.secret:
            add_login(self.url.user, self.url.secret)
        try:
            return psycopg.connect(self._server_dsn(self.address, self.port), autocommit=True)
        except psycopg.OperationalError as exc:
            reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            raise UserError(f"{VAR}: cannot connect to {self.url!r} ({reason}): check the URL, and that the server "
                            "admits this machine") from None

    def _no_create(self) -> UserError:
        return UserError(f"{VAR}: {self.url.user} may not create a schema in {self.url.dbname}: "
                         f"GRANT CREATE ON DATABASE {self.url.dbname} TO {self.url.user}")

    def ready(self) -> bool:
        return accepts(self.dsn)

    def kill(self) -> int | None:
        raise HarnessError(f"the database of {VAR} is the user's: the harness does not kill it")

    def restart(self) -> None:
        """Nothing of the harness's to restart: the user's server is back when it answers."""
        if not self.ready():
            raise HarnessError(f"the database of {VAR} ({self.url!r}) does not answer")

    def stop(self) -> None:
        import psycopg

        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                _drop_schema(conn, self.schema)
        except psycopg.Error:
            pass  # left to the next start's reaping, once this harness is gone


def reap_schemas(conn) -> int:
    """Drop the schemas of harnesses of this machine that are gone (killed before their stop); returns how many."""
    import psycopg

    rows = conn.execute(
        "SELECT nspname, obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname LIKE %s",
        (SCHEMA_PREFIX.replace("_", "\\_") + "%",)).fetchall()
    dropped = 0
    for name, note in rows:
        if note and note.startswith(OWNER_NOTE) and gone(note[len(OWNER_NOTE):]):
            try:
                _drop_schema(conn, name)
                dropped += 1
            except psycopg.errors.InsufficientPrivilege:
                pass  # a dead harness's of another user of the same database: that user's next start reaps it
    return dropped


def _drop_schema(conn, name: str) -> None:
    from psycopg import sql

    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))

