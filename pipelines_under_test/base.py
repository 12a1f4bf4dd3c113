"""What a pipeline under test is: how to start it on the harness's source, and how to read its sink.

Users implement this for their own pipelines and run them as ``streamchaos trial module:attr``.
The driver side (``start``) runs in the driver process, inside Spark; the harness side
(``prepare_sink``, ``read_output``) runs in the harness and never needs Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from chaos.scenario.faults import PHASES


@dataclass
class DriverContext:
    """What the driver hands a pipeline: Spark, the source stream, where to checkpoint and write."""

    spark: Any  # pyspark.sql.SparkSession
    source: Any  # the streaming DataFrame of events (EVENT_SCHEMA)
    checkpoint: str
    sink_dir: Path
    incarnation: int
    phase: Callable[..., None]  # phase(batch, name, **detail): report and wait at a barrier
    sink_dsn: str | None = None  # the database through the sink channel's proxy (database pipelines)
    controller: str | None = None  # host:port of the phase barriers, for sinks that report from executors
    feed: str | None = None  # host:port of the harness's line server (pipelines with ``socket_feed``)
    events: int = 0  # how many events the trial's stream holds (pipelines with their own source stop there)
    partitions: int = 1  # the stream's partitions
    events_per_batch: int = 200
    eventlog: str = ""  # the event log's URL (a user's job: its substituted source reads it)
    kafka: dict | None = None  # the trial's broker and topic, for a job whose Kafka source is Spark's connector


class Pipeline:
    """Base class. Subclasses set the attributes and implement ``start``, ``read_output``, ``oracle``.

    Two kinds of output are judged (docs/verdicts.md):

    * with provenance (``provenance = True``): output rows name the input ids they carry;
      ``observed_ids`` lists one id per effect and the classifier counts multiplicities;
    * without (``provenance = False``, a plain count per key): ``expected_counts`` and
      ``observed_counts`` give ``key, n`` and the classifier infers loss/duplication from per-key
      deltas, labelled as inferred.

    The checker hands oracles the events with a ``batch`` column (the micro-batch that read each
    event, from the write-ahead offsets; event-time oracles model the watermark with it). Without
    that column the events are a batch query's input (the differential test against Spark batch).

    A stateful pipeline (``state = True``) also gets the consistent-cut check: the driver reads
    the state of every committed batch through ``state_rows`` and the checker compares it with
    ``expected_state`` over exactly the events below that batch's end offsets.
    """

    name: str = ""
    _ref: str = ""  # set by ``resolve`` for a user's pipeline (see ``ref``)
    description: str = ""
    notes: tuple[str, ...] = ()  # what the trial says in its first lines (a user's job: the databases it reroutes)
    guarantee: str = "exactly-once"
    provenance: bool = True
    state: bool = False
    sink_channel: bool = False  # the sink talks to a server over a socket the harness can proxy
    database: bool = False  # the sink is the harness's PostgreSQL (prepare_database / export_database)
    socket_feed: bool = False  # reads the harness's line server (chaos/stream/socketfeed.py), not the replayable source
    # Its Kafka topic is fed over the trial, one batch of records per commit (chaos/stream/kafkafeed.py), not
    # written whole before the first driver: for queries that cut batches by time (real-time mode).
    kafka_fed: bool = False
    own_source: bool = False  # builds its own source (socket, rate) instead of reading the harness's event log
    # Scenario fields this pipeline's streams need unless the user says otherwise (dedup: re-sent records).
    stream_defaults: dict[str, Any] = {}  # noqa: RUF012 (read-only class default)
    # Options of ``spark.read.format("statestore")`` for the consistent cut (transformWithState: stateVarName).
    state_options: dict[str, str] = {}  # noqa: RUF012 (read-only class default)
    # ``state_rows`` as a row-by-row projection (SQL expressions over the reader's ``key`` and ``value``), if it
    # is one; with ``state_change_feed`` (the state store provider replays changes: HDFS, RocksDB with
    # changelog checkpointing), the state of every batch is rebuilt from one read of the change feed.
    state_columns: tuple[str, ...] = ()
    state_change_feed: bool = False
    # The query keeps a state store (an aggregation, a join, a dedup) even where the consistent cut is not
    # checked (``state``): its batches pass ``state-commit``. None: the same as ``state``.
    state_store: bool | None = None
    _phases: tuple[str, ...] | None = None
    # ``streamchaos conformance``'s fault schedules for this pipeline, when the standard mix cannot fit it.
    conformance_mix: tuple[str, ...] = ()
    # Commits a fresh incarnation must add after the input is drained, before the verdict: for a query
    # whose committed offsets can name rows it never wrote (continuous processing), so rows a restart
    # still delivers count as delayed, not lost. 0: the drain is final (micro-batch queries).
    settle_commits: int = 0
    # Commits the running query must add after the one that covers the input before the stream counts as drained:
    # a processing-time query's batches without data, which fire its due timers. 0: that commit ends the stream.
    drain_commits: int = 0
    # The harness reports the sink phases around the pipeline's foreachBatch functions and Python data source
    # writers (chaos.jobs.as_written.sink_phases): it need not call ``ctx.phase`` for them.
    auto_phases: bool = False
    source_frame: bool = True  # ``DriverContext.source`` is made for it (a user's job makes its own reads)
    # The expected output is what Spark wrote running the job over every record at once (``run_oracle`` in the
    # trial's last driver, ``expected_output`` from the run directory): compared as rows, not through
    # ``oracle``/``expected_counts``.
    spark_oracle: bool = False
    compare_key: tuple[str, ...] = ()  # with spark_oracle: the final row per key is compared, not the multiset
    # Its queries may run on Spark's interpreter instead of generated code (chaos.driver.process.INTERPRETED_SQL): the
    # same results for less CPU in a trial's short-lived JVMs. False: Spark's defaults, as in production.
    interpreted_sql: bool = True
    # Kafka: the trial produces its events into a topic of the harness's broker (``kafka_records``) and hands the
    # driver its address (``DriverContext.kafka``); ``kafka_sink``: an output topic too, read when the trial ends.
    kafka: bool = False
    kafka_sink: bool = False
    # Phases reported at the query's checkpoint files (chaos/machine/jvm/CheckpointBarrier.java): ``planned`` once
    # offsets/N is written, ``sink-done`` before commits/N. For a source or sink of Spark's own, no Python in it.
    checkpoint_phases: tuple[str, ...] = ()
    # Phases reported as its tasks start (chaos/machine/jvm/ReadingBarrier.java, an executor plugin): ``reading``
    # for a source of Spark's own.
    task_phases: tuple[str, ...] = ()
    # Phases its tasks report too, after the driver's (Spark's JDBC writer in a foreachBatch: each task's commit,
    # chaos/machine/jvm/BarrierJdbcDriver.java): a fault aimed at an executor waits for a task's report of them.
    executor_phases: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        """How scenarios name this pipeline, to resolve it again on replay: ``module:attr`` for a user's
        pipeline (set by ``pipelines_under_test.resolve``), else its catalogue name."""
        return self._ref or self.name

    @ref.setter
    def ref(self, value: str) -> None:
        self._ref = value

    @property
    def source_channel(self) -> bool:
        """Its source's connections go through the source channel's proxy: the harness's event log, or the Kafka
        broker's listener for the job (chaos.clusters.kafka.broker)."""
        return not self.own_source or self.kafka

    @property
    def state_known(self) -> bool:
        """Whether it is known, before any trial runs, to keep a state store: its campaigns open the state store's
        window among their first trials (properties.planning.canonical_windows)."""
        return bool(self.state if self.state_store is None else self.state_store)

    @property
    def phases(self) -> tuple[str, ...]:
        """The phases this pipeline's batches pass through: only there are faults planned and accepted.

        ``planned`` and ``reading`` are reported by the harness's event-log source (not by a source of the
        pipeline's own), ``state-commit`` by the checkpoint watcher when a state store writes a version,
        the sink phases by the sink, ``committed`` always. A pipeline whose batches differ (continuous
        processing) sets ``phases`` as a class attribute instead."""
        if self._phases is not None:
            return self._phases
        skip = {"planned", "reading"} if self.own_source else set()
        skip |= set() if self.state_known else {"state-commit"}
        return tuple(p for p in PHASES if p not in skip)

    @phases.setter
    def phases(self, value: tuple[str, ...]) -> None:  # an instance may name its phases (``self.phases = ...``)
        self._phases = tuple(value)

    @property
    def query_name(self) -> str:
        return self.name.replace("-", "_")

    def start_foreach_batch(self, ctx: DriverContext, frame, sink, output_mode: str = "append"):
        """Start ``frame`` into a foreachBatch ``sink`` on the trial's checkpoint (what most pipelines do)."""
        return (
            frame.writeStream.outputMode(output_mode).foreachBatch(sink)
            .option("checkpointLocation", ctx.checkpoint)
            .queryName(self.query_name)
            .start()
        )

    def transform(self, source):
        """The pipeline's logic on a DataFrame of events (streaming in a trial, batch in the oracle test)."""
        return source

    def batch_output(self, result) -> pl.DataFrame:
        """What the sink would hold after writing ``transform(all events)`` (a Spark batch DataFrame) once."""
        raise NotImplementedError

    def observed_ids(self, output: pl.DataFrame) -> pl.Series:
        """One entry per effect of an input id found in the output (provenance pipelines)."""
        return output["id"]

    def effect_ids(self, output: pl.DataFrame, events: pl.DataFrame) -> pl.Series:
        """What the classifier counts: ``observed_ids``, unless the pipeline maps ids first (dedup: to the
        copy its oracle expects)."""
        return self.observed_ids(output)

    def expected_counts(self, events: pl.DataFrame) -> pl.DataFrame:
        """``key, n`` the output must hold (pipelines without provenance)."""
        raise NotImplementedError

    def observed_counts(self, output: pl.DataFrame) -> pl.DataFrame:
        """``key, n`` the output does hold (pipelines without provenance)."""
        return output.select("key", "n")

    def state_rows(self, state_df):
        """Spark side: rows of ``spark.read.format("statestore")`` -> ``key`` + the compared value columns."""
        if not self.state_columns:
            raise NotImplementedError
        return state_df.selectExpr(*self.state_columns)

    def expected_state(self, events: pl.DataFrame) -> pl.DataFrame:
        """The oracle's state over ``events``: the same columns ``state_rows`` yields."""
        raise NotImplementedError

    def place_events(self, events: pl.DataFrame, partitions: int) -> pl.DataFrame:
        """The stream as this pipeline's source lays it out (``partition``, ``offset``): the harness's
        event log keeps the generated layout; a source of Spark's own may place ids differently."""
        return events

    def kafka_records(self, events: pl.DataFrame):
        """The trial's events as records of its topic: (partition, key bytes, value bytes, timestamp ms)."""
        raise NotImplementedError

    def unavailable(self) -> str | None:
        """Why this pipeline cannot run on this machine (a missing tool), or None; campaigns skip it then."""
        return None

    def boot_conf(self) -> dict[str, str]:
        """Spark settings the driver needs at JVM start (class paths of JVM hooks); runs in the driver."""
        return {}

    def spark_jars(self, *, say=None) -> list[Path]:
        """Jars every driver's application must hold for this pipeline (a sink's library: Delta Lake), resolved
        in the harness (``say``: what a first resolution fetches); none by default."""
        return []

    def sink_findings(self, sink_dir: Path) -> dict | None:
        """Facts about the sink beyond the rows (e.g. orphan files), stored in verdict.json as ``sink``."""
        return None

    def prepare_sink(self, sink_dir: Path) -> None:
        """Create the sink's tables/directories before the first driver incarnation."""

    def prepare_database(self, dsn: str) -> None:
        """Database pipelines: (re)create the sink's tables, connecting directly (not through the proxy)."""

    def export_database(self, dsn: str, sink_dir: Path) -> None:
        """Database pipelines: copy the final tables into ``sink_dir`` so the run is checked offline."""

    def start(self, ctx: DriverContext):
        """Start the streaming query (with ``checkpointLocation=ctx.checkpoint``) and return it."""
        raise NotImplementedError

    def read_output(self, sink_dir: Path) -> pl.DataFrame:
        """The sink's final contents; must have an ``id`` column (event provenance)."""
        raise NotImplementedError

    def oracle(self, events: pl.DataFrame) -> pl.DataFrame:
        """Expected provenance: one row per input id with ``required`` and ``multiplicity``."""
        raise NotImplementedError

    def unexplained(self, output: pl.DataFrame, events: pl.DataFrame) -> list[dict]:
        """Output rows that no loss or duplication of inputs explains (wrong values)."""
        return []

    def expected_output(self, run_dir: Path) -> pl.DataFrame | None:
        """``spark_oracle`` pipelines: the batch oracle's output stored in the run directory."""
        return None

    def row_event(self, row: dict) -> int | None:
        """``spark_oracle`` pipelines: the event id an output row names (by column), if it names one."""
        return None

    def run_oracle(self, spark, config: dict) -> None:
        """``spark_oracle`` pipelines, in the trial's last driver: run the batch oracle into the run directory."""
        raise NotImplementedError

    def oracle_dsn(self, dsn: str) -> str | None:
        """``spark_oracle`` database pipelines: the database the batch oracle writes to."""
        return None

    def read_deliveries(self, sink_dir: Path) -> pl.DataFrame | None:
        """The sink's write history (batch_id, incarnation, rows), if it keeps one."""
        return None
