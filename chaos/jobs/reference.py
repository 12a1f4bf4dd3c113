"""A user's own streaming job, named as a pipeline: its entry point, the payload schema and its sink.

A job as written is a plain PySpark function (``module:function`` or ``path/to/job.py:function``) that
starts a streaming query; it does not import streamchaos. What the harness needs beside it travels in
the pipeline reference itself, so a stored scenario names everything a replay needs::

    examples.orders_upsert:run?schema=customer STRING, amount LONG, ts TIMESTAMP&sink=postgres:totals&key=customer

This module is imported by the executors' Python workers that serve the job's source: it imports
nothing heavier than the standard library.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, quote

from chaos.errors import UserError
from chaos.jobs import avro_values
from chaos.jobs.payloads import VALUE_ENCODINGS, Field, as_ddl, kafka_row, leaves, parse_schema, roles
from chaos.jobs.times import TimeForm, ambiguous, check_field, parse_time
from chaos.jobs.values import parse_values, value_lists
from chaos.scenario.names import entry_module, is_script

SINK_KINDS = ("postgres", "sqlite", "parquet", "delta", "kafka")
TOPIC_NAME = r"[A-Za-z0-9._-]*"  # Kafka's topic names
UPSTREAM_KINDS = ("parquet", "delta")  # a table one query of a job writes by path and the next reads
TABLE_NAME = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?"  # interpolated into SQL: an identifier only


@dataclass(frozen=True)
class JobSpec:
    entry: str  # module:function, or path/to/file.py:function
    schema: str | None = None  # the payload's Spark DDL (kafka and file sources)
    # postgres:TABLE | sqlite:TABLE | parquet | delta[:PATH]; after a table another query of the job writes and this
    # one reads (bronze to silver): delta:PATH,SINK or parquet:PATH,SINK (``upstream``).
    sink: str = ""
    key: tuple[str, ...] = ()  # upsert sinks: the final row per key is compared
    values: str = ""  # the values payload fields take, JSON (chaos.jobs.values)
    # What its readStream.format("kafka") reads: "connector" (Spark's Kafka connector on the harness's broker),
    # "stand-in" or "" (the harness's own source shaped as Kafka's; "" also for a job that reads no Kafka).
    kafka: str = ""
    args: tuple[str, ...] = ()  # a script's command-line arguments (``trial job.py -- ARGS``)
    id: str = ""  # the payload field that carries the event id (``--id``; "" guesses it from the names)
    sql: tuple[str, ...] = ()  # SQL files run in each of the run's databases before the job starts (``--sql-init``)
    time: str = ""  # the event-time field and its form, FIELD[:FORM] (``--time``; "none": no field carries it)
    encoding: str = ""  # a Kafka record value's form: "" or json, csv (``--kafka-value``)

    @property
    def ref(self) -> str:
        query = [(k, v) for k, v in (("schema", self.schema), ("sink", self.sink), ("key", ",".join(self.key)),
                                     ("values", self.values), ("kafka", self.kafka), ("id", self.id),
                                     ("time", self.time), ("encoding", self.encoding),
                                     ("args", json.dumps(list(self.args)) if self.args else ""),
                                     ("sql", json.dumps(list(self.sql)) if self.sql else "")) if v]
        return self.entry + ("?" + "&".join(f"{k}={quote(v, safe=' :,()')}" for k, v in query) if query else "")

    @property
    def judged(self) -> str:
        """The sink under test: the last of a chain of tables."""
        return self.sink.rsplit(",", 1)[-1].strip()

    @property
    def upstream(self) -> tuple[str, str] | None:
        """``(kind, path)`` of the table another query of the job writes and the query under test reads, if any."""
        if "," not in self.sink:
            return None
        kind, _, path = self.sink.rsplit(",", 1)[0].strip().partition(":")
        return kind, path

    @property
    def sink_kind(self) -> str:
        return self.judged.split(":", 1)[0]

    @property
    def table(self) -> str:
        return self.judged.split(":", 1)[1] if ":" in self.judged else ""

    def fields(self) -> list[Field]:
        if not self.schema:
            raise UserError(f"{self.entry} reads a kafka or file stream: give the payload's schema with --schema "
                            "'name TYPE, ...' (Spark DDL)")
        return parse_schema(self.schema)

    @property
    def time_form(self) -> TimeForm | None:
        return parse_time(self.time)

    def validate(self) -> JobSpec:
        if self.sink_kind not in SINK_KINDS:
            raise UserError(f"--sink {self.sink or '(none)'}: say where the job writes, one of postgres:TABLE or "
                            "sqlite:TABLE (through DATABASE_URL), parquet (a file sink, its path redirected), "
                            "delta[:PATH] (a Delta table by path, redirected) or kafka[:TOPIC] (its Kafka sink, the "
                            "trial's output topic)")
        if self.sink.count(",") > 1 or (self.upstream and (self.upstream[0] not in UPSTREAM_KINDS
                                                           or not self.upstream[1].strip())):
            raise UserError(f"--sink {self.sink}: a query reading another's table is named after that table, "
                            "delta:PATH,SINK or parquet:PATH,SINK (e.g. delta:/lake/bronze,delta:/lake/silver)")
        if self.upstream and self.table and os.path.normpath(self.upstream[1]) == os.path.normpath(self.table):
            raise UserError(f"--sink {self.sink}: the table the query under test reads and the one it writes are "
                            "the same; name the table between the two queries, then the sink")
        if self.sink_kind == "kafka" and not re.fullmatch(TOPIC_NAME, self.table):
            raise UserError(f"--sink {self.judged}: a Kafka topic's name has letters, digits, '.', '_' and '-' only")
        if self.sink_kind == "kafka" and self.kafka != "connector":
            raise UserError(f"--sink {self.judged}: the job's Kafka sink writes the trial's output topic on the "
                            "harness's broker, which a job reading Kafka through Spark's connector gets: run it on a "
                            "Spark Maven serves the connector for (streamchaos --spark 4.2.0 ..., --kafka connector)")
        if self.sink_kind in ("postgres", "sqlite") and not re.fullmatch(TABLE_NAME, self.table):
            raise UserError(f"--sink {self.sink}: name the job's table, e.g. {self.sink_kind}:customer_totals")
        if self.schema:
            fields = parse_schema(self.schema)
            named = {f.key: f for f in leaves(fields)}
            if self.id and self.id not in named:
                raise UserError(f"--id {self.id}: the payload has no such field; it has {', '.join(named)}")
            if self.id and named[self.id].kind not in ("string", "int"):
                raise UserError(f"--id {self.id}: an event id is a string or an integer field")
            time = self.time_form
            kinds = {key: f.kind for key, f in named.items()}
            if time is not None:
                check_field(time, kinds)
            elif not self.time and (asked := ambiguous(list(kinds.items()))):
                raise UserError(asked)
            value_lists(self.values, leaves(fields), roles(fields, self.id, time))
            if self.encoding == "csv" and any(f.children for f in fields):
                raise UserError("--kafka-value csv: a CSV line holds flat fields; this payload nests "
                                f"{next(f.name for f in fields if f.children)}: use json")
        elif self.id or self.time:
            raise UserError(f"--{'id' if self.id else 'time'} names a payload field: give the payload's schema with "
                            "--schema")
        if avro_values.is_avro(self.encoding):
            if not self.schema:
                raise UserError(f"--kafka-value {self.encoding}: the records are filled from the payload's fields: "
                                "give --schema too")
            avro_values.check(self.encoding, [f.name for f in parse_schema(self.schema)])
        elif self.encoding not in ("", "json", "csv"):
            raise UserError(f"--kafka-value {self.encoding}: use one of {', '.join(VALUE_ENCODINGS)}")
        if self.sql and self.sink_kind != "postgres":
            raise UserError(f"--sql-init runs in the trial's PostgreSQL: it goes with --sink postgres:TABLE, not "
                            f"{self.sink}")
        return self


def parse_ref(ref: str) -> JobSpec:
    """The job a pipeline reference names (``entry?schema=...&sink=...&key=...&values=...``)."""
    entry, _, query = ref.partition("?")
    opts = dict(parse_qsl(query, keep_blank_values=True))
    unknown = set(opts) - {"schema", "sink", "key", "values", "kafka", "args", "id", "sql", "time", "encoding"}
    if unknown:
        raise UserError(f"{ref!r}: unknown job option(s) {', '.join(sorted(unknown))}: use schema, sink, key, values, "
                        "kafka, args, id, sql, time, encoding")
    if opts.get("kafka", "") not in ("", *KAFKA_SOURCES):
        raise UserError(f"{ref!r}: kafka={opts['kafka']}: use one of {', '.join(KAFKA_SOURCES)}")
    key = tuple(k.strip() for k in opts.get("key", "").split(",") if k.strip())
    args, sql = _string_list(ref, opts, "args"), _string_list(ref, opts, "sql")
    if args and not is_script(entry):
        raise UserError(f"{entry}: arguments go to a script (path/to/job.py), not to a function")
    return JobSpec(entry, opts.get("schema") or None, opts.get("sink", ""), key, opts.get("values", ""),
                   opts.get("kafka", ""), tuple(args), opts.get("id", ""), tuple(sql), opts.get("time", ""),
                   opts.get("encoding", ""))


def _string_list(ref: str, opts: dict, name: str) -> list[str]:
    try:
        found = json.loads(opts[name]) if opts.get(name) else []
    except ValueError:
        found = None
    if not isinstance(found, list) or not all(isinstance(a, str) for a in found):
        raise UserError(f"{ref!r}: {name}={opts[name]}: give a JSON list of strings")
    return found


KAFKA_SOURCES = ("connector", "stand-in")
KAFKA_FORMAT = re.compile(r"""format\(\s*["']kafka["']\s*\)|format\s*=\s*["']kafka["']""")


def entry_source(entry: str) -> Path:
    """The file of an entry point's module (a path's own, or the module under the working directory)."""
    module_name, _, directory = entry_module(entry)
    project = directory or Path.cwd()
    return project / (module_name.split(".")[-1] + ".py") if directory else \
        project.joinpath(*module_name.split(".")).with_suffix(".py")


def entry_text(entry: str) -> str:
    """The source of the entry's module, read to see what it names (Kafka, a database); "" if it is not there (a
    stored run judged elsewhere)."""
    try:
        return entry_source(entry).read_text(errors="replace")
    except OSError:
        return ""


def reads_kafka(entry: str) -> bool:
    """Whether the entry's module names Kafka as a format (``format("kafka")``, ``format="kafka"``)."""
    return bool(KAFKA_FORMAT.search(entry_text(entry)))


def kafka_source(entry: str, asked: str | None) -> str:
    """What a job's Kafka reads (``JobSpec.kafka``) for ``--kafka`` (``auto``, ``connector``, ``stand-in``): a job
    that names no Kafka format reads none (""); ``auto`` is Spark's connector where Maven serves it for the
    running Spark, else the stand-in; ``connector`` where it is not served is one line naming the way out."""
    asked = asked or "auto"
    if asked not in ("auto", *KAFKA_SOURCES):
        raise UserError(f"--kafka {asked}: use auto, connector or stand-in")
    if not reads_kafka(entry):
        return ""
    if asked == "stand-in":
        return "stand-in"
    from chaos.clusters.kafka.jars import connector_available

    refusal = connector_available(say=lambda _line: None)  # a probe: the harness says what it resolves when it runs
    if refusal is None:
        return "connector"
    if asked == "connector":
        raise UserError(refusal)
    return "stand-in"


def kafka_records(spec: JobSpec, events) -> Iterator[tuple[int, bytes, bytes, int]]:
    """The trial's events as records of the job's Kafka topic, (partition, key, value, timestamp ms), per partition
    in id order: the same key and JSON value bytes the stand-in gives (``kafka_row``), so the oracle's stand-in and
    the stream's broker serve equal rows."""
    fields = spec.fields()
    time = spec.time_form
    role = roles(fields, spec.id, time)
    values = value_lists(spec.values, leaves(fields), role)
    frame = events.sort("partition", "offset")
    for id_, key, value, ms, part, offset in zip(frame["id"], frame["key"], frame["value"],
                                                 frame["event_time"].dt.epoch("ms"), frame["partition"],
                                                 frame["offset"], strict=True):
        row = kafka_row(fields, role, ["topic"], int(id_), key, int(value), int(ms), int(part), int(offset), values,
                        time, spec.encoding or "json")
        yield int(part), row[0], row[1], ms


def refuse_namesakes(entry: str) -> Path:
    """The entry's project directory (its own, or the working directory), unless the entry's module imports a
    module of its project that bears a name of the harness's packages: one line says so."""
    from chaos.machine.own_packages import clashes

    _, _, directory = entry_module(entry)
    project = directory or Path.cwd()
    source = entry_source(entry)
    found = clashes(source, project)
    if found:
        name = found[0]
        raise UserError(f"{source} imports its project's own {name!r}, which is also a package of streamchaos: "
                        f"rename yours (e.g. {project.name or 'my'}_{name}) so that the job and the harness each "
                        "import their own")
    return project


def import_entry(entry: str, what: str = "the job's module"):
    """The module of an entry point, imported as a driver imports it: the harness's own packages bound first
    (chaos/machine/own_packages.py), then the entry's directory (or the working directory) first on ``sys.path``, so the
    module's other imports find its project. A module that imports its project's own ``reports`` (or
    another of the harness's package names) cannot have both: one line says so."""
    import importlib

    from chaos.machine.own_packages import bind

    module_name, _, directory = entry_module(entry)
    project = refuse_namesakes(entry)
    bind()
    if str(project) not in sys.path:
        sys.path.insert(0, str(project))
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"cannot import {what} {module_name!r}: {exc}") from None


def canonical_entry(entry: str) -> str:
    """A file path under the working directory as a dotted module (drivers import it from there); a script as its
    absolute path (drivers run it from wherever they start)."""
    if is_script(entry):
        if not Path(entry).is_file():
            raise UserError(f"{entry} does not exist: give the job's script relative to this directory")
        return str(Path(entry).resolve())
    module, func, directory = entry_module(entry)
    target = entry.rpartition(":")[0]
    if directory is not None:
        return f"{directory / (module + '.py')}:{func}"
    if target.endswith(".py") and not Path(target).exists():
        raise UserError(f"{target} does not exist: give the job's file relative to this directory")
    return f"{module}:{func}"


def job_ref(pipeline: str, schema=None, sink: str | None = None, key: str | tuple | list | None = None,
            values: list[str] | tuple[str, ...] | None = None, kafka: str | None = None,
            args: list[str] | tuple[str, ...] | None = None, id_name: str | None = None,
            sql_init: list[str] | tuple[str, ...] | None = None, time: str | None = None,
            encoding: str | None = None) -> str:
    """A user's job with its schema (DDL, sample record or StructType; else the one its code declares,
    chaos.jobs.declared), sink, key, ``--values`` (chaos.jobs.values), ``--time`` (chaos.jobs.times), what its
    Kafka reads (``kafka_source``) and a script's arguments folded into the reference scenarios store; catalogue
    names and Pipeline classes as they are."""
    script = is_script(pipeline.partition("?")[0])
    if not script and (":" not in pipeline or "?" in pipeline
                       or not (schema or sink or key or values or ".py:" in pipeline)):
        if values or id_name or sql_init or time or encoding:
            flag = 'values' if values else 'id' if id_name else 'time' if time else 'kafka-value' if encoding \
                else 'sql-init'
            raise UserError(f"--{flag} applies to a job as written (path/to/job.py:function), not {pipeline}")
        if args:
            raise UserError(f"arguments after -- go to a script (path/to/job.py), not to {pipeline}")
        return pipeline
    if script and "?" in pipeline:
        return pipeline
    given = parse_ref(pipeline)
    refuse_namesakes(given.entry)
    keys = tuple(k.strip() for k in (key.split(",") if isinstance(key, str) else key or ()) if k.strip())
    ddl = as_ddl(schema) or given.schema
    if not ddl:
        from chaos.jobs.declared import declared_schema

        found = declared_schema(entry_source(given.entry))
        ddl = found.ddl if found else None
    return JobSpec(canonical_entry(given.entry), ddl, sink or given.sink,
                   keys or given.key, parse_values(values) or given.values,
                   given.kafka if given.kafka and kafka is None else kafka_source(given.entry, kafka),
                   tuple(args) if args else given.args, id_name or given.id,
                   tuple(sql_files(sql_init)) if sql_init else given.sql, time or given.time,
                   avro_values.stored(encoding) if encoding else given.encoding).validate().ref


def sql_files(paths: list[str] | tuple[str, ...]) -> list[str]:
    """``--sql-init`` files, read where the trial's databases are prepared: under the working directory as relative
    paths (a test ``init`` writes runs from any checkout), elsewhere as absolute ones."""
    found = []
    for given in paths:
        path = Path(given).expanduser().resolve()
        if not path.is_file():
            raise UserError(f"--sql-init {given}: no such file")
        found.append(str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path))
    return found
