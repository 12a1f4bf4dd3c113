"""Kafka record values in Avro's binary encoding, in the schema the job decodes them with (``--kafka-value avro:FILE``).

A job that reads Avro from Kafka holds its writer's schema (an ``.avsc`` file, or a string in its code) and decodes
``value`` with Spark's ``from_avro(col, schema)``, which reads the bytes with that very schema: nothing in a record
says which schema wrote it. So the harness writes each payload in the job's own schema file, never one it derives.
``avro-confluent:FILE`` writes the framing a Confluent Schema Registry serializer adds (a zero byte and a four-byte
schema id ahead of the Avro bytes), which jobs strip before ``from_avro`` (``expr("substring(value, 6)")``).

The payload the generator fills (``chaos.jobs.payloads.record``: JSON-ready values) is typed by the payload's fields
first (``chaos.jobs.payloads.typed``): a TIMESTAMP is a datetime (Avro's ``timestamp-millis``/``-micros``), a DATE a
date, a STRUCT a record.
"""

from __future__ import annotations

import io
import json
import os
import struct
from functools import lru_cache
from pathlib import Path

from chaos.errors import UserError

PREFIXES = ("avro:", "avro-confluent:")
CONFLUENT_SCHEMA_ID = 1  # the id a registry would have given the job's schema: jobs skip it, never look it up


def is_avro(encoding: str) -> bool:
    return encoding.startswith(PREFIXES)


HARNESS_CWD = "STREAMCHAOS_CWD"  # the harness's working directory, in its drivers' environment (chaos/driver/launch.py)


def schema_file(encoding: str) -> Path:
    """The schema file of ``avro:FILE``: a relative FILE is under the harness's working directory, from which
    drivers (started in a directory of their own) read it too."""
    path = Path(encoding.split(":", 1)[1]).expanduser()
    return path if path.is_absolute() else Path(os.environ.get(HARNESS_CWD) or Path.cwd()) / path


def resolved(encoding: str) -> str:
    """``avro:FILE`` with FILE absolute, as the driver finds it: what it hands the stand-in source, whose readers
    run in executors started in directories of their own, without the harness's working directory."""
    if not is_avro(encoding):
        return encoding
    return f"{encoding.split(':', 1)[0]}:{schema_file(encoding).resolve()}"


def stored(encoding: str) -> str:
    """``avro:FILE`` as a stored scenario keeps it: relative to the working directory when the file is under it
    (a checkout's stored scenarios replay from any clone, as ``--sql-init`` files do), else absolute."""
    if not is_avro(encoding):
        return encoding
    path = schema_file(encoding).resolve()
    cwd = Path.cwd().resolve()
    return f"{encoding.split(':', 1)[0]}:{path.relative_to(cwd) if path.is_relative_to(cwd) else path}"


def check(encoding: str, field_names: list[str]) -> None:
    """One line for a schema file that is missing, not Avro, or without one of the payload's fields."""
    path = schema_file(encoding)
    schema = _parsed(str(path.resolve()) if path.is_file() else str(path))
    names = {f["name"] for f in schema.get("fields", [])} if isinstance(schema, dict) else set()
    missing = [n for n in field_names if n not in names]
    if not isinstance(schema, dict) or schema.get("type") != "record" or missing:
        raise UserError(f"--kafka-value {encoding}: the schema in {path} is not a record with the payload's fields "
                        f"({', '.join(missing or field_names)} missing): give the .avsc the job decodes with")


@lru_cache(maxsize=8)
def _parsed(path: str) -> dict:
    from fastavro import parse_schema
    from fastavro.schema import SchemaParseException

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--kafka-value avro:{path}: cannot read the job's Avro schema ({exc.strerror}): give the "
                        ".avsc file the job decodes its values with") from None
    try:
        return parse_schema(json.loads(text))
    except (ValueError, SchemaParseException) as exc:
        raise UserError(f"--kafka-value avro:{path}: not an Avro schema ({exc}): give the .avsc file the job decodes "
                        "its values with") from None


def encode(row: dict, encoding: str) -> bytes:
    """``row`` (typed: ``chaos.jobs.payloads.typed(..., records=True)``) as the Avro bytes ``from_avro`` reads with
    the job's schema."""
    from fastavro import schemaless_writer

    out = io.BytesIO()
    if encoding.startswith("avro-confluent:"):
        out.write(b"\x00" + struct.pack(">I", CONFLUENT_SCHEMA_ID))
    schemaless_writer(out, _parsed(str(schema_file(encoding).resolve())), row)
    return out.getvalue()
