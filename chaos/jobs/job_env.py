"""Where a job finds its database: the environment variables jobs are written to read, all naming the trial's.

``DATABASE_URL`` (a URL, as many Python services read it), ``JDBC_URL`` with ``DB_USER`` and ``DB_PASSWORD`` (what
Spark's JDBC writer takes: ``batch.write.jdbc(os.environ["JDBC_URL"], ...)``), and libpq's own ``PGHOST``,
``PGPORT``, ``PGUSER``, ``PGPASSWORD``, ``PGDATABASE`` (psycopg's and psql's defaults). They are set in the job's
process before its module is imported, so a module-level ``os.environ[...]`` read sees them; the password lives
there only, never in a run directory or a log.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

DATABASE_VARS = ("DATABASE_URL", "JDBC_URL", "DB_USER", "DB_PASSWORD", "PGHOST", "PGPORT", "PGUSER", "PGPASSWORD",
                 "PGDATABASE")


def database_env(url: str) -> dict[str, str]:
    """The variables for the database at ``url`` (``postgresql://USER:SECRET@HOST:PORT/DB``); a SQLite URL gives
    ``DATABASE_URL`` only."""
    if not url.startswith(("postgresql://", "postgres://")):
        return {"DATABASE_URL": url}
    parts = urlsplit(url)
    user, secret = unquote(parts.username or ""), unquote(parts.password or "")
    database = parts.path.lstrip("/") or "postgres"
    host, port = parts.hostname or "127.0.0.1", str(parts.port or 5432)
    return {"DATABASE_URL": url, "JDBC_URL": f"jdbc:postgresql://{host}:{port}/{database}", "DB_USER": user,
            "DB_PASSWORD": secret, "PGHOST": host, "PGPORT": port, "PGUSER": user, "PGPASSWORD": secret,
            "PGDATABASE": database}
