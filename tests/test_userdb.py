"""The user's own database (``database = "DATABASE_URL"``): a real PostgreSQL holding a user's role, database and
table; the harness works in a schema of its own there, drops it at the stop, reaps a dead harness's, and leaves
the user's tables, another machine's schema and the password alone (no Spark needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chaos.clusters.postgres import PASSFILE_VAR, find_bindir
from chaos.clusters.ssh.dburl import read_url
from chaos.clusters.ssh.remote import machine_id
from chaos.clusters.ssh.userdb import OWNER_NOTE, SCHEMA_PREFIX, UserDatabase
from chaos.errors import UserError
from tests.users_database import (
    SECRET,
    USERS_ROW,
    admin_dsn,
    database_url,
    harness_schemas,
    users_rows,
    users_server,
)


@pytest.mark.parametrize(("url", "says"), [
    ("", "DATABASE_URL is not set: export DATABASE_URL=postgresql://USER:PASSWORD@HOST:PORT/DATABASE"),
    ("mysql://app:x@db/staging", "must be postgresql://USER:PASSWORD@HOST:PORT/DATABASE"),
    ("postgresql://db:5432/staging", "must be postgresql://USER:PASSWORD@HOST:PORT/DATABASE"),
    ("postgresql://app:hush@db:99999/staging", "check its port"),
    ("postgresql://app:hush@db/staging?sslmode=require%20now", "a query parameter holds a space"),
])
def test_a_bad_database_url_is_one_line_without_its_password(url, says):
    with pytest.raises(UserError) as caught:
        read_url({"DATABASE_URL": url})
    assert says in str(caught.value) and "hush" not in str(caught.value) and "\n" not in str(caught.value)


def test_the_url_gives_user_database_port_and_parameters_and_hides_the_password():
    url = read_url({"DATABASE_URL": "postgresql://app:pa%3Ass@db.example:6543/staging?sslmode=require"})
    assert (url.user, url.host, url.port, url.dbname, url.secret) == ("app", "db.example", 6543, "staging", "pa:ss")
    assert url.params == (("sslmode", "require"),) and "pa:ss" not in repr(url)
    db = UserDatabase(url, Path("."))
    assert db.dsn_via("127.0.0.1", 7000) == (
        f"host=127.0.0.1 port=7000 user=app dbname=staging connect_timeout=10 sslmode=require "
        f"options=-csearch_path={db.schema}")


needs_postgres = pytest.mark.skipif(find_bindir() is None, reason="no PostgreSQL server binaries on this machine")


@pytest.fixture
def pg(tmp_path):
    with users_server(tmp_path / "server") as server:
        yield server


@needs_postgres
def test_the_harness_works_in_its_own_schema_and_leaves_the_users_tables(pg, tmp_path):
    import psycopg

    from chaos.stream.sinks import postgres as sink

    with psycopg.connect(admin_dsn(pg), autocommit=True) as conn:  # a dead harness of this machine's, another's
        for name, owner in (("streamchaos_dead", f"{machine_id()}/999999:1.000#1"),
                            ("streamchaos_elsewhere", "another-machine/1:1.000#1")):
            conn.execute(f"CREATE SCHEMA {name} AUTHORIZATION app")
            conn.execute(f"COMMENT ON SCHEMA {name} IS '{OWNER_NOTE}{owner}'")
    db = UserDatabase(read_url(database_url(pg)), tmp_path / "logs").start()
    try:
        assert db.schema.startswith(SCHEMA_PREFIX) and SECRET not in db.dsn
        assert harness_schemas(pg) == {db.schema, "streamchaos_elsewhere"}  # the dead harness's reaped
        sink.create(db.dsn)  # the pg-* sinks' tables, dropped and made again as every trial does
        with psycopg.connect(db.dsn, autocommit=True) as conn:  # through the passfile, as the user
            assert conn.execute("SELECT current_user").fetchone() == ("app",)
            conn.execute("INSERT INTO output (batch_id, id) VALUES (1, 1)")
        with psycopg.connect(admin_dsn(pg)) as conn:
            assert conn.execute(f"SELECT count(*) FROM {db.schema}.output").fetchone() == (1,)
        assert db.ready()
        with pytest.raises(Exception, match="the user's"):
            db.kill()
    finally:
        db.stop()
    assert harness_schemas(pg) == {"streamchaos_elsewhere"} and users_rows(pg) == [USERS_ROW]
    stored = "".join(p.read_text() for p in (tmp_path / "logs").rglob("*") if p.is_file())
    assert "app@127.0.0.1" in stored and "pa:ss" not in stored
    assert "pa\\:ss\\\\word" in Path(os.environ[PASSFILE_VAR]).read_text()  # escaped, in the passfile only


@needs_postgres
def test_a_user_without_create_or_a_wrong_password_is_one_line_at_the_start_and_in_doctor(pg, tmp_path, monkeypatch):
    from chaos.clusters.ssh.checks import check_user_database

    UserDatabase(read_url(database_url(pg)), tmp_path / "logs").probe()  # may create: nothing to say
    assert harness_schemas(pg) == set()  # the probe creates nothing
    for env, says in ((database_url(pg, "reader", "reads"), "reader may not create a schema in staging: GRANT"),
                      (database_url(pg, "app", "wrong"), "cannot connect to app@127.0.0.1")):
        with pytest.raises(UserError) as caught:
            UserDatabase(read_url(env), tmp_path / "logs").start()
        assert says in str(caught.value) and "wrong" not in str(caught.value).split("(")[0], caught.value
        monkeypatch.setenv("DATABASE_URL", env["DATABASE_URL"])
        check = check_user_database()
        assert check.status == "fail" and says in check.detail
    monkeypatch.setenv("DATABASE_URL", database_url(pg)["DATABASE_URL"])
    assert check_user_database().status == "ok"


@pytest.mark.parametrize(("pipeline", "fault", "says"), [
    ("pg-upsert-by-batch", "kill-sink-db@2:sink-write", "kill-sink-db@2:sink-write: the database of DATABASE_URL "
     "is yours"),
    ("pg-upsert-by-batch", "partition@2:sink-write/node=sink/3s", "fault the sink channel instead"),
])
def test_faults_on_the_users_database_itself_are_refused_in_one_line(pipeline, fault, says, tmp_path, monkeypatch):
    """The kind of a cluster of hosts refuses them (chaos.clusters.ssh.cluster.HostsCluster.refusal), before any
    host is reached, and a campaign plans no kill-sink-db there."""
    from chaos.campaign.stored import refused_by
    from chaos.run.admission import check_cluster_faults
    from chaos.scenario.scenario import Scenario

    (tmp_path / "id_ed25519").write_text("not read")
    (tmp_path / "known_hosts").write_text("")
    (tmp_path / "hosts.toml").write_text('user = "root"\nkey = "id_ed25519"\nknown_hosts = "known_hosts"\n'
                                         'shared = "/mnt/s"\nmaster = "n1"\ndatabase = "DATABASE_URL"\n'
                                         '[[hosts]]\nname = "n1"\naddress = "10.0.0.1"\n')
    monkeypatch.setenv("DATABASE_URL", "postgresql://app:hush@db.example/staging")
    spec = f"ssh:{tmp_path / 'hosts.toml'}"
    with pytest.raises(UserError, match=says):
        check_cluster_faults(Scenario(pipeline, events=1000, faults=[fault]), spec)
    check_cluster_faults(Scenario(pipeline, events=1000, faults=["down-sink@2:sink-write/3s"]), spec)
    assert refused_by(spec)("kill-sink-db") and not refused_by(spec)("down-sink")
