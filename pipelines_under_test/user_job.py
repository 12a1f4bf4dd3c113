"""A user's streaming job as written (``module:function``), judged against Spark as its oracle.

The driver side is ``chaos.jobs.as_written`` (the job's source, sink and checkpoint rerouted, the sink phases around
its foreachBatch); this side prepares and reads back the sink and the batch oracle's output. Rows carry no
provenance the harness can trust, so the verdict compares row multisets (or, with a key, the final row per
key) and is labelled inferred.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path

import polars as pl

from chaos.jobs.payloads import event_id, id_field, parse_schema
from chaos.jobs.reference import JobSpec
from chaos.scenario.faults import PHASES
from pipelines_under_test.base import Pipeline
from pipelines_under_test.files import log_files, partition_values
from properties.rows import BatchAnswer, varying_columns

ORACLE_DATABASE = "streamchaos_oracle"
ON_TIME_DATABASE = "streamchaos_oracle_on_time"
AGAIN_DATABASE = "streamchaos_oracle_again"  # the answer's second run: which columns no two runs share
ORACLE_DATABASES = (ORACLE_DATABASE, ON_TIME_DATABASE, AGAIN_DATABASE)
# The sink table's columns the database fills itself (identity, serial, now() defaults), read from its definition.
FILLED_FILE = "filled_by_database.json"
SQLITE_FILE = "job.db"  # a sqlite:TABLE job's database, in the trial's sink directory (and the oracle's)


def _spark_version() -> str:
    import pyspark

    return pyspark.__version__


class UserJob(Pipeline):
    provenance = False
    guarantee = "exactly-once"
    # Whether the job keeps state is known only once it runs: a state-commit fault on a stateless job does
    # not fire (and the history says so).
    state_store = True
    source_frame = False  # it builds its own reads (chaos.jobs.as_written substitutes them)
    spark_oracle = True
    interpreted_sql = False  # run as written: Spark's own code generation

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec.validate()
        self.name = spec.entry
        self.ref = spec.ref
        self.description = f"your job {spec.entry}, sink {spec.sink}, Spark's answer as the oracle"
        self.database = spec.sink_kind == "postgres"
        # Its Kafka sink (Spark's, or a foreachBatch's batch writes) is the trial's output topic
        # (chaos.jobs.kafka.sink), its producers through the sink channel's proxy.
        self.kafka_sink = spec.sink_kind == "kafka"
        self.sink_channel = self.database or self.kafka_sink
        # Its sink phases are reported around the job's foreachBatch or Python data source writer, and by the
        # JVM commit protocol of a file sink (chaos.jobs.as_written).
        self.file_sink = spec.sink_kind == "parquet"
        # A Delta table (chaos.jobs.delta_tables): Delta's jars and SQL on every driver; a streaming Delta sink's
        # sink-done comes from its checkpoint (CheckpointBarrier), a foreachBatch's from around the function.
        self.delta = spec.sink_kind == "delta"
        # Delta's jars and session settings: for its sink under test, or for the table a query before it writes.
        self.delta_jars = self.delta or (spec.upstream or ("",))[0] == "delta"
        # Its Kafka source read through Spark's connector on the harness's broker: no Python runs in the source's
        # path; `planned` comes from the checkpoint (offsets/N written), `reading` from its tasks' start.
        self.kafka = spec.kafka == "connector"
        # A query reading another query's table (bronze to silver) reads no Python either: the harness's source
        # feeds the query before it, whose phases are not the trial's.
        own_source = self.kafka or spec.upstream is not None
        self.checkpoint_phases = ("planned",) if own_source else ()
        self.task_phases = ("reading",) if own_source else ()
        self.phases = PHASES
        self.id_field = id_field(parse_schema(spec.schema), spec.id, spec.time_form) if spec.schema else None
        notes = []
        if self.id_field is not None:
            notes.append(f"the event id is {self.id_field.name}" + ("" if spec.id else
                         " (by its name; --id FIELD names another)"))
        if spec.time_form is not None:
            notes.append(f"the event time is {spec.time_form.field}, written as {spec.time_form.form}")
        self._payload_notes = tuple(notes)
        sink_notes = []
        from chaos.jobs.databases import named_databases, shown, writes_jdbc
        from chaos.jobs.reference import entry_text

        text = entry_text(spec.entry)
        named = named_databases(text)  # one with no server here is one line, before any JVM
        # Spark's JDBC writer in its code: each task reports sink-write once its transaction committed.
        self.executor_phases = ("sink-write",) if self.database and writes_jdbc(text) else ()
        if self.database:
            sink_notes += [f"the job's database {shown(url)} is the trial's (its tables kept)" for url in named]
        if spec.upstream:
            sink_notes.append(f"the job's query writing {spec.upstream[1]} feeds the query under test, which reads "
                              "it; that table is the trial's too")
        if self.delta:
            sink_notes.append(f"the job's Delta table {spec.table or '(the first it writes)'} is the trial's; "
                         "other tables it names by path are the trial's too")
        self._sink_notes = tuple(sink_notes)
        # The jars the job asks its session for (chaos.jobs.job_jars): one that cannot run here is one line, now.
        from chaos.jobs.job_jars import asked_jars, wanted_jars
        from chaos.jobs.reference import entry_source

        entry_file = entry_source(spec.entry)
        self._jars_asked = asked_jars(entry_file)
        self._jars_wanted = wanted_jars(self._jars_asked, _spark_version(), entry_file.parent) \
            if self._jars_asked else []
        if spec.encoding.startswith("avro") and not any(w.what and w.what.artifact.startswith("spark-avro_")
                                                        for w in self._jars_wanted):
            from chaos.jobs.job_jars import spark_avro  # what a job's spark-submit --packages would have added

            self._jars_wanted.append(spark_avro(_spark_version(), f"--kafka-value {spec.encoding.split(':')[0]}"))

    @cached_property
    def stateful_operators(self) -> list[str]:
        """The stateful operators its code applies to the stream (chaos.jobs.stateful), read when first asked (a
        campaign's plan, the trial's first lines), not at every resolve of the job."""
        from chaos.jobs.reference import entry_source
        from chaos.jobs.stateful import stateful_operators

        return stateful_operators(entry_source(self.spec.entry))

    @property
    def state_known(self) -> bool:
        """Known from its code, not from ``state_store``, which only lets every phase be planned until a checkpoint
        shows whether the query keeps state: a job seen to keep state gets the state store's window early."""
        return bool(self.stateful_operators)

    @property
    def notes(self) -> tuple[str, ...]:
        """What the trial says in its first lines. Whether the schema is the one the job's code declares is read from
        its file here, where the lines are printed, not at every resolve of the job."""
        from chaos.jobs.declared import declared_schema
        from chaos.jobs.reference import entry_source

        declared = declared_schema(entry_source(self.spec.entry)) if self.spec.schema else None
        origin = (f"the payload's schema is the one the job declares ({declared.where})",) \
            if declared is not None and declared.ddl == self.spec.schema else ()
        ops = self.stateful_operators
        state = (f"its query keeps state ({', '.join(ops[:2])}{', ...' if len(ops) > 2 else ''})",) if ops else ()
        from chaos.jobs.job_jars import said

        jars = said(self._jars_wanted, self._jars_asked)
        return (*self._payload_notes, *origin, *state, *self._sink_notes, *jars)

    @property
    def compare_key(self) -> tuple[str, ...]:
        return self.spec.key

    def row_event(self, row: dict) -> int | None:
        """A row that keeps the payload's id field (``order_id``) came from that event (chaos.jobs.payloads.roles)."""
        field = self.id_field
        return event_id(field, row[field.name]) if field is not None and field.name in row else None

    # -- the sink -------------------------------------------------------------------------------
    def unavailable(self) -> str | None:
        from chaos.jobs import job_jars
        from chaos.machine.jvm import hooks_unavailable

        if refused := job_jars.unavailable(self._jars_wanted):
            return refused

        from chaos.machine.jvm import checkpoint_barrier_unavailable

        if self.kafka:
            from chaos.clusters.kafka.jars import connector_available

            if refused := connector_available():
                return refused
        if self.checkpoint_phases and (refused := checkpoint_barrier_unavailable()):
            return refused
        if self.delta_jars:
            from chaos.stream.sinks.delta import delta_unavailable

            return delta_unavailable() or checkpoint_barrier_unavailable()
        return hooks_unavailable() if self.file_sink else None

    def spark_jars(self, *, say=None) -> list[Path]:
        """Delta's and the hooks (CheckpointBarrier and DeltaLogBarrier: a streaming Delta sink's phases) for a Delta
        job, the hooks (BarrierJdbcDriver) for a job writing through JDBC, then the jars the job asks for
        (chaos.jobs.job_jars)."""
        from chaos.jobs.job_jars import jar_files
        from chaos.machine.jvm import hooks_jar
        from chaos.machine.spark import spark_home
        from chaos.stream.sinks.delta import delta_application_jars

        jars: list[Path] = []
        if self.delta_jars:
            jars = delta_application_jars(say=say)  # the hooks jar among them
        elif self.executor_phases:
            jars = [hooks_jar()]  # BarrierJdbcDriver
        own = jar_files(self._jars_wanted, Path(spark_home()) / "jars", say=say)
        return [*jars, *(j for j in own if j not in jars)]

    def read_deliveries(self, sink_dir: Path) -> pl.DataFrame | None:
        """A Delta table's write history: each commit's batch and driver (chaos.jobs.as_written tags them)."""
        if self.kafka_sink:
            return None  # Kafka's records carry no batch
        if not self.delta:
            return super().read_deliveries(sink_dir)
        from chaos.stream.sinks.delta import deliveries

        return deliveries(Path(sink_dir) / "files")

    def sink_findings(self, sink_dir: Path) -> dict | None:
        if self.kafka_sink:  # the output topic's records, committed or not
            from pipelines_under_test.kafka import topic_findings

            return topic_findings(sink_dir)
        if not self.delta:
            return None
        from chaos.stream.sinks.delta import findings

        return findings(Path(sink_dir) / "files")

    def kafka_records(self, events):
        from chaos.jobs.reference import kafka_records

        return kafka_records(self.spec, events)

    def boot_conf(self) -> dict[str, str]:
        """A file sink's phases come from a JVM class (chaos/machine/jvm) the driver loads at boot. (Spark's Kafka
        connector is the harness's: every driver it boots after the first such trial has it, spares too.)"""
        conf: dict[str, str] = {}
        if self.delta_jars:
            from chaos.stream.sinks.delta import SESSION_CONF

            conf |= SESSION_CONF
        if self.file_sink:
            from chaos.machine.jvm import hooks_jar

            jar = str(hooks_jar())
            conf |= {"spark.driver.extraClassPath": jar, "spark.executor.extraClassPath": jar}
        return conf

    def prepare_database(self, dsn: str) -> None:
        """Every table of the trial's database and the oracle's dropped (the job creates its tables, as it does
        in production on a fresh database): a job's staging, audit or bookkeeping tables start empty too, not
        only the table under test."""
        import psycopg

        from chaos.clusters.postgres import other_database

        with psycopg.connect(dsn, autocommit=True) as conn:
            for name in ORACLE_DATABASES:
                if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                    conn.execute(f"CREATE DATABASE {name}")
            _empty(conn)
            self._sql_init(conn)
        for name in ORACLE_DATABASES:
            with psycopg.connect(other_database(dsn, name), autocommit=True) as conn:
                _empty(conn)
                self._sql_init(conn)

    def _sql_init(self, conn) -> None:
        """The job's own DDL (``--sql-init``: the ``init.sql`` a repository keeps beside its job), in one
        transaction per file; PostgreSQL's refusal is the user's to fix, in one line."""
        import psycopg

        from chaos.errors import UserError

        for path in self.spec.sql:
            try:
                text = Path(path).read_text()
            except OSError as exc:
                raise UserError(f"--sql-init {path}: {exc.strerror}") from None
            try:
                with conn.transaction():
                    conn.execute(text)
            except psycopg.Error as exc:
                at = int(exc.diag.statement_position or 0)
                where = f" at line {text[:at].count(chr(10)) + 1}" if at else ""
                raise UserError(f"--sql-init {path}: PostgreSQL rejected it{where}: "
                                f"{exc.diag.message_primary or exc}") from None

    def oracle_dsn(self, dsn: str) -> str | None:
        from chaos.clusters.postgres import other_database

        return other_database(dsn, ORACLE_DATABASE) if self.database else None

    def export_database(self, dsn: str, sink_dir: Path) -> None:
        from chaos.clusters.postgres import export_table, filled_by_database, other_database
        from chaos.store.atomic import write_json

        export_table(dsn, self.spec.table, Path(sink_dir) / "output.parquet")
        write_json(Path(sink_dir) / FILLED_FILE, filled_by_database(dsn, self.spec.table))
        oracle = Path(sink_dir).parent / "oracle"
        if not (oracle / "meta.json").exists():  # the last driver did not get to run it (a stalled trial)
            return
        export_table(other_database(dsn, ORACLE_DATABASE), self.spec.table, oracle / "output.parquet")
        if (oracle / "again").is_dir():
            export_table(other_database(dsn, AGAIN_DATABASE), self.spec.table, oracle / "again" / "output.parquet")
        if json.loads((oracle / "meta.json").read_text()).get("watermark"):
            (oracle / "on_time").mkdir(exist_ok=True)
            export_table(other_database(dsn, ON_TIME_DATABASE), self.spec.table, oracle / "on_time" / "output.parquet")

    def read_output(self, sink_dir: Path) -> pl.DataFrame:
        return self._read(Path(sink_dir))

    def _read(self, folder: Path) -> pl.DataFrame:
        kind = self.spec.sink_kind
        if kind == "postgres":  # exported by export_database
            path = folder / "output.parquet"
            return pl.read_parquet(path) if path.exists() else pl.DataFrame()
        if kind == "sqlite":
            return _read_sqlite(folder / SQLITE_FILE, self.spec.table)
        if kind == "kafka":  # the output topic as exported, or the answer's rows (chaos.jobs.kafka.sink)
            from chaos.jobs.kafka.sink import read_rows

            return read_rows(folder)
        table = folder / "files"
        if kind == "delta":  # its latest version, every column, partition columns too (delta-rs)
            from chaos.stream.sinks.delta import read_table

            return read_table(table)
        frames = [pl.read_parquet(p).with_columns(pl.lit(v, dtype=pl.Utf8).alias(k)
                                                  for k, v in partition_values(p, table).items())
                  for p in log_files(table)]  # the files its _spark_metadata commits, partition columns from the path
        return pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame()

    def _url(self, folder: Path, dsn: str | None) -> str | None:
        """``DATABASE_URL`` for a run writing into ``folder`` (the trial's sink, the oracle's) or ``dsn``."""
        from chaos.jobs.as_written import database_url

        if self.spec.sink_kind == "sqlite":
            return f"sqlite:///{Path(folder).resolve() / SQLITE_FILE}"
        return database_url(dsn) if dsn else None

    def expected_output(self, run_dir: Path) -> BatchAnswer | None:
        """What the job wrote run over every record at once (``oracle/`` of the run; ``on_time/`` in it for a job
        with a watermark), None if the trial's last driver did not run it."""
        oracle = Path(run_dir) / "oracle"
        if not (oracle / "meta.json").exists():
            return None
        meta = json.loads((oracle / "meta.json").read_text())
        on_time = self._read(oracle / "on_time") if meta.get("watermark") else None
        rows = self._read(oracle)
        left_out = varying_columns(rows, self._read(oracle / "again")) if (oracle / "again").is_dir() else ()
        filled = Path(run_dir) / "sink" / FILLED_FILE
        by_db = tuple(json.loads(filled.read_text())) if filled.exists() else ()
        return BatchAnswer(rows, on_time, tuple(c for c in left_out if c not in by_db), by_db)

    # -- the driver side ------------------------------------------------------------------------
    def start(self, ctx):
        from chaos.jobs.as_written import start_job

        log = {"eventlog": ctx.eventlog, "controller": ctx.controller or "", "checkpoint": ctx.checkpoint,
               "maxRowsPerBatch": str(ctx.events_per_batch)}
        if self.kafka and ctx.kafka:
            log["kafka"] = json.dumps(ctx.kafka)
        return start_job(ctx.spark, self.spec, log, ctx.checkpoint, Path(ctx.sink_dir) / "files", ctx.phase,
                         self._url(ctx.sink_dir, ctx.sink_dsn), ctx.incarnation)[0]

    def run_oracle(self, spark, config: dict) -> None:
        """The job over every record in one micro-batch, twice (``again/``: the columns the two runs disagree on are
        left out of the comparison); with a watermark, once more over the records the stream read on time
        (chaos.jobs.as_written.run_answer). meta.json last: its presence says the answer is complete."""
        from chaos.clusters.postgres import other_database
        from chaos.jobs.as_written import batch_watermarks, run_answer
        from chaos.jobs.job_threads import await_job_threads
        from chaos.store.atomic import write_json

        oracle, dsn = Path(config["oracle_dir"]), config.get("oracle_dsn")
        await_job_threads()  # the stream's own writes first, to the stream's DATABASE_URL
        marks = batch_watermarks(config["checkpoint"])
        # The answer reads the stand-in (it can leave out what the stream read late), with the trial topic's name:
        # the same rows Spark's connector gave the stream (chaos.jobs.reference.kafka_records).
        kafka = config.get("kafka") or None
        topic = (kafka or {}).get("topic")
        watermark = run_answer(spark, self.spec, config["eventlog"], oracle, self._url(oracle, dsn), topic=topic,
                               kafka=kafka)
        run_answer(spark, self.spec, config["eventlog"], oracle / "again",
                   self._url(oracle / "again", other_database(dsn, AGAIN_DATABASE) if dsn else None), topic=topic,
                   kafka=kafka)
        if watermark:
            run_answer(spark, self.spec, config["eventlog"], oracle / "on_time",
                       self._url(oracle / "on_time", other_database(dsn, ON_TIME_DATABASE) if dsn else None),
                       late=marks, topic=topic, kafka=kafka)
        write_json(oracle / "meta.json", {"watermark": watermark, "batches": len(marks),
                                          "final_watermark_ms": max((wm for _, wm in marks), default=None)})


def _empty(conn) -> None:
    """A database with no table of anyone's, whatever its schema (``raw.events`` as much as ``public.orders``):
    every schema of a user's dropped and made again, empty, so a job that expects its schema finds it."""
    schemas = [name for (name,) in conn.execute(
        "SELECT nspname FROM pg_namespace WHERE nspname NOT IN ('pg_catalog', 'information_schema') "
        "AND nspname NOT LIKE 'pg\\_%'").fetchall()]
    from psycopg import sql

    for name in sorted({*schemas, "public"}):
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))


def _read_sqlite(path: Path, table: str) -> pl.DataFrame:
    """A table of a job's SQLite file (empty if the job never created it)."""
    import sqlite3

    if not path.exists():
        return pl.DataFrame()
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone() is None:
            return pl.DataFrame()
        cur = db.execute(f"SELECT * FROM {table}")  # an identifier (chaos.jobs.reference)
        columns = [d[0] for d in cur.description]
        rows = cur.fetchall()
    return pl.DataFrame(rows, schema=columns, orient="row", infer_schema_length=None) if rows else \
        pl.DataFrame({c: [] for c in columns})
