"""The harness's own PostgreSQL: start, SIGKILL, restart on the same data (no Spark needed)."""

from __future__ import annotations

import psutil
import pytest

from chaos.clusters.postgres import PostgresServer, find_bindir
from chaos.machine.processes import Owned

needs_postgres = pytest.mark.skipif(find_bindir() is None, reason="no PostgreSQL server binaries on this machine")


@needs_postgres
def test_killed_database_restarts_on_the_same_data_and_leaves_nothing(tmp_path):
    import psycopg

    owned = Owned()
    pg = PostgresServer(owned, tmp_path / "logs").start()
    try:
        assert pg.dsn.startswith("host=127.0.0.1 ")
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (x INT)")
            conn.execute("INSERT INTO t VALUES (42)")
        pid = pg.kill()
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert not pg.ready()
        pg.restart()
        with psycopg.connect(pg.dsn) as conn:
            assert conn.execute("SELECT x FROM t").fetchall() == [(42,)]
        listening = [c for c in psutil.net_connections("tcp") if c.laddr and c.laddr.port == pg.port
                     and c.status == psutil.CONN_LISTEN]
        assert listening and all(c.laddr.ip == "127.0.0.1" for c in listening)
    finally:
        pg.stop()
        owned.stop_all()
    assert owned.groups == []
    assert not [p for p in psutil.process_iter(["name"]) if p.info["name"] == "postgres"
                and p.status() != psutil.STATUS_ZOMBIE and _ours(p, owned.tag)]


def _ours(proc: psutil.Process, tag: str) -> bool:
    try:
        return proc.environ().get("STREAMCHAOS_OWNER") == tag
    except psutil.Error:
        return False


def test_missing_binaries_are_one_clear_line_before_anything_starts(monkeypatch):
    import chaos.clusters.postgres
    from chaos.errors import UserError
    from chaos.run.admission import validate_schedule
    from chaos.scenario.scenario import Scenario
    from pipelines_under_test import resolve

    monkeypatch.setattr(chaos.clusters.postgres, "find_bindir", lambda: None)
    with pytest.raises(UserError) as err:
        validate_schedule(Scenario("pg-append", events=400), resolve("pg-append"))
    assert "no PostgreSQL server binaries" in str(err.value) and "PG_BINDIR" in str(err.value)
    validate_schedule(Scenario("passthrough-append", events=400), resolve("passthrough-append"))  # no database: fine


@needs_postgres
def test_only_its_own_user_with_the_generated_password_gets_in_and_no_dsn_holds_it(tmp_path, monkeypatch):
    import os
    import stat
    from pathlib import Path

    import psycopg

    from chaos.clusters.postgres import PASSFILE_VAR, PG_USER, credentials, password
    from chaos.jobs.as_written import database_url

    secret = credentials()
    passfile = Path(os.environ[PASSFILE_VAR])
    assert stat.S_IMODE(passfile.stat().st_mode) == 0o600 and stat.S_IMODE(passfile.parent.stat().st_mode) == 0o700
    assert tmp_path not in passfile.parents and password() == secret and len(secret) >= 24
    owned = Owned()
    pg = PostgresServer(owned, tmp_path / "logs").start()
    try:
        assert "password" not in pg.dsn and secret not in pg.dsn
        with psycopg.connect(pg.dsn) as conn:  # through PGPASSFILE
            assert conn.execute("SELECT current_user").fetchone() == (PG_USER,)
        url = database_url(pg.dsn)
        assert f"{PG_USER}:{secret}@127.0.0.1:{pg.port}/postgres" in url
        with psycopg.connect(url) as conn:  # what a job on an executor without the passfile uses
            assert conn.execute("SELECT 1").fetchone() == (1,)
        monkeypatch.delenv(PASSFILE_VAR)
        for dsn in (pg.dsn, pg.dsn + " password=wrong", pg.dsn.replace(f"user={PG_USER}", "user=postgres")):
            with pytest.raises(psycopg.OperationalError, match="password"):
                psycopg.connect(dsn, connect_timeout=5)
        monkeypatch.setenv(PASSFILE_VAR, str(passfile))
    finally:
        pg.stop()
        owned.stop_all()
    logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "logs").iterdir())
    assert secret not in logs
