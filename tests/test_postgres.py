"""The harness's own PostgreSQL: start, SIGKILL, restart on the same data (no Spark needed)."""

from __future__ import annotations

import psutil
import pytest

from chaos.postgres import PostgresServer, find_bindir
from chaos.procs import Owned

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
    import chaos.postgres
    from chaos.errors import UserError
    from chaos.scenario import Scenario
    from chaos.schedule import validate_schedule
    from pipelines_under_test import resolve

    monkeypatch.setattr(chaos.postgres, "find_bindir", lambda: None)
    with pytest.raises(UserError) as err:
        validate_schedule(Scenario("pg-append", events=400), resolve("pg-append"))
    assert "no PostgreSQL server binaries" in str(err.value) and "PG_BINDIR" in str(err.value)
    validate_schedule(Scenario("passthrough-append", events=400), resolve("passthrough-append"))  # no database: fine
