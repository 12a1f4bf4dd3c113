"""A user's job run as written, in a driver: its source, sink and checkpoint rerouted through the harness.

The job is a plain PySpark function. While it runs, the driver stands in its way instead of asking it to
call anything:

* ``spark.readStream.format("kafka"|"json"|"parquet"|"csv"|"orc"|"rate")...load()`` (and ``.json(path)``
  and the like) returns the harness's replayable event log shaped as that source (``chaos.jobs.stand_ins``);
* ``foreachBatch(f)`` reports the sink phases around ``f`` (``sink-write`` before, ``sink-done`` after), so
  faults land inside the job's own sink; so does a Python ``DataSourceStreamWriter`` the job registers
  (``sink-write`` as each task writes, ``sink-done`` after the commit), a row-level ``foreach`` writer
  (``sink-write`` as each partition opens, ``sink-done`` after it closes), and a file sink (``sink-write`` once
  its part files are written, ``sink-done`` once ``_spark_metadata/N`` is);
* ``start()`` runs on the trial's checkpoint (a file sink on the trial's sink directory), whatever the job
  says; ``awaitTermination`` and ``spark.stop()`` return at once, so the harness keeps the query;
* ``DATABASE_URL`` (and ``JDBC_URL``, libpq's ``PG*``: chaos.jobs.job_env) names the harness's PostgreSQL,
  through the sink channel's proxy (or the trial's SQLite file); a JDBC URL or psycopg connection written in the
  job's code is rerouted there too (chaos.jobs.databases).

The oracle (``run_answer``) runs the same function again over every record the stream served, in one
micro-batch, with no fault, on a checkpoint and a ``DATABASE_URL`` of its own: what exactly-once output is,
by Spark's own semantics (output mode, watermark), with no model written by the user.
"""

from __future__ import annotations

import inspect
import json
import os
import re
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from chaos.errors import UserError
from chaos.jobs import avro_values, delta_tables
from chaos.jobs.chains import UPSTREAM, Chain, chain_for, in_order, stop_side_queries, without_reading_reports
from chaos.jobs.databases import phases_to, reroute, reroute_partitions
from chaos.jobs.job_env import DATABASE_VARS, database_env
from chaos.jobs.job_threads import await_job_threads, note_harness_threads
from chaos.jobs.kafka import answer as kafka_answer
from chaos.jobs.kafka import rerouting as kafka_rerouting
from chaos.jobs.kafka import sink as kafka_sink
from chaos.jobs.kafka.source import kafka_options
from chaos.jobs.named_checkpoints import named_location, start_on
from chaos.jobs.payloads import as_ddl, leaves, parse_schema, roles
from chaos.jobs.reference import JobSpec, import_entry
from chaos.jobs.scripts import script_runner
from chaos.jobs.sink_phases import PhasedForeach, bracketed, patched, phased_sources
from chaos.jobs.stand_ins import JOB_SOURCE_NAME, JobSource
from chaos.jobs.values import value_lists
from chaos.scenario.names import entry_module, is_script
from chaos.stream.source import logged_offsets

FILE_FORMATS = ("json", "parquet", "csv", "orc")


def entry_function(spec: JobSpec) -> Callable:
    """The job's function, imported as a driver imports it: afresh at every start, as a job's own process would,
    so what its module reads at import (``JDBC_URL = os.environ[...]``) is this run's (the oracle's database is
    not the stream's)."""
    import sys

    if is_script(spec.entry):
        return script_runner(spec)
    module_name, func, _ = entry_module(spec.entry)
    sys.modules.pop(module_name, None)
    module = import_entry(spec.entry)
    fn = getattr(module, func, None)
    if not callable(fn):
        raise UserError(f"{spec.entry}: {module_name} has no function {func!r}")
    # Its UDFs and lambdas go to the executors by value: they cannot import the job's module (it lives in the
    # user's project, which is on the drivers' path only).
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(module)
    return fn


def database_url(dsn: str) -> str:
    """A libpq key=value DSN as the URL jobs take from ``DATABASE_URL``, with the harness's password (from its
    passfile: the URL lives in the job's environment only, and goes wherever the job sends it, executors too)."""
    from chaos.clusters.postgres import password

    parts = dict(item.split("=", 1) for item in dsn.split())
    extra = "&".join(f"{k}={v}" for k, v in parts.items() if k not in ("host", "port", "user", "dbname"))
    secret = password()
    user = parts.get("user", "") + (f":{secret}" if secret else "")
    return (f"postgresql://{user}@{parts['host']}:{parts['port']}/{parts.get('dbname', 'postgres')}"
            + (f"?{extra}" if extra else ""))


def _recorders(orig: dict[str, Callable]) -> dict[str, Callable]:
    """A reader's or writer's ``format``, ``option``, ``options`` that note what they were told (``_seen``)."""

    def format(self, source):
        _seen(self)["format"] = source
        return orig["format"](self, source)

    def option(self, key, value):
        _seen(self)["options"][key] = value
        return self if kafka_sink.job_login(key) else orig["option"](self, key, value)

    def options(self, **opts):
        _seen(self)["options"].update(opts)
        return orig["options"](self, **{k: v for k, v in opts.items() if not kafka_sink.job_login(k)})

    return {"format": format, "option": option, "options": options}


def _seen(obj) -> dict:
    """What a reader or writer was told (format, options, schema): PySpark keeps it only in the JVM."""
    if "_streamchaos" not in obj.__dict__:
        obj.__dict__["_streamchaos"] = {"format": None, "options": {}, "schema": None}
    return obj.__dict__["_streamchaos"]


class _Reads:
    """``spark.readStream`` answers with the event log in the shape of the job's source."""

    NAMES = ("format", "option", "options", "schema", "load")

    def __init__(self, spark, spec: JobSpec, log_options: dict[str, str], chain: Chain | None = None) -> None:
        from pyspark.sql.streaming.readwriter import DataStreamReader

        self.spark = spark
        self.spec = spec
        # The harness's source feeds the first query of a chain (chaos.jobs.chains), which reads the table.
        self.log_options = chain.source_options(log_options) if chain else log_options
        self.chain = chain
        self.orig = {n: DataStreamReader.__dict__[n] for n in self.NAMES}

    def substitute(self, fmt: str, options: dict, schema) -> Any:
        fmt = fmt.lower()
        if fmt == "kafka" and self.log_options.get("kafka"):
            return self.connector(options)
        if fmt == "kafka":
            topics = [t.strip() for t in str(options.get("subscribe", "")).split(",") if t.strip()]
            if self.log_options.get("topic"):  # the oracle of a stream read through the connector: its topic
                topics = [self.log_options["topic"]]
            self.spec.fields()  # the payload's schema is needed: one line if it is missing
            shape = {"shape": "kafka", "payload": self.spec.schema, "topics": ",".join(topics), "id": self.spec.id,
                     "time": self.spec.time, "encoding": avro_values.resolved(self.spec.encoding or "json")}
        elif fmt == "rate":
            shape = {"shape": "rate"}
        elif fmt in FILE_FORMATS:
            ddl = as_ddl(schema) or self.spec.schema
            if not ddl:
                raise UserError(f"the job reads a {fmt} directory without a schema: give it with --schema")
            shape = {"shape": "records", "payload": ddl, "id": self.spec.id, "time": self.spec.time}
        else:
            also = "" if fmt != "delta" else f" ({self.chain.path} is read by that path)" if self.chain else \
                " (a table another query of the job writes: --sink delta:PATH,SINK)"
            raise UserError(f"the job reads a {fmt!r} stream: streamchaos stands in for kafka, "
                            f"{', '.join(FILE_FORMATS)} and rate sources{also}")
        if self.spec.values and shape.get("payload"):
            fields = parse_schema(shape["payload"])
            # A field it lacks: one line, before any query.
            value_lists(self.spec.values, leaves(fields), roles(fields, self.spec.id, self.spec.time_form))
            shape["values"] = self.spec.values
        opts = {**{k: v for k, v in self.log_options.items() if k not in ("kafka", "topic")}, **shape}
        reader = self.spark.readStream
        self.orig["format"](reader, JOB_SOURCE_NAME)
        self.orig["options"](reader, **opts)
        return self.orig["load"](reader)

    def chained(self, reader, fmt: str, path, schema, options: dict) -> Any | None:
        """The query under test's read of the table a query before it writes (chaos.jobs.chains): the run's."""
        if not (self.chain and self.chain.reads(fmt, path)):
            return None
        if self.chain.kind == "delta":
            self.chain.await_table()
        self.orig["option"](reader, "path", self.chain.table)  # over a path option the job gave
        return self.orig["load"](reader, None, fmt, schema,
                                 **{k: v for k, v in options.items() if k != "path" and v is not None})

    def connector(self, options: dict) -> Any:
        """The job's Kafka source as it wrote it, through Spark's connector, on the trial's broker and topic: its
        own options stand but where they name another broker, topic or starting point (``kafka_options``). What
        was set is written beside the checkpoint (``source.json``) for the trial's result."""
        trial = json.loads(self.log_options["kafka"])
        self.spec.fields()  # the payload's schema: the harness produces records of it
        opts, changed = kafka_options(options, trial)
        if self.log_options.get("controller") or self.chain:  # the stream, not the oracle
            from chaos.store.atomic import write_json

            write_json(Path(self.log_options["checkpoint"]).parent / "source.json",
                       {"via": "connector", "topic": trial["topic"], "set": changed,
                        "kept": sorted(k for k in options if k not in changed)})
        reader = self.spark.readStream
        self.orig["format"](reader, "kafka")
        self.orig["options"](reader, **opts)
        return self.orig["load"](reader)

    def install(self, stack: ExitStack) -> None:
        from pyspark.sql.streaming.readwriter import DataStreamReader

        orig, reads = self.orig, self

        def schema(self, schema):
            _seen(self)["schema"] = schema
            return orig["schema"](self, schema)

        def load(self, path=None, format=None, schema=None, **opts):
            seen = _seen(self)
            fmt = format or seen["format"] or reads.spark.conf.get("spark.sql.sources.default")
            if (chained := reads.chained(self, fmt, path or opts.get("path") or seen["options"].get("path"), schema,
                                         opts)) is not None:
                return chained
            return reads.substitute(fmt, {**seen["options"], **opts}, schema or seen["schema"])

        def file_reader(fmt: str):
            def read(self, path=None, schema=None, *args, **kwargs):
                if (chained := reads.chained(self, fmt, path, schema, kwargs)) is not None:
                    return chained
                return reads.substitute(fmt, _seen(self)["options"], schema or _seen(self)["schema"])
            return read

        replaced = {**_recorders(orig), "schema": schema, "load": load,
                    **{fmt: file_reader(fmt) for fmt in FILE_FORMATS}}
        for name, fn in replaced.items():
            stack.enter_context(patched(DataStreamReader, name, fn))


SIDE_FORMATS = ("console", "memory", "noop")  # a query beside the sink under test: it runs as the job wrote it
OTHER_SINKS = ("kafka", "delta", "iceberg", "hudi")  # never the job's own writer to a database (--sink postgres:T)


def _stream_writes(stack: ExitStack, checkpoint: str, file_sink: Path, phase: Callable[..., None] | None,
                   started: list, sink_kind: str = "parquet", delta_phases: Callable[[bool], None] | None = None,
                   tagged: Callable[[Callable], Callable] | None = None,
                   fresh: Callable[[str, str | None], None] | None = None,
                   phased_writer: Callable[[Any], Any] | None = None, chain: Chain | None = None) -> None:
    """``writeStream``: the sink phases around foreachBatch, the trial's checkpoint and sink paths. A job may start
    several queries (a console query beside its sink, a bronze table and a silver one): the first whose sink is the
    kind under test (``sink_kind``: ``parquet`` a file sink, ``delta`` a Delta table by path or a foreachBatch, else
    the job's own writer) gets the trial's checkpoint and its sink phases, every other one a checkpoint of its own
    beside it (``checkpoint-NAME``, its ``queryName`` or ``query-N`` by order of start) and, for a file sink, a path
    of its own (a Delta table: chaos.jobs.delta_tables); ``delta_phases`` installs a Delta sink's phases, reported at
    its checkpoint (it has no Python in it), ``tagged`` wraps the foreachBatch under test (its writes' history),
    ``fresh`` is told the checkpoint location the job named for it and for a query feeding it, beside the one each
    gets (chaos.jobs.named_checkpoints),
    ``phased_writer`` wraps the ``foreach`` writer under test in its sink phases (a side query's reports none).
    The query writing a ``chain``'s table feeds the one under test: ``checkpoint-upstream``, the chain's table.
    ``started`` lists ``(query, under test, its sink's kind)``."""
    from pyspark.sql.streaming.readwriter import DataStreamWriter as W

    orig = {n: W.__dict__[n] for n in ("format", "option", "options", "foreachBatch", "foreach", "start",
                                       "toTable", "queryName")}

    def foreach_batch(self, func):  # bracketed by the sink phases at start, if its query is the one under test
        _seen(self)["format"], _seen(self)["batch"] = "foreachBatch", func
        return orig["foreachBatch"](self, func)

    def foreach(self, writer):  # its phases at start, likewise
        _seen(self)["format"], _seen(self)["writer"] = "foreach", writer
        return orig["foreach"](self, writer)

    def query_name(self, name):
        _seen(self)["name"] = name
        return orig["queryName"](self, name)

    def of_kind(fmt: str, files: bool, given: str | None) -> bool:
        if fmt in SIDE_FORMATS or any(t for _, t, _ in started):
            return False
        if sink_kind == "parquet":
            return files
        if sink_kind == "delta":
            return delta_tables.under_test(given) if fmt == "delta" else fmt in ("foreachbatch", "foreach", "")
        if sink_kind == "kafka":  # Spark's Kafka sink, or a foreachBatch writing Kafka
            return fmt in ("kafka", "foreachbatch", "foreach", "")
        return not files and fmt not in OTHER_SINKS

    def start(self, path=None, format=None, outputMode=None, partitionBy=None, queryName=None, **opts):
        query_name = queryName or _seen(self).get("name")
        named = named_location(_seen(self)["options"], opts,
                               self._spark.conf.get("spark.sql.streaming.checkpointLocation", None), query_name)
        for key in [k for k in opts if k.lower() == "checkpointlocation"]:
            opts.pop(key)
        fmt = (format or _seen(self)["format"] or "").lower()
        given = path or opts.get("path") or _seen(self)["options"].get("path")
        files = fmt in FILE_FORMATS or (fmt == "" and bool(given))
        if files or fmt == "delta":  # its path is the run's
            opts.pop("path", None)
        feeds = chain is not None and chain.feeds(fmt, files, given)
        tested = not feeds and of_kind(fmt, files, str(given) if given else "")
        name = UPSTREAM if feeds else "" if tested else \
            re.sub(r"[^\w.-]", "_", str(query_name or f"query-{len(started)}"))
        if (tested or feeds) and fresh is not None:  # the job's own location, each start's: a new one starts over
            fresh(checkpoint if tested else chain.checkpoint, named)
        orig["option"](self, "checkpointLocation", checkpoint if tested else f"{checkpoint}-{name}")
        if tested and _seen(self).get("batch") is not None:
            func = _seen(self)["batch"]
            orig["foreachBatch"](self, bracketed(tagged(func) if tagged else func, phase))
        if tested and _seen(self).get("writer") is not None and phased_writer is not None:
            orig["foreach"](self, phased_writer(_seen(self)["writer"]))
        if files:
            orig["option"](self, "path", str(file_sink if tested else file_sink.with_name(f"{file_sink.name}-{name}")))
            path = None
            if tested:
                _file_sink_phases(self._spark, phase is not None)
        elif fmt == "delta" and given:
            orig["option"](self, "path", delta_tables.route(str(given), writing=True))
            path = None
            if tested and delta_phases is not None:
                delta_phases(True)
        elif fmt == "kafka" and tested and kafka_sink.capturing():  # Spark's answer: its rows, no topic
            orig["foreachBatch"](self, kafka_sink.capture)
            format = None  # noqa: A001 - start()'s own parameter
        elif fmt == "kafka" and tested:  # the trial's output topic, whatever the job names
            for key in [k for k in opts if kafka_sink.trial_owned(k)]:
                opts.pop(key)
            orig["options"](self, **kafka_sink.stream_options())
            if delta_phases is not None:
                delta_phases(False)
        with ExitStack() as side:
            if not tested:  # its tasks report no `reading`: they are not the trial's
                side.enter_context(without_reading_reports(self._spark))
            query = orig["start"](self, path, format, outputMode, partitionBy, queryName, **opts)
        started.append((query, tested, fmt or ("files" if files else "foreach")))
        if feeds:
            chain.feeders.append(query)
        return query

    def to_table(self, *args, **kwargs):
        raise UserError("the job writes with toTable: streamchaos reads back foreachBatch sinks (postgres:TABLE), "
                        "file sinks (parquet) and Delta tables by path (delta); write to one of those")

    for name, fn in {**_recorders(orig), "foreachBatch": foreach_batch, "foreach": foreach, "start": start,
                     "toTable": to_table, "queryName": query_name}.items():
        stack.enter_context(patched(W, name, fn))


def _file_sink_phases(spark, on: bool) -> None:
    """A file sink's ``sink-write`` (part files written, ``_spark_metadata/N`` not yet) and ``sink-done`` come from
    the JVM commit protocol (chaos/machine/jvm, on the driver's class path by ``UserJob.boot_conf``). Spark's file sink
    reads the class from the job's session at every batch, so the oracle's run, on the same session, turns it off.
    Only the sink under test reports (``FILE_SINK_PATH``, set before the job starts any query)."""
    from chaos.machine.jvm import COMMIT_PROTOCOL_CLASS

    key = "spark.sql.streaming.commitProtocolClass"
    if on:
        spark.conf.set(key, COMMIT_PROTOCOL_CLASS)
    else:
        spark.conf.unset(key)


def _blocking_calls_return(stack: ExitStack) -> None:
    """A job's ``awaitTermination()`` and ``spark.stop()`` return at once: the harness holds the query."""
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery, StreamingQueryManager

    stack.enter_context(patched(StreamingQuery, "awaitTermination", lambda self, timeout=None: None))
    stack.enter_context(patched(StreamingQueryManager, "awaitAnyTermination", lambda self, timeout=None: None))
    stack.enter_context(patched(SparkSession, "stop", lambda self: None))


def call_entry(fn: Callable, spark) -> Any:
    """The job's function with the session if it takes one (else it builds it: ``getOrCreate`` finds ours)."""
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    return fn(spark) if params else fn()


def start_job(spark, spec: JobSpec, log_options: dict[str, str], checkpoint: str, file_sink: Path,
              phase: Callable[..., None] | None = None, database: str | None = None,
              incarnation: int = 0) -> tuple[Any, bool]:
    """Start the job's streaming query on the event log (``log_options``: chaos.jobs.stand_ins's) with the given
    checkpoint, file sink path, sink phases (None: none reported; a Python data source's from the executors
    too, to ``log_options["controller"]``) and ``DATABASE_URL`` (``database``, a URL). Returns the query and
    whether the job set a watermark."""
    from pyspark.sql.classic.dataframe import DataFrame

    spark.dataSource.register(JobSource)
    note_harness_threads()
    for name in DATABASE_VARS:  # none of a previous trial's (a recycled driver) nor of the user's shell
        os.environ.pop(name, None)
    if database:  # before the module is imported: a module-level read sees the trial's database
        os.environ.update(database_env(database))
        reroute()  # a database the job's code names is the trial's too (chaos.jobs.databases)
    # Its JDBC writes' tasks report through the hooks jar's BarrierJdbcDriver, where this driver's application has it.
    from chaos.machine.jvm import FILE_SINK_PATH, holds_hooks

    hooks = holds_hooks(spark.sparkContext.getConf().get("spark.jars", ""))
    phases_to(log_options.get("controller") if phase is not None and hooks else None, incarnation)
    kafka_sink.end()
    if spec.sink_kind == "kafka":  # before the module is imported: its own clients (a module-level one too) reach
        kafka_sink.begin_run(log_options, file_sink.parent, spec.table)  # the run's topic, on the executors too
        kafka_rerouting.reroute()
        reroute_partitions()
    fn = entry_function(spec)
    started: list = []
    watermarks: list[tuple] = []
    with_watermark = DataFrame.__dict__["withWatermark"]

    def noted(df, column, delay):
        watermarks.append((column, delay))
        return with_watermark(df, column, delay)

    delta_tables.reroute()  # a Delta table the job names by path is the run's (chaos.jobs.delta_tables)
    delta_tables.begin(file_sink.parent, spec.table if spec.sink_kind == "delta" else None,
                       spec.upstream[1] if spec.upstream and spec.upstream[0] == "delta" else None)
    chain = chain_for(spec, checkpoint, file_sink)  # a query before the one under test writes what it reads
    if spec.sink_kind == "parquet":  # each query copies the session's settings at its start: a bronze one too
        spark.conf.set(FILE_SINK_PATH, str(file_sink))

    def delta_phases(delta: bool) -> None:  # a sink of Spark's own: sink-done before commits/N (CheckpointBarrier);
        from chaos.machine.jvm import checkpoint_barrier_conf  # Delta's: sink-write before _delta_log/N.json too
        from chaos.stream.sinks.delta import log_barrier_conf  # (DeltaLogBarrier)

        have = [p for p in spark.conf.get("spark.streamchaos.checkpoint.phases", "").split(",") if p]
        conf = checkpoint_barrier_conf(log_options["controller"], incarnation, (*have, "sink-done"), checkpoint)
        if delta:
            conf |= log_barrier_conf(log_options["controller"], incarnation, str(file_sink))
        for key, value in conf.items():
            spark.conf.set(key, value)

    delta_history: Callable[[Callable], Callable] | None = None
    if spec.sink_kind == "delta":  # each Delta commit names its batch (a foreachBatch's) and its driver
        from chaos.stream.sinks.delta import USER_METADATA

        spark.conf.set(USER_METADATA, json.dumps({"incarnation": incarnation}))

        def delta_history(func: Callable) -> Callable:
            def tagged(batch_df, batch_id):
                batch_df.sparkSession.conf.set(USER_METADATA,
                                               json.dumps({"batch": batch_id, "incarnation": incarnation}))
                return func(batch_df, batch_id)

            return tagged
    with ExitStack() as stack:
        _Reads(spark, spec, log_options, chain).install(stack)
        controller = log_options.get("controller") if phase is not None else None
        _stream_writes(stack, checkpoint, file_sink, phase, started, spec.sink_kind,
                       delta_phases if controller else None, delta_history,
                       lambda where, named: start_on(where, named, incarnation),
                       (lambda writer: PhasedForeach(writer, controller, incarnation)) if controller else None,
                       chain)
        if controller:
            phased_sources(stack, controller, incarnation)
        _blocking_calls_return(stack)
        stack.enter_context(patched(DataFrame, "withWatermark", noted))
        call_entry(fn, spark)
    tested = [q for q, under_test, _ in started if under_test]
    if not started:
        raise UserError(f"{spec.entry} started no streaming query (it must call writeStream...start())")
    if not tested:
        raise UserError(f"--sink {spec.judged}: none of the job's queries writes there (it starts "
                        f"{', '.join(kind for _, _, kind in started) or 'none'} queries): name the sink it writes")
    if chain is not None:
        chain.started(spec.judged, tested[0], started)
    return tested[0], bool(watermarks)


def batch_watermarks(checkpoint: str) -> list[tuple[dict, int]]:
    """``(end offsets, batchWatermarkMs)`` of every batch in the stream's write-ahead log, oldest first."""
    marks = []
    for n, ends in sorted(logged_offsets(checkpoint), key=lambda entry: entry[0]):
        try:
            with open(os.path.join(checkpoint, "offsets", str(n))) as fh:
                meta = json.loads(fh.read().splitlines()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ends and isinstance(meta, dict):
            marks.append(({str(k): int(v) for k, v in ends[0].items()}, int(meta.get("batchWatermarkMs", 0))))
    return marks


def run_answer(spark, spec: JobSpec, eventlog: str, folder: Path, database: str | None,
               late: list[tuple[dict, int]] | None = None, topic: str | None = None,
               kafka: dict | None = None) -> bool:
    """The oracle: the same job over the whole log in one micro-batch, with no fault, on a checkpoint of its own
    in ``folder`` (its file sink there too) and the database URL ``database``; ``late``: without the records the
    stream read behind its watermark. It runs until Spark has nothing left to do, the no-data batch that moves
    the watermark included, so what it wrote is what an exactly-once stream holds at the same watermark.
    Returns whether the job set a watermark. ``kafka``: the trial's broker and output topic, where the job's own
    Kafka clients write a topic of the answer's (chaos.jobs.kafka.answer)."""
    folder.mkdir(parents=True, exist_ok=True)
    saved = {name: os.environ.get(name) for name in DATABASE_VARS}
    options = {"eventlog": eventlog, "checkpoint": str(folder / "checkpoint"),
               **({"late": json.dumps(late)} if late else {}), **({"topic": topic} if topic else {})}
    with kafka_answer.answering(kafka if spec.sink_kind == "kafka" else None, folder) as answer:
        options.update(answer)
        try:
            query, watermark = start_job(spark, spec, options, str(folder / "checkpoint"), folder / "files",
                                         database=database)
            try:
                for each in in_order(query):  # the queries feeding it first (chaos.jobs.chains)
                    each.processAllAvailable()
            finally:
                query.stop()
                stop_side_queries(spark)
            await_job_threads()
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return watermark
