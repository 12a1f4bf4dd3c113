"""A user's job as written: its reference, the payloads it reads, and rows judged against the batch query."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime

import polars as pl
import pytest
from hypothesis import given, settings

from chaos.errors import UserError
from chaos.jobs.as_written import database_url
from chaos.jobs.payloads import event_id, id_field, kafka_row, parse_schema, record, roles
from chaos.jobs.reference import JobSpec, canonical_entry, job_ref, parse_ref
from pipelines_under_test import resolve
from pipelines_under_test.user_job import UserJob
from properties.rows import BatchAnswer, infer_from_rows
from properties.strategies import records
from tests.conftest import REPO, cli

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def test_a_payload_fills_its_fields_from_the_scenarios_columns():
    fields = parse_schema(ORDER + ", note STRING, ok BOOLEAN, price DECIMAL(10,2)")
    assert roles(fields) == {"order_id": "id", "customer": "key", "amount": "value", "ts": "event_time",
                             "note": "derived", "ok": "derived", "price": "derived"}
    row = record(fields, roles(fields), 600, "k003", 454, 1_767_225_658_412)
    assert row["order_id"] == "order_id-600" and row["customer"] == "k003" and row["amount"] == 454
    assert row["ts"] == "2026-01-01T00:00:58.412Z"
    assert event_id(id_field(fields), "order_id-600") == 600 and event_id(id_field(fields), "x-1") is None


def test_a_kafka_record_carries_the_payload_as_json_and_the_event_as_its_provenance():
    fields = parse_schema(ORDER)
    key, value, topic, partition, offset, ts, ts_type = kafka_row(fields, roles(fields), ["orders", "refunds"], 7,
                                                                  "k001", 12, 1_767_225_600_000, 1, 3)
    assert key == b"k001" and topic == "refunds" and (partition, offset, ts_type) == (1, 3, 0)
    assert json.loads(value) == {"order_id": "order_id-7", "customer": "k001", "amount": 12,
                                 "ts": "2026-01-01T00:00:00.000Z"}
    assert ts == datetime.fromisoformat("2026-01-01T00:00:00+00:00")


@pytest.mark.parametrize("ddl, says", [
    ("order MAP<STRING, INT>", "STRUCT<...> and ARRAY<...>"),
    ("order STRUCT<>", "STRUCT with no fields"),
    ("amount", "is not 'name TYPE'"),
    ("", "--schema is empty"),
])
def test_a_schema_the_generator_cannot_fill_is_one_line(ddl, says):
    with pytest.raises(UserError, match=says):
        parse_schema(ddl)


def test_a_jobs_reference_round_trips_and_bad_options_are_named():
    spec = JobSpec("examples.orders_upsert:run", ORDER, "postgres:customer_totals", ("customer",))
    assert parse_ref(spec.ref) == spec
    with pytest.raises(UserError, match="unknown job option"):
        parse_ref("examples.orders_upsert:run?table=x")
    with pytest.raises(UserError, match="--sink"):
        JobSpec("examples.orders_upsert:run", ORDER, "mysql:t").validate()
    with pytest.raises(UserError, match="name the job's table"):
        JobSpec("examples.orders_upsert:run", ORDER, "postgres:x; DROP TABLE y").validate()
    with pytest.raises(UserError, match="e.g. sqlite:customer_totals"):
        JobSpec("examples.orders_sqlite:run", ORDER, "sqlite:").validate()


def test_a_job_file_under_the_working_directory_is_named_as_its_module(monkeypatch):
    monkeypatch.chdir(REPO)
    assert canonical_entry("examples/orders_upsert.py:run") == "examples.orders_upsert:run"
    with pytest.raises(UserError, match="does not exist"):
        canonical_entry("examples/nope.py:run")


def test_a_jobs_reference_resolves_to_a_pipeline_with_its_sinks_phases(monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(sys, "path", [*sys.path, str(REPO)])
    job = resolve(JobSpec("examples.orders_upsert:run", ORDER, "postgres:customer_totals", ("customer",)).ref)
    assert isinstance(job, UserJob) and job.database and job.sink_channel and job.compare_key == ("customer",)
    assert "sink-done" in job.phases and job.spark_oracle and not job.provenance
    files = resolve(JobSpec("examples.clicks_files:run", None, "parquet").ref)
    # A file sink's phases come from its JVM commit protocol, on the driver's class path at boot.
    assert not files.database and {"sink-write", "sink-done"} <= set(files.phases)
    assert files.boot_conf()["spark.driver.extraClassPath"].endswith(".jar") and job.boot_conf() == {}
    sqlite = resolve(JobSpec("examples.orders_sqlite:run", ORDER, "sqlite:customer_counts").ref)
    assert not sqlite.database and not sqlite.sink_channel and "sink-done" in sqlite.phases
    assert job.row_event({"order_id": "order_id-12", "customer": "k1"}) == 12


def test_database_url_is_what_jobs_read_from_the_environment(tmp_path, monkeypatch):
    dsn = "host=127.0.0.1 port=5433 user=streamchaos dbname=postgres connect_timeout=10"
    monkeypatch.delenv("PGPASSFILE", raising=False)
    assert database_url(dsn) == "postgresql://streamchaos@127.0.0.1:5433/postgres?connect_timeout=10"
    passfile = tmp_path / "pgpass"
    passfile.write_text("*:*:*:streamchaos:s3cret-Pw_1\n")
    monkeypatch.setenv("PGPASSFILE", str(passfile))  # the harness's, as its drivers inherit it
    assert database_url(dsn) == "postgresql://streamchaos:s3cret-Pw_1@127.0.0.1:5433/postgres?connect_timeout=10"


def test_rows_against_the_batch_query_name_duplicates_losses_and_strangers():
    expected = pl.DataFrame({"order_id": ["order_id-1", "order_id-2", "order_id-3"], "amount": [5, 6, 7]})
    observed = pl.DataFrame({"order_id": ["order_id-1", "order_id-1", "order_id-3", "order_id-9"],
                             "amount": [5, 5, 7, 1], "loaded_at": [1, 2, 3, 4]})
    found = infer_from_rows(expected, observed, ids=lambda row: int(row["order_id"].split("-")[1]))
    assert found.verdict == "incorrect"  # a loss, a duplicate and a row no input explains
    assert [(d["delta"], d["ids"]) for d in found.duplicated] == [(1, [1])]
    assert [(d["delta"], d["ids"]) for d in found.lost] == [(-1, [2])]
    assert len(found.unexpected) == 1 and found.keys == {"exact": 1, "over": 1, "under": 1, "optional": 0}


def test_rows_compare_floats_to_nine_digits_and_the_final_row_per_key():
    expected = pl.DataFrame({"customer": ["a", "b", "c"], "total": [0.1 + 0.2, 10.0, 3.0]})
    observed = pl.DataFrame({"customer": ["a", "b", "b", "d"], "total": [0.3, 9.0, 12.0, 1.0]})
    found = infer_from_rows(expected, observed, key=("customer",))
    assert [d["key"] for d in found.duplicated] == ['{"customer": "b"}']  # its last row, 12.0 > 10.0
    assert [d["key"] for d in found.lost] == ['{"customer": "c"}'] and len(found.unexpected) == 1
    assert found.keys["exact"] == 1
    with pytest.raises(UserError, match="no column"):
        infer_from_rows(expected, observed.drop("total").with_columns(n=1))
    with pytest.raises(UserError, match="--key"):
        infer_from_rows(expected, observed, key=("region",))


def test_a_job_with_no_sink_or_schema_is_one_line_before_any_jvm(tmp_path):
    run = cli("trial", f"{REPO}/examples/orders_append.py:run", cwd=tmp_path)
    assert run.rc == 2 and run.stderr.count("\n") == 1 and "--sink" in run.stderr, run.stderr
    run = cli("trial", f"{REPO}/examples/orders_append.py:run", "--sink", "postgres:orders", "--schema",
              "order MAP<STRING, INT>", cwd=tmp_path)
    assert run.rc == 2 and "STRUCT<...> and ARRAY<...>" in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_rows_a_late_record_touches_are_optional_whatever_their_counts():
    at = [datetime(2026, 1, 1, 0, m) for m in range(4)]
    # Window 0 got a late record (the stream may drop it, or emit the window again with a partial count),
    # window 3 only late records make; windows 1 and 2 must be there and right.
    every = pl.DataFrame({"start": at, "page": ["a"] * 4, "n": [5, 7, 9, 2]})
    on_time = pl.DataFrame({"start": at[:3], "page": ["a"] * 3, "n": [4, 7, 9]})
    answer = BatchAnswer(every, on_time)
    partial = on_time.with_columns(n=pl.when(pl.col("n") == 4).then(1).otherwise("n"))
    for key in ((), ("start", "page")):
        for emitted in (on_time, every, partial, on_time.filter(pl.col("n") != 4)):
            ok = infer_from_rows(answer, emitted, key=key)
            assert ok.verdict == "exactly-once" and ok.keys["optional"] >= 1, (key, emitted, ok)
        short = infer_from_rows(answer, on_time.filter(pl.col("n") != 7), key=key)
        assert short.verdict == "at-most-once" and len(short.lost) == 1, short
        wrong = infer_from_rows(answer, on_time.with_columns(n=pl.when(pl.col("n") == 9).then(18).otherwise("n")),
                                key=key)
        assert wrong.verdict != "exactly-once", wrong


def test_init_writes_a_starter_test_pytest_collects(tmp_path):
    sample = '{"order_id": "o1", "customer": "c1", "amount": 5, "ts": "2026-01-01T00:00:00Z"}'
    run = cli("init", f"{REPO}/examples/orders_upsert.py:run", "--schema", sample, "--sink", "postgres:customer_totals",
              "--key", "customer", cwd=tmp_path)
    assert run.rc == 0, run.stderr
    (test,) = (tmp_path / "tests").glob("test_*.py")
    text = test.read_text()
    assert f'JOB = "{REPO}/examples/orders_upsert.py:run"' in text and "KEY = ('customer',)" in text
    assert 'SCHEMA = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"' in text
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                                str(test)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert collected.returncode == 0 and "1 test collected" in collected.stdout, collected.stdout + collected.stderr
    again = cli("init", f"{REPO}/examples/orders_upsert.py:run", "--sink", "postgres:t", cwd=tmp_path)
    assert again.rc == 2 and "exists" in again.stderr and test.read_text() == text
    bad = cli("init", f"{REPO}/examples/orders_upsert.py:run", "--schema", "{nope", "--sink", "postgres:t",
              "--out", "t.py", cwd=tmp_path)
    assert bad.rc == 2 and "not JSON" in bad.stderr and not (tmp_path / "t.py").exists()


@given(records(ORDER + ", ok BOOLEAN, day DATE, price DOUBLE"))
@settings(max_examples=30, deadline=None)
def test_records_of_a_schema_are_json_that_parses_back_to_it(row):
    assert set(row) == {"order_id", "customer", "amount", "ts", "ok", "day", "price"}
    assert json.loads(json.dumps(row)) == row
    assert isinstance(row["amount"], int) and isinstance(row["ok"], bool)
    datetime.strptime(row["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
    datetime.strptime(row["day"], "%Y-%m-%d")


def test_a_job_that_imports_its_projects_namesake_of_a_harness_package_is_one_line(tmp_path):
    """The job and the harness cannot each import their own ``reports`` in one interpreter: the clash is named
    before any JVM starts; a job beside namesakes it does not import resolves as usual."""
    from tests.shadow_project import make_project

    project = make_project(tmp_path / "project")
    (project / "uses_reports.py").write_text("import reports\n\n\ndef run(spark=None):\n    pass\n")
    run = cli("trial", "uses_reports.py:run", "--sink", "parquet", cwd=project, script=True)
    assert run.rc == 2 and run.stderr.count("\n") == 1, run.stderr
    assert "imports its project's own 'reports'" in run.stderr and "rename yours" in run.stderr
    run = cli("trial", "orders_sqlite.py:run", "--sink", "sqlite:t", "--schema", ORDER, "--events", "0",
              cwd=project, script=True)
    assert run.rc == 2 and "--events must be at least 1" in run.stderr, run.stderr  # resolved, then refused


def test_every_python_path_the_harness_sets_starts_with_its_own_packages(tmp_path, monkeypatch):
    from chaos.driver.launch import SITE_HOOK, driver_env
    from chaos.machine.own_packages import INSTALL, PACKAGES, packages_folder
    from chaos.machine.spark import spark_env

    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    folder = packages_folder()
    assert sorted(p.name for p in folder.iterdir()) == sorted(PACKAGES)
    assert all((folder / name).resolve() == INSTALL / name for name in PACKAGES)
    assert spark_env()["PYTHONPATH"].split(":") == [str(folder), str(tmp_path)]
    assert driver_env()["PYTHONPATH"].split(":") == [str(SITE_HOOK), str(folder), str(tmp_path), str(tmp_path)]


def test_values_come_from_a_list_a_range_or_a_files_column_and_travel_in_the_reference(tmp_path):
    from chaos.jobs.payloads import parse_schema, record, roles
    from chaos.jobs.reference import job_ref, parse_ref
    from chaos.jobs.values import parse_values, value_lists

    (tmp_path / "accounts.csv").write_text("region,account\nemea,acc-1\namer,acc-2\n\namer,acc-2\n")
    (tmp_path / "plain.txt").write_text("x1\nx2\n")
    assert parse_values(["account=@accounts.csv", "code=@plain.txt", "shard=3..5"], base=tmp_path) == \
        '{"account":["acc-1","acc-2"],"code":["x1","x2"],"shard":["3","4","5"]}'
    assert parse_values({"note": ["a,b", "c"]}) == '{"note":["a,b","c"]}'  # chaos_check's dict keeps commas
    schema = "order_id STRING, account STRING, amount LONG, shard INT, ts TIMESTAMP"
    fields = parse_schema(schema)
    role = roles(fields)
    values = value_lists(parse_values(["account=acc-1,acc-2,acc-3", "shard=3..5"]), fields, role)
    assert values == {"account": ["acc-1", "acc-2", "acc-3"], "shard": [3, 4, 5]}
    # The key's field keeps the key's distribution (kN -> value N mod len); others go by the event id.
    rows = [record(fields, role, i, f"k{k:03d}", 7, 0, values) for i, k in ((10, 4), (11, 4), (12, 2))]
    assert [r["account"] for r in rows] == ["acc-2", "acc-2", "acc-3"] and [r["shard"] for r in rows] == [4, 5, 3]
    assert [r["order_id"] for r in rows] == ["order_id-10", "order_id-11", "order_id-12"]
    ref = job_ref("examples/orders_by_region.py:run", schema, "postgres:region_totals", "region",
                  ["account=acc-1,acc-2"], kafka="stand-in")
    assert parse_ref(ref).values == '{"account":["acc-1","acc-2"]}' and parse_ref(ref).validate()


def test_a_job_finds_the_trials_database_under_every_name_jobs_read():
    from chaos.jobs.job_env import DATABASE_VARS, database_env

    env = database_env("postgresql://streamchaos:s%3Acret@127.0.0.1:40123/postgres?connect_timeout=10")
    assert set(env) == set(DATABASE_VARS)
    assert env["JDBC_URL"] == "jdbc:postgresql://127.0.0.1:40123/postgres"
    assert (env["DB_USER"], env["DB_PASSWORD"]) == ("streamchaos", "s:cret") == (env["PGUSER"], env["PGPASSWORD"])
    assert (env["PGHOST"], env["PGPORT"], env["PGDATABASE"]) == ("127.0.0.1", "40123", "postgres")
    assert database_env("sqlite:////tmp/run/sink/job.db") == {"DATABASE_URL": "sqlite:////tmp/run/sink/job.db"}


def test_a_job_writing_a_database_of_a_kind_with_no_server_here_is_one_line_before_any_jvm(tmp_path):
    job = tmp_path / "orders_mysql.py"
    job.write_text((REPO / "examples" / "orders_jdbc.py").read_text().replace(
        '"jdbc:postgresql://localhost:5432/shop"', '"jdbc:mysql://db:3306/shop"'))
    run = cli("trial", f"{job}:run", "--schema", "order_id STRING", "--sink", "postgres:orders", cwd=tmp_path)
    assert run.rc == 2 and run.stderr.count("\n") == 1, run.stderr
    assert "jdbc:mysql://db:3306/shop" in run.stderr and "PostgreSQL only" in run.stderr


def test_the_databases_a_jobs_code_names_are_found_and_its_connections_take_the_trials():
    from chaos.jobs.databases import _rerouted_connect, named_databases

    text = (REPO / "examples" / "orders_raw_jdbc.py").read_text()
    assert named_databases(text) == ["jdbc:postgresql://postgres:5432/shop"]
    assert named_databases('DSN = "postgresql://etl:pw@db:5432/shop"\nURL = "jdbc:postgresql://db/shop"') == [
        "jdbc:postgresql://db/shop", "postgresql://etl:pw@db:5432/shop"]
    with pytest.raises(UserError, match="jdbc:sqlserver://sql:1433"):
        named_databases('url = "jdbc:sqlserver://sql:1433;databaseName=shop"')

    from psycopg.conninfo import conninfo_to_dict

    calls = []
    connect = _rerouted_connect(lambda *a, **kw: calls.append((a, kw)), conninfo_to_dict)
    trial = {"PGHOST": "127.0.0.1", "PGPORT": "41234", "PGDATABASE": "postgres", "PGUSER": "chaos",
             "PGPASSWORD": "s3cret"}
    saved = {k: os.environ.get(k) for k in trial}
    os.environ.update(trial)
    try:
        connect("host=postgres port=5432 dbname=shop user=etl password=etl application_name=orders",
                autocommit=True)
        connect(host="localhost", dbname="events", user="etl", sslmode="require")
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    where = {"host": "127.0.0.1", "port": "41234", "dbname": "postgres", "user": "chaos", "password": "s3cret"}
    assert calls == [((), {"application_name": "orders", "autocommit": True, **where}), ((), where)]


def test_spark_jdbc_writes_in_a_batch_of_the_run_go_through_the_barrier_driver():
    """In a foreachBatch of the query under test (``in_batch``) and a run with a controller (``phases_to``), the
    JDBC write's driver is the harness's, the job's own named beside it; the oracle's run (no controller) and
    writes outside a batch are the job's as written."""
    from chaos.jobs import databases

    assert databases.writes_jdbc('batch.write.jdbc(URL, "orders")') and databases.writes_jdbc("format('jdbc')")
    assert not databases.writes_jdbc('psycopg.connect("host=db")')
    databases.phases_to("127.0.0.1:4100", 2)
    try:
        assert databases._jdbc_properties({"driver": "org.postgresql.Driver"}) == {"driver": "org.postgresql.Driver"}
        with databases.in_batch(7):
            assert databases._jdbc_properties({"driver": "org.postgresql.Driver", "batchsize": "500"}) == {
                "driver": databases.BARRIER_DRIVER, "batchsize": "500", "streamchaos.driver": "org.postgresql.Driver",
                "streamchaos.controller": "127.0.0.1:4100", "streamchaos.incarnation": "2", "streamchaos.batch": "7"}
        databases.phases_to(None)
        with databases.in_batch(7):
            assert databases._jdbc_properties({}) == {}
    finally:
        databases.phases_to(None)


class _Writer:
    def open(self, partition_id, epoch_id):
        self.url = os.environ["DATABASE_URL"]
        return True

    def process(self, row):
        return self.url


def test_what_the_executors_run_takes_the_runs_database_with_it(monkeypatch):
    """``on_executors``: unpickled (as in a Python worker) it sets the run's variables before the job's object is
    loaded, and stays a function or a writer object as it was (Spark tells them apart by ``callable``)."""
    import pickle

    from pyspark import cloudpickle

    from chaos.jobs.databases import on_executors

    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert on_executors(len) is len  # no database in this run: nothing to carry
    monkeypatch.setenv("DATABASE_URL", "postgresql://chaos:pw@127.0.0.1:4100/postgres")
    function, writer = on_executors(lambda rows: os.environ["DATABASE_URL"]), on_executors(_Writer())
    assert callable(function) and not callable(writer) and on_executors(function) is function
    blobs = [cloudpickle.dumps(function), cloudpickle.dumps(writer)]
    monkeypatch.setenv("DATABASE_URL", "postgresql://elsewhere/x")  # the worker's own environment
    function, writer = (pickle.loads(b) for b in blobs)
    assert function([]) == "postgresql://chaos:pw@127.0.0.1:4100/postgres"
    assert writer.open(0, 3) and writer.process(None) == "postgresql://chaos:pw@127.0.0.1:4100/postgres"


def test_a_scripts_arguments_travel_in_its_reference_and_go_to_scripts_only(tmp_path):
    script = REPO / "examples" / "trades_script.py"
    ref = job_ref(str(script), "trade_id STRING", "parquet", args=["--input", "x y", "--min-qty", "10"])
    spec = parse_ref(ref)
    assert spec.entry == str(script) and spec.args == ("--input", "x y", "--min-qty", "10")
    assert resolve(ref).spec == spec and parse_ref(spec.ref) == spec
    with pytest.raises(UserError, match="arguments after -- go to a script"):
        job_ref("passthrough-append", args=["--input", "x"])
    with pytest.raises(UserError, match="JSON list of strings"):
        parse_ref(f"{script}?sink=parquet&args=--input")
    run = cli("trial", "missing_job.py", "--sink", "parquet", cwd=tmp_path)
    assert run.rc == 2 and run.stderr.count("\n") == 1 and "missing_job.py does not exist" in run.stderr


def test_id_names_the_event_id_field_and_the_default_guess_takes_id_suffixes(tmp_path):
    schema = "TransactionID STRING, order_id STRING, amount LONG, ts TIMESTAMP"
    guessed = resolve(job_ref(f"{REPO}/examples/orders_append.py:run", schema, "postgres:orders"))
    assert guessed.id_field.name == "TransactionID" and "by its name" in guessed.notes[0]
    named = resolve(job_ref(f"{REPO}/examples/orders_append.py:run", schema, "postgres:orders",
                            id_name="TransactionID"))
    assert named.spec.id == "TransactionID" and named.notes[0] == "the event id is TransactionID"
    assert roles(parse_schema(schema), "TransactionID") == {"TransactionID": "id", "order_id": "key",
                                                            "amount": "value", "ts": "event_time"}
    # 2,000 transactions are 2,000 ids, not the 20 keys: every record its own.
    fields = parse_schema(schema)
    ids = {record(fields, roles(fields, "TransactionID"), i, f"k{i % 20:03d}", 5, 0)["TransactionID"]
           for i in range(2000)}
    assert len(ids) == 2000
    for bad, said in (("Nope", "no such field"), ("amount", None), ("ts", "string or an integer")):
        if said is None:
            job_ref(f"{REPO}/examples/orders_append.py:run", schema, "postgres:orders", id_name=bad)
            continue
        with pytest.raises(UserError, match=said):
            job_ref(f"{REPO}/examples/orders_append.py:run", schema, "postgres:orders", id_name=bad)
    run = cli("trial", "passthrough-append", "--id", "x", cwd=tmp_path)
    assert run.rc == 2 and "--id applies to a job as written" in run.stderr


def test_sql_init_files_travel_in_the_reference_and_go_with_a_postgres_sink_only(tmp_path):
    init = tmp_path / "init.sql"
    init.write_text("CREATE TABLE orders (order_id TEXT PRIMARY KEY);\n")
    ref = job_ref(f"{REPO}/examples/orders_append.py:run", "order_id STRING", "postgres:orders",
                  sql_init=[str(init)])
    assert parse_ref(ref).sql == (str(init),) and resolve(ref).spec.sql == (str(init),)
    with pytest.raises(UserError, match="--sql-init .*missing.sql: no such file"):
        job_ref(f"{REPO}/examples/orders_append.py:run", "order_id STRING", "postgres:orders",
                sql_init=[str(tmp_path / "missing.sql")])
    with pytest.raises(UserError, match="goes with --sink postgres:TABLE, not sqlite:orders"):
        job_ref(f"{REPO}/examples/orders_append.py:run", "order_id STRING", "sqlite:orders", sql_init=[str(init)])


def test_a_rerouted_jdbc_url_keeps_the_jobs_parameters_and_shown_urls_keep_no_password(monkeypatch):
    from chaos.jobs.databases import _trial_url, shown
    from chaos.jobs.payloads import id_like

    monkeypatch.setenv("JDBC_URL", "jdbc:postgresql://127.0.0.1:41234/postgres")
    assert _trial_url("jdbc:postgresql://db/shop?currentSchema=raw&stringtype=unspecified") == \
        "jdbc:postgresql://127.0.0.1:41234/postgres?currentSchema=raw&stringtype=unspecified"
    assert _trial_url("jdbc:postgresql://db/shop") == "jdbc:postgresql://127.0.0.1:41234/postgres"
    assert shown("postgresql://etl:s3cret@db:5432/shop") == "postgresql://etl:***@db:5432/shop"
    assert shown("jdbc:postgresql://db/shop?user=etl&password=s3cret") == "jdbc:postgresql://db/shop?user=etl&password=***"
    assert [n for n in ("TransactionID", "eventId", "order_id", "uuid", "PAID", "VALID", "ID") if id_like(n)] == [
        "TransactionID", "eventId", "order_id", "uuid", "ID"]


def test_backquoted_field_names_may_hold_spaces():
    fields = parse_schema("`IP Address` STRING, `Event ID` STRING, amount LONG, ts TIMESTAMP")
    assert [f.name for f in fields] == ["IP Address", "Event ID", "amount", "ts"]
    row = record(fields, roles(fields, "Event ID"), 5, "k001", 7, 0)
    assert row["Event ID"] == "Event ID-5" and row["IP Address"] == "k001"
    ref = job_ref(f"{REPO}/examples/orders_append.py:run", "`IP Address` STRING, `Event ID` STRING",
                  "postgres:orders", id_name="Event ID")
    assert parse_ref(ref).schema.startswith("`IP Address` STRING") and resolve(ref).id_field.name == "Event ID"
    with pytest.raises(UserError, match="is not 'name TYPE'"):
        parse_schema("`IP Address`")


def test_a_scripts_arguments_reach_its_starter_test_and_its_campaigns_plan(tmp_path):
    """``init`` and ``campaign run`` take a script (path/to/job.py) and its own arguments after ``--``, as ``trial``
    does: the starter test passes them to chaos_check and the campaign's plan names them in its reference."""
    from chaos.campaign.stored import Campaign, CampaignSpec
    from chaos.jobs.reference import job_ref, parse_ref

    script = str(REPO / "examples" / "trades_script.py")
    trade = "trade_id STRING, symbol STRING, qty LONG, price DOUBLE, ts TIMESTAMP"
    given = ["--input", "/data/trades", "--output", "/data/large-trades", "--min-qty", "10"]
    run = cli("init", script, "--schema", trade, "--sink", "parquet", "--out", "t.py", "--", *given, cwd=tmp_path)
    assert run.rc == 0, run.stderr
    text = (tmp_path / "t.py").read_text()
    assert f"ARGS = {given!r}" in text and "args=ARGS" in text
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                                "t.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert collected.returncode == 0 and "1 test collected" in collected.stdout, collected.stdout + collected.stderr
    ref = job_ref(script, trade, "parquet", args=given)
    plan = Campaign.create(tmp_path / "c", CampaignSpec(pipelines=[ref], trials=1, events=600)).plan
    assert parse_ref(plan[0]["pipeline"]).args == tuple(given)
    refused = cli("campaign", "run", "--pipeline", "passthrough-append", "--out", "x", "--", "--input", "y",
                  cwd=tmp_path)
    assert refused.rc == 2 and "arguments after -- go to a script" in refused.stderr
