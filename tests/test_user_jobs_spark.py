"""Users' jobs as written (examples/), on a real cluster, judged against Spark's batch query: no oracle by hand."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import polars as pl
import pytest

from chaos.clusters.postgres import find_bindir
from chaos.errors import UserError
from chaos.run.judge import exit_code, expecting, judge, verdict_fields
from tests.conftest import REPO, cli, left_by
from tests.test_trials_spark import ids_of_batch, trial

pytestmark = pytest.mark.spark
needs_postgres = pytest.mark.skipif(find_bindir() is None, reason="no PostgreSQL server binaries on this machine")

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
TRADE = "trade_id STRING, symbol STRING, qty LONG, price DOUBLE, ts TIMESTAMP"
KILL = ["--events", "1000", "--fault", "kill-driver@3:sink-done", "--json"]


def job(name: str) -> str:
    return f"{REPO}/examples/{name}.py:run"


@needs_postgres
def test_an_upsert_job_as_written_is_exactly_once_against_its_batch_query(chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, job("orders_upsert"), "--schema", ORDER, "--sink", "postgres:customer_totals",
              "--key", "customer", *KILL)
    assert all(f["fired"] for f in r["faults"]) and r["recoveries"], r["faults"]
    assert r["verdict"] == "exactly-once" and r["meets"] is True and r["inferred"] is True
    run = Path(r["run_dir"])
    expected = pl.read_parquet(run / "oracle" / "output.parquet")
    assert expected.columns == ["customer", "total", "orders"] and expected.height == r["keys"]["exact"] > 1
    # The batch query's totals are the input's: amounts over 100 of each customer, every event once.
    events = pl.read_parquet(run / "events.parquet").filter(pl.col("value") > 100)
    assert expected["total"].sum() == events["value"].sum() and expected["orders"].sum() == events.height


@needs_postgres
# foreachBatch with psycopg; with Spark's JDBC writer (its driver and JDBC_URL from the harness); a Python data
# source's writer
@pytest.mark.parametrize("name", ["orders_append", "orders_jdbc",
                                  pytest.param("orders_sink", marks=pytest.mark.long)])
def test_an_append_jobs_replayed_batch_is_found_row_by_row_and_attributed(chaos_harness, tmp_path, name):
    # Spark's JDBC writer: an executor killed once a task of batch 1 committed its partition (the task's own
    # sink-write, BarrierJdbcDriver) has the task run again, which appends the partition again.
    executor = ["--fault", "kill-executor@1:sink-write"] if name == "orders_jdbc" else []
    r = trial(chaos_harness, tmp_path, job(name), "--schema", ORDER, "--sink", "postgres:orders", *KILL, *executor,
              code=1)
    assert r["verdict"] == "at-least-once" and r["meets"] is False  # exit 1: a job is expected exactly-once
    # Its rows keep order_id, which names the event: the duplicates (a sample of them listed) are batch 3's, after
    # the driver's kill, and for the JDBC writer batch 1's too: at least the partition whose commit its task
    # reported, at most the batch.
    dup, counts = r["duplicated"], r["anomaly_counts"]
    assert {i for d in dup if d["batches"] == [3] for i in d["ids"]} <= ids_of_batch(r, 3)
    assert {i for d in dup if d["batches"] == [1] for i in d["ids"]} <= ids_of_batch(r, 1)
    assert {(tuple(d["batches"]), tuple(d["faults"])) for d in dup} <= {
        ((3,), ("kill-driver@3:sink-done",)), *([((1,), ("kill-executor@1:sink-write",))] if executor else [])}
    assert dup[-1]["batches"] == [3] if not executor else dup[0]["batches"] == [1]  # sorted by id: 1's first
    assert counts["lost"] == counts["unexpected"] == 0 and (200 < counts["duplicated"] <= 400 if executor else
                                                            counts["duplicated"] == 200), counts
    fired = next(f for f in r["faults"] if f["spec"] == "kill-driver@3:sink-done")
    assert fired["fired"], r["faults"]  # the job's own sink reported the phase, without calling anything
    if name == "orders_append":  # a job meant to be at-least-once says so (--expect): the same run meets it
        meant = expecting(verdict_fields(judge(Path(r["run_dir"]))), "at-least-once")
        assert meant["meets"] is True and exit_code(meant) == 0
        assert meant["verdict"] == "at-least-once" and meant["expected"] == "at-least-once"


@needs_postgres
def test_a_jdbc_job_that_stages_and_inserts_on_conflict_is_exactly_once(chaos_harness, tmp_path):
    """Spark's JDBC writer into a staging table, then ``INSERT ... ON CONFLICT DO NOTHING`` through psycopg with the
    job's own connection parameters (localhost, its database and user: the trial's): the replayed batch and the
    retried task add nothing."""
    r = trial(chaos_harness, tmp_path, f"{REPO}/examples/orders_jdbc.py:run_staged", "--schema", ORDER, "--sink",
              "postgres:orders", *KILL, "--fault", "kill-executor@1:sink-write")
    assert all(f["fired"] for f in r["faults"]) and r["restarts"] == 1, r["faults"]
    # The executor died once a staging task committed: the retried task staged its rows twice, and the insert
    # into orders added each once.
    history = [json.loads(line) for line in (Path(r["run_dir"]) / "history.jsonl").open()]
    assert any(h["kind"] == "phase" and h["batch"] == 1 and h["detail"].get("source") == "jdbc"
               and h["detail"].get("task_attempt") == 1 for h in history)
    assert r["verdict"] == "exactly-once" and r["meets"] is True
    assert r["anomaly_counts"] == {"lost": 0, "duplicated": 0, "unexpected": 0}


@needs_postgres
def test_a_job_naming_its_own_database_writes_the_trials_and_its_serial_columns_are_not_compared(chaos_harness,
                                                                                                  tmp_path):
    """examples/orders_raw_jdbc.py as written: a docker-compose host in its JDBC URL and psycopg connection, a table
    in schema ``raw`` with ``id BIGSERIAL`` and ``inserted_at DEFAULT now()``, a console query beside its sink.
    The replayed batch gets new ids and times: compared on the job's columns, it is batch 3's 200 rows twice."""
    from pipelines_under_test import resolve

    # The repository's own DDL (--sql-init) made the table first, with a column of a constant default: the job's
    # CREATE TABLE IF NOT EXISTS keeps it, and a constant is no column the database fills.
    init = tmp_path / "init.sql"
    init.write_text("CREATE SCHEMA IF NOT EXISTS raw;\n"
                    "CREATE TABLE raw.orders (id BIGSERIAL PRIMARY KEY, order_id TEXT NOT NULL, customer TEXT,\n"
                    "    amount BIGINT, ts TIMESTAMP, inserted_at TIMESTAMPTZ NOT NULL DEFAULT now(),\n"
                    "    source TEXT NOT NULL DEFAULT 'kafka');\n")
    r = trial(chaos_harness, tmp_path, job("orders_raw_jdbc"), "--schema", ORDER, "--sink", "postgres:raw.orders",
              "--sql-init", str(init), "--expect", "at-least-once", *KILL)
    assert r["verdict"] == "at-least-once" and r["filled_by_database"] == ["id", "inserted_at"], r
    assert r["anomaly_counts"] == {"lost": 0, "duplicated": 200, "unexpected": 0}
    assert {i for d in r["duplicated"] for i in d["ids"]} <= ids_of_batch(r, 3)
    written = pl.read_parquet(Path(r["run_dir"]) / "sink" / "output.parquet")
    assert written.height == 1200 and written["id"].n_unique() == 1200  # the database numbered every row
    assert written["source"].unique().to_list() == ["kafka"]
    # Its console query ran beside it, on a checkpoint of its own, and printed its batches to the driver's log.
    run = Path(r["run_dir"])
    assert (run / "checkpoint-debug" / "offsets").is_dir() and (run / "oracle" / "checkpoint-debug").is_dir()
    assert "Batch: 0" in (run / "logs" / "driver-0.log").read_text()
    assert resolve(r["pipeline"]).notes == ("the event id is order_id (by its name; --id FIELD names another)",
                                            "the payload's schema is the one the job declares (orders_raw_jdbc.py:51)",
                                            "the job's database jdbc:postgresql://postgres:5432/shop is the trial's "
                                            "(its tables kept)")
    # Between trials every schema is emptied, not only public: raw is there, with no table left in it.
    from chaos.jobs.reference import parse_ref
    from pipelines_under_test.user_job import UserJob

    spec = parse_ref(r["pipeline"])
    UserJob(replace(spec, sql=())).prepare_database(chaos_harness.database.dsn)
    import psycopg

    with psycopg.connect(chaos_harness.database.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'raw'").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'raw'").fetchone()[0] == 0
    # DDL the database rejects is the user's to fix: one line with the file, the line and PostgreSQL's words.
    init.write_text("CREATE SCHEMA IF NOT EXISTS raw;\nCREATE TABLE raw.orders (id BIGSERIAL, amount BIGNUMBER);\n")
    with pytest.raises(UserError, match=r"--sql-init .*init.sql: PostgreSQL rejected it at line 2: type "
                                        r"\"bignumber\" does not exist"):
        UserJob(spec).prepare_database(chaos_harness.database.dsn)


def test_a_script_with_argparse_and_a_module_level_query_runs_unchanged(chaos_harness, tmp_path):
    """examples/trades_script.py as spark-submit runs it: argparse options after --, its query at module level,
    awaitTermination, spark.stop() and sys.exit(0) after it; its parquet sink partitioned by day and symbol."""
    r = trial(chaos_harness, tmp_path, f"{REPO}/examples/trades_script.py", "--schema", TRADE, "--sink", "parquet",
              *KILL, "--", "--input", "/data/trades", "--output", "/data/large-trades", "--min-qty", "10")
    assert all(f["fired"] for f in r["faults"]) and r["recoveries"], r["faults"]
    assert r["verdict"] == "exactly-once" and r["meets"] is True
    assert r["pipeline"].endswith("&args=" + quote('["--input", "/data/trades", "--output", "/data/large-trades", '
                                                   '"--min-qty", "10"]', safe=" :,()"))
    from pipelines_under_test import resolve

    expected = resolve(r["pipeline"]).expected_output(Path(r["run_dir"])).rows
    # partitionBy("date", "symbol"): the part files under date=.../symbol=.../, the two columns read from the path.
    assert expected.columns == ["trade_id", "qty", "notional", "ts", "date", "symbol"] and expected.height > 0
    assert expected["qty"].min() >= 10  # its own option reached it
    written = list((Path(r["run_dir"]) / "sink" / "files").glob("date=*/symbol=*/part-*.parquet"))
    assert written and expected["symbol"].n_unique() > 1
    # Without its required options it exits before any query: the user's mistake, in argparse's own words.
    with pytest.raises(UserError, match=r"exited with 2: trades_script.py: error: the following arguments are "
                                        r"required: --input, --output"):
        trial(chaos_harness, tmp_path, f"{REPO}/examples/trades_script.py", "--schema", TRADE, "--sink", "parquet",
              "--events", "400", name="no-options")
    # A sink it does not write: one line naming what it does start.
    with pytest.raises(UserError, match=r"--sink postgres:trades: none of the job's queries writes there \(it "
                                        r"starts parquet queries\)"):
        trial(chaos_harness, tmp_path, f"{REPO}/examples/trades_script.py", "--schema", TRADE, "--sink",
              "postgres:trades", "--events", "400", "--", "--input", "x", "--output", "y", name="other-sink")


@pytest.mark.long  # a campaign found and shrunk: tests/test_campaign_spark.py
@needs_postgres
def test_a_campaign_on_an_append_job_finds_and_shrinks_its_duplicates(spark_cluster, tmp_path):
    run = cli("campaign", "run", "--pipeline", job("orders_append"), "--schema", ORDER, "--sink", "postgres:orders",
              "--expect", "exactly-once", "--trials", "1", "--events", "600", "--example", "kill-driver@1:sink-done",
              "--shrink-trials", "1", "--out", "c", "--cluster", spark_cluster.master_url, cwd=tmp_path, timeout=1200)
    assert run.rc == 1, run.stdout + run.stderr
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    (name, row), = summary["pipelines"].items()
    # The connector is not served for the default Spark: --kafka auto reads the stand-in, and the reference says so.
    assert name.endswith("orders_append.py:run?schema=" + ORDER + "&sink=postgres:orders&kafka=stand-in")
    assert row["verdict"] == "at-least-once" and row["meets"] is False
    ce = row["counterexample"]
    assert len(ce["minimal"]) == 1 and ce["minimal"][0].endswith(":sink-done")
    assert left_by(run.pid) == []
    again = cli("analyze", ".", cwd=tmp_path / "c")  # from elsewhere: the stored runs judge without the job's code
    assert again.rc == 1 and "0 changed" in again.stdout, again.stdout + again.stderr


@needs_postgres
def test_values_from_a_file_drive_a_stream_static_join_to_exactly_once(chaos_harness, tmp_path):
    """Generated accounts would all fall out of the join with accounts.csv: ``--values account=@accounts.csv``
    gives the stream the table's own ids, and every order reaches a region."""
    r = trial(chaos_harness, tmp_path, job("orders_by_region"), "--schema", ORDER.replace("customer", "account"),
              "--sink", "postgres:region_totals", "--key", "region",
              "--values", f"account=@{REPO}/examples/accounts.csv", *KILL)
    assert all(f["fired"] for f in r["faults"]) and r["verdict"] == "exactly-once" and r["meets"] is True
    run = Path(r["run_dir"])
    expected = pl.read_parquet(run / "oracle" / "output.parquet")
    assert sorted(expected["region"]) == ["amer", "apac", "emea"] and r["keys"]["exact"] == 3
    assert expected["orders"].sum() == 1000  # every order matched an account
    assert expected["total"].sum() == pl.read_parquet(run / "events.parquet")["value"].sum()
    scenario = json.loads((run / "scenario.json").read_text())
    assert '"acc-0012"' in scenario["pipeline"].replace("%22", '"')  # the values travel in the reference


@pytest.mark.long
def test_a_file_sink_jobs_campaign_opens_its_sink_windows_and_is_exactly_once(spark_cluster, tmp_path):
    run = cli("campaign", "run", "--pipeline", job("clicks_files"), "--sink", "parquet", "--trials", "1",
              "--events", "1000", "--faults", "kill", "--out", "c", "--cluster", spark_cluster.master_url,
              cwd=tmp_path, timeout=1200)
    assert run.rc == 0, run.stdout + run.stderr
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    (row,) = summary["pipelines"].values()
    # Its file sink reports sink-write (part files written, _spark_metadata/N not yet) and sink-done from the
    # JVM commit protocol: the first trial kills the driver in both.
    assert {"kill-driver:sink-write", "kill-driver:sink-done"} <= set(row["covered"]), row
    assert row["verdict"] == "exactly-once" and row["meets"] is True
    (trial_dir,) = (tmp_path / "c" / "trials").iterdir()
    result = json.loads((trial_dir / "result.json").read_text())
    assert {f["phase"] for f in result["faults"] if f["fired"]} == {"sink-write", "sink-done"}, result["faults"]
    out = pl.read_parquet(trial_dir / "oracle" / "files" / "*.parquet")
    assert out.columns == ["click_id", "page", "section", "at", "day"] and out.height == 500
    assert set(out["section"]) == {p.upper() for p in out["page"]}  # its UDF ran in the executors
    assert left_by(run.pid) == []


@needs_postgres
def test_an_event_time_job_with_sparks_defaults_and_late_records_claims_no_loss(chaos_harness, tmp_path):
    view = "page STRING, user_id LONG, at TIMESTAMP"
    r = trial(chaos_harness, tmp_path, job("page_views_windowed"), "--schema", view,
              "--sink", "postgres:page_minutes", "--key", "minute,page", "--late-fraction", "0.05", "--events", "2000",
              "--fault", "kill-driver@3:sink-done", "--json")
    assert all(f["fired"] for f in r["faults"]), r["faults"]
    assert r["verdict"] == "exactly-once" and r["meets"] is True, r
    assert r["anomaly_counts"] == {"lost": 0, "duplicated": 0, "unexpected": 0}
    run = Path(r["run_dir"])
    meta = json.loads((run / "oracle" / "meta.json").read_text())
    assert meta["watermark"] is True and meta["final_watermark_ms"] > 0
    # Late records made the two answers differ: those windows are optional, the others exact.
    assert r["keys"]["optional"] > 0 and r["keys"]["exact"] > 0
    # The oracle ran until Spark had nothing left to do: every window whose end the final watermark passed is
    # there, the ones past it (which hold events) are not, as in the stream.
    final = datetime.fromtimestamp(meta["final_watermark_ms"] / 1000, tz=UTC).replace(tzinfo=None)
    minutes = set(pl.read_parquet(run / "oracle" / "output.parquet")["minute"])
    starts = set(pl.read_parquet(run / "events.parquet")["event_time"].dt.truncate("1m"))
    assert minutes == {m for m in starts if m + timedelta(minutes=1) <= final}
    assert any(m + timedelta(minutes=1) > final for m in starts)


@needs_postgres
@pytest.mark.long
def test_the_ci_recipe_inits_and_passes_the_upsert_job_in_a_users_repository(spark_cluster, tmp_path):
    """examples/ci/consistency.sh, the step examples/ci/github-workflow.yml runs, in a user's repository: init
    writes the test once, pytest passes it (here on this suite's environment and cluster, one trial)."""
    repo = tmp_path / "repo"
    (repo / "jobs").mkdir(parents=True)
    shutil.copy(REPO / "examples" / "orders_upsert.py", repo / "jobs" / "orders_upsert.py")
    env = {**os.environ, "JOB": "jobs/orders_upsert.py:run", "SCHEMA": ORDER, "SINK": "postgres:customer_totals",
           "KEY": "customer", "STREAMCHAOS_VENV": sys.prefix, "CHAOS_TRIALS": "1"}
    args = [str(REPO / "examples" / "ci" / "consistency.sh"), "--chaos-events", "600", "--chaos-shrink-trials", "1",
            "--chaos-cluster", spark_cluster.master_url, f"--basetemp={tmp_path / 'base'}"]
    run = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout[-3000:] + run.stderr[-2000:]
    written = repo / "tests" / "test_streaming_consistency.py"
    assert 'JOB = "jobs.orders_upsert:run"' in written.read_text()  # the path, as a module of the repository
    assert (repo / "chaos-report.html").stat().st_size > 0
    missing = subprocess.run(args, cwd=repo, env={k: v for k, v in env.items() if k != "SCHEMA"},
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0 and "set SCHEMA" in missing.stderr


def test_a_sqlite_job_gets_its_file_through_database_url_and_is_exactly_once(chaos_harness, tmp_path):
    r = trial(chaos_harness, tmp_path, job("orders_sqlite"), "--schema", ORDER, "--sink", "sqlite:customer_counts",
              "--key", "customer", *KILL)
    assert all(f["fired"] for f in r["faults"]), r["faults"]
    assert r["verdict"] == "exactly-once" and r["meets"] is True and r["keys"]["exact"] > 1
    run = Path(r["run_dir"])
    assert (run / "frozen" / "sink" / "job.db").exists() and (run / "oracle" / "job.db").exists()


def test_a_pipeline_with_auto_phases_gets_its_sink_phases_without_reporting_them(spark_cluster, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "user_pipelines"), str(REPO)])}
    run = cli("trial", "plain_sink:PIPELINE", "--events", "1000", "--fault", "kill-driver@3:sink-done", "--json",
              "--cluster", spark_cluster.master_url, "--keep", str(tmp_path / "run"), cwd=tmp_path, env=env)
    assert run.rc == 0, run.stderr[-2000:]
    r = run.json
    assert all(f["fired"] for f in r["faults"]) and r["verdict"] == "at-least-once", r
    assert r["anomaly_counts"]["duplicated"] == 200 and {d["batch"] for d in r["duplicated"]} == {3}


def test_doctor_finds_postgresqls_jdbc_driver_for_sparks_jdbc_writer():
    from chaos.cli.doctor import check_jdbc

    check = check_jdbc()
    assert check.status == "ok" and "JDBC driver" in check.detail, check


UDF = """package udfs;
public class PlusOne implements org.apache.spark.sql.api.java.UDF1<Long, Long> {
    public Long call(Long x) { return x == null ? null : x + 1; }
}
"""
UDF_JOB = '''"""Orders with a Java UDF from the team's jar and PostgreSQL's driver asked by coordinates, as spark-submit
would give them: its builder's spark.jars and spark.jars.packages."""
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def run():
    spark = (SparkSession.builder.appName("orders-udf")
             .config("spark.jars", "lib/udfs.jar")
             .config("spark.jars.packages", "org.postgresql:postgresql:42.6.0")
             .getOrCreate())
    spark.udf.registerJavaFunction("plus_one", "udfs.PlusOne", LongType())
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*")
              .selectExpr("*", "plus_one(amount) AS amount_next"))
    return (orders.writeStream.format("parquet").option("path", "/data/orders")
            .option("checkpointLocation", "/chk/orders").start())
'''


def test_a_job_that_brings_its_own_jars_gets_them_on_every_driver_and_executor(chaos_harness, tmp_path):
    """A job's ``spark.jars`` (a Java UDF its executors run) and ``spark.jars.packages`` reach the session the
    harness gives it, across a driver kill: without them ``registerJavaFunction`` finds no class."""
    import zipfile

    from chaos.machine.jvm import javac
    from chaos.machine.spark import spark_home
    from pipelines_under_test import resolve

    project = tmp_path / "project"
    (project / "lib").mkdir(parents=True)
    (project / "PlusOne.java").write_text(UDF)
    subprocess.run([javac(), "-d", str(project / "classes"), "-cp", f"{spark_home()}/jars/*",
                    str(project / "PlusOne.java")], check=True)
    with zipfile.ZipFile(project / "lib" / "udfs.jar", "w") as jar:
        jar.write(project / "classes" / "udfs" / "PlusOne.class", "udfs/PlusOne.class")
    (project / "orders_udf.py").write_text(UDF_JOB)
    r = trial(chaos_harness, tmp_path, f"{project}/orders_udf.py:run", "--schema", ORDER, "--sink", "parquet",
              "--events", "600", "--fault", "kill-driver@1:sink-done", "--json")
    assert r["verdict"] == "exactly-once" and all(f["fired"] for f in r["faults"]), r
    written = pl.read_parquet(Path(r["run_dir"]) / "sink" / "files" / "*.parquet")
    assert written.height == 600 and (written["amount_next"] == written["amount"] + 1).all()
    notes = resolve(r["pipeline"]).notes
    assert "the job's jars (orders_udf.py:12, orders_udf.py:13) are on its session's class path" in notes, notes


PARTITION_JOB = '''"""Orders upserted partition by partition from the executors, to the compose database it names."""
import os

from psycopg import connect
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
DB = dict(host="postgres", port=5432, dbname="shop", user="etl", password="etl")


def write_partition(rows):
    with connect(**DB) as conn:
        for r in rows:
            conn.execute("INSERT INTO orders VALUES (%s, %s, %s, %s) ON CONFLICT (order_id) DO NOTHING",
                         (r.order_id, r.customer, r.amount, r.ts))


def audit_partition(rows):
    with connect(os.environ["DATABASE_URL"]) as conn:
        for r in rows:
            conn.execute("INSERT INTO audit VALUES (%s) ON CONFLICT DO NOTHING", (r.order_id,))


class Seen:
    """A side query's foreach writer: the order ids it saw, by DATABASE_URL in its open."""

    def open(self, partition_id, epoch_id):
        self.conn = connect(os.environ["DATABASE_URL"], autocommit=True)
        return True

    def process(self, r):
        self.conn.execute("INSERT INTO seen VALUES (%s) ON CONFLICT DO NOTHING", (r.order_id,))

    def close(self, error):
        self.conn.close()


def write_batch(batch, batch_id):
    batch.foreachPartition(write_partition)
    batch.select("order_id").foreachPartition(audit_partition)


def run():
    spark = SparkSession.builder.getOrCreate()
    with connect(**DB) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, customer TEXT, amount BIGINT, "
                     "ts TIMESTAMP)")
        conn.execute("CREATE TABLE IF NOT EXISTS audit (order_id TEXT PRIMARY KEY)")
        conn.execute("CREATE TABLE IF NOT EXISTS seen (order_id TEXT PRIMARY KEY)")
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    query = orders.writeStream.foreachBatch(write_batch).option("checkpointLocation", "/chk/orders").start()
    orders.writeStream.foreach(Seen()).option("checkpointLocation", "/chk/seen").queryName("seen").start()
    return query
'''


@needs_postgres
def test_connections_the_executors_open_reach_the_trials_database(chaos_harness, tmp_path):
    """A job that writes from its executors (``foreachPartition`` with ``from psycopg import connect`` and a
    docker-compose host, or reading ``DATABASE_URL`` there, as a side query's ``foreach`` writer does) writes the
    trial's database:
    the workers get the run's variables and the rerouted ``connect`` with the task."""
    import psycopg

    project = tmp_path / "project"
    project.mkdir()
    (project / "orders_partitions.py").write_text(PARTITION_JOB)
    r = trial(chaos_harness, tmp_path, f"{project}/orders_partitions.py:run", "--schema", ORDER, "--sink",
              "postgres:orders", "--events", "600", "--fault", "kill-driver@1:sink-done", "--json")
    assert r["verdict"] == "exactly-once" and all(f["fired"] for f in r["faults"]), r
    assert r["anomaly_counts"] == {"lost": 0, "duplicated": 0, "unexpected": 0}
    with psycopg.connect(chaos_harness.database.dsn) as conn:  # the audit rows, by DATABASE_URL there
        assert conn.execute("SELECT count(*) FROM audit").fetchone()[0] == 600
        # The side query's foreach writer ran on its own checkpoint and reported no phase: only the query under
        # test has sink phases, reported by the driver around its foreachBatch.
        assert conn.execute("SELECT count(*) FROM seen").fetchone()[0] > 0
    history = [json.loads(line) for line in (Path(r["run_dir"]) / "history.jsonl").open()]
    sink_phases = [h for h in history if h["kind"] == "phase" and h["phase"] in ("sink-write", "sink-done")]
    assert sink_phases and not any("partition" in h["detail"] for h in sink_phases), sink_phases[:3]
    assert (Path(r["run_dir"]) / "checkpoint-seen" / "offsets").is_dir()


MYSQL_JOB = '''
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
DB = {"kind": "mysql", "host": "db", "port": 3306, "name": "shop"}


def write(batch, batch_id):
    url = f"jdbc:{DB['kind']}://{DB['host']}:{DB['port']}/{DB['name']}"
    batch.write.jdbc(url, "orders", mode="append", properties={"user": "app"})


def run():
    spark = SparkSession.builder.appName("orders-mysql").getOrCreate()
    orders = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", "kafka:9092")
              .option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/tmp/cp/orders-mysql").start()
'''


def test_a_database_the_job_names_only_inside_a_batch_is_one_line_not_a_crash_loop(chaos_harness, tmp_path):
    """The job's JDBC URL is built from its settings when a batch writes (no URL in its text to refuse at start):
    the harness's refusal, raised inside foreachBatch, ends the trial as the user's mistake in its one line, not
    as a driver that keeps dying."""
    script = tmp_path / "orders_mysql.py"
    script.write_text(MYSQL_JOB)
    with pytest.raises(UserError, match=r"^the job writes to jdbc:mysql://db:3306/shop: streamchaos runs PostgreSQL "
                                        r"only .* \(its output: "):
        trial(chaos_harness, tmp_path, f"{script}:run", "--schema", ORDER, "--sink", "postgres:orders",
              "--events", "400", "--json")
