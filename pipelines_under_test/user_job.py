"""A user's streaming job as written (``module:function``), judged against Spark as its oracle.

The driver side is ``chaos.asjob`` (the job's source, sink and checkpoint rerouted, the sink phases around
its foreachBatch); this side prepares and reads back the sink and the batch oracle's output. Rows carry no
provenance the harness can trust, so the verdict compares row multisets (or, with a key, the final row per
key) and is labelled inferred.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from chaos.jobspec import JobSpec, event_id, id_field, parse_schema
from chaos.spec import PHASES
from pipelines_under_test.base import Pipeline
from pipelines_under_test.files import log_files

ORACLE_DATABASE = "streamchaos_oracle"


class UserJob(Pipeline):
    provenance = False
    guarantee = "exactly-once"
    # Whether the job keeps state is known only once it runs: a state-commit fault on a stateless job does
    # not fire (and the history says so).
    state_store = True
    rehearsable = False
    source_frame = False  # it builds its own reads (chaos.asjob substitutes them)
    spark_oracle = True

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec.validate()
        self.name = spec.entry
        self.ref = spec.ref
        self.description = f"your job {spec.entry}, sink {spec.sink}, Spark batch as the oracle"
        self.database = self.sink_channel = spec.sink_kind == "postgres"
        foreach_batch = spec.sink_kind == "postgres"  # its phases are reported around the job's foreachBatch
        self.phases = tuple(p for p in PHASES if foreach_batch or p not in ("sink-write", "sink-done"))

    @property
    def compare_key(self) -> tuple[str, ...]:
        return self.spec.key

    def row_event(self, row: dict) -> int | None:
        """A row that keeps the payload's id field (``order_id``) came from that event (chaos.jobspec.roles)."""
        if not self.spec.schema:
            return None
        field = id_field(parse_schema(self.spec.schema))
        return event_id(field, row.get(field.name)) if field is not None and field.name in row else None

    # -- the sink -------------------------------------------------------------------------------
    def prepare_database(self, dsn: str) -> None:
        """The job's table dropped (the job creates it, as it does in production) in the trial's database
        and the oracle's."""
        import psycopg

        from chaos.postgres import other_database

        with psycopg.connect(dsn, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (ORACLE_DATABASE,)).fetchone() is None:
                conn.execute(f"CREATE DATABASE {ORACLE_DATABASE}")
            conn.execute(f"DROP TABLE IF EXISTS {self.spec.table}")
        with psycopg.connect(other_database(dsn, ORACLE_DATABASE), autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {self.spec.table}")

    def oracle_dsn(self, dsn: str) -> str | None:
        from chaos.postgres import other_database

        return other_database(dsn, ORACLE_DATABASE) if self.database else None

    def export_database(self, dsn: str, sink_dir: Path) -> None:
        from chaos.postgres import export_table, other_database

        export_table(dsn, self.spec.table, Path(sink_dir) / "output.parquet")
        oracle = Path(sink_dir).parent / "oracle"
        oracle.mkdir(exist_ok=True)
        export_table(other_database(dsn, ORACLE_DATABASE), self.spec.table, oracle / "output.parquet")

    def read_output(self, sink_dir: Path) -> pl.DataFrame:
        return _read_sink(Path(sink_dir), self.database)

    def expected_output(self, run_dir: Path) -> pl.DataFrame | None:
        """What the Spark batch query over every record wrote (``oracle/`` of the run), None if it did not run."""
        oracle = Path(run_dir) / "oracle"
        if not oracle.is_dir():
            return None
        return _read_sink(oracle, self.database)

    # -- the driver side ------------------------------------------------------------------------
    def start(self, ctx):
        from chaos.asjob import start_job

        return start_job(ctx.spark, self.spec, ctx, ctx.eventlog)

    def run_oracle(self, spark, config: dict) -> None:
        from chaos.asjob import run_batch

        run_batch(spark, self.spec, config["eventlog"], Path(config["oracle_dir"]), config.get("oracle_dsn"))


def _read_sink(folder: Path, database: bool) -> pl.DataFrame:
    if database:
        path = folder / "output.parquet"
        return pl.read_parquet(path) if path.exists() else pl.DataFrame()
    files = folder / "files"
    # A streaming file sink: the files its _spark_metadata log commits; a batch write: every part file.
    paths = log_files(files) if (files / "_spark_metadata").is_dir() else sorted(files.glob("*.parquet"))
    frames = [pl.read_parquet(p) for p in paths]
    return pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame()
