"""A user's own PostgreSQL for the ``DATABASE_URL`` tests: a real server holding the user's role ``app`` (with a
password the passfile must escape), its database ``staging`` and a table of its own named as the catalogue sink's,
``public.output``, with a row nothing of the harness may touch."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from chaos.clusters.postgres import PostgresServer
from chaos.machine.processes import Owned

SECRET = "pa:ss\\word"  # a colon and a backslash: the passfile escapes both
USERS_ROW = (7, "the user's row")


@contextmanager
def users_server(log_dir: Path) -> Iterator[PostgresServer]:
    import psycopg

    owned = Owned()
    pg = PostgresServer(owned, log_dir).start()
    try:
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE app LOGIN PASSWORD '{SECRET}'")
            conn.execute("CREATE ROLE reader LOGIN PASSWORD 'reads'")
            conn.execute("CREATE DATABASE staging OWNER app")
        with psycopg.connect(admin_dsn(pg), autocommit=True) as conn:
            conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
            conn.execute("CREATE TABLE public.output (batch_id BIGINT, note TEXT)")
            conn.execute("INSERT INTO public.output VALUES (%s, %s)", USERS_ROW)
            conn.execute("ALTER TABLE public.output OWNER TO app")
        yield pg
    finally:
        pg.stop()
        owned.stop_all()


def admin_dsn(pg: PostgresServer) -> str:
    """The server's superuser in the user's database: what the tests look with."""
    return pg.dsn.replace("dbname=postgres", "dbname=staging")


def database_url(pg: PostgresServer, user: str = "app", secret: str = SECRET) -> dict[str, str]:
    return {"DATABASE_URL": f"postgresql://{user}:{quote(secret, safe='')}@127.0.0.1:{pg.port}/staging"}


def harness_schemas(pg: PostgresServer) -> set[str]:
    import psycopg

    with psycopg.connect(admin_dsn(pg)) as conn:
        rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'streamchaos%'").fetchall()
    return {name for (name,) in rows}


def users_rows(pg: PostgresServer) -> list[tuple]:
    import psycopg

    with psycopg.connect(admin_dsn(pg)) as conn:
        return conn.execute("SELECT * FROM public.output").fetchall()
