"""A payload as a job declares and parses it: its fields (Spark DDL, nested STRUCT and ARRAY included), which
scenario column fills each of them, and one event written as the job's source would give it.

Imported by the executors' Python workers that serve the job's source: the standard library only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from chaos.errors import UserError
from chaos.jobs.times import TimeForm
from chaos.jobs.values import pick

# Spark's DDL type names the generator can fill, by the Python value a row holds.
_TYPES = {
    "string": "string", "varchar": "string", "char": "string",
    "int": "int", "integer": "int", "bigint": "int", "long": "int", "smallint": "int", "short": "int",
    "tinyint": "int", "byte": "int",
    "double": "float", "float": "float", "real": "float", "decimal": "float",
    "boolean": "bool", "bool": "bool",
    "timestamp": "timestamp", "timestamp_ntz": "timestamp", "timestamp_ltz": "timestamp",
    "date": "date",
}
ISO_TIMESTAMP = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?"
# Spark's Kafka source schema (without headers, which need includeHeaders).
KAFKA_SCHEMA = ("key BINARY, value BINARY, topic STRING, partition INT, offset LONG, timestamp TIMESTAMP, "
                "timestampType INT")
RATE_SCHEMA = "timestamp TIMESTAMP, value LONG"


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # string | int | float | bool | timestamp | date | struct | array
    ddl_type: str
    children: tuple[Field, ...] = ()  # a struct's fields; an array's element (one, named as the array)
    path: str = ""  # from the payload's top, dotted (``order.customer``); an array's element shares its path

    @property
    def key(self) -> str:
        return self.path or self.name


def parse_schema(ddl: str) -> list[Field]:
    """``name TYPE, ...`` (Spark DDL: ``STRUCT<...>``, ``ARRAY<...>`` and backquoted names included) into fields;
    one clear error for what it cannot fill."""
    fields = [_field(part, "") for part in _split_top_level(ddl)]
    if not fields:
        raise UserError("--schema is empty: give the payload's fields as Spark DDL, e.g. "
                        "'customer STRING, amount LONG'")
    return fields


def _field(part: str, parent: str) -> Field:
    text = part.strip()
    if text.startswith("`") and text.count("`") >= 2:  # a backquoted name may hold spaces: `IP Address` STRING
        close = text.index("`", 1)
        name, type_ = text[1:close], text[close + 1:].strip().removeprefix(":").strip()
    else:
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*|\s+)(.+)", text, re.DOTALL)
        name, type_ = (m[1], m[2].strip()) if m else ("", "")
    if not name or not type_:
        raise UserError(f"--schema: {text!r} is not 'name TYPE' (e.g. 'customer STRING, amount LONG'; a name with "
                        "spaces in backquotes, `IP Address` STRING)")
    return _typed_field(name, type_, f"{parent}.{name}" if parent else name)


def _typed_field(name: str, type_: str, path: str) -> Field:
    base = re.split(r"[(<\s]", type_.lower(), maxsplit=1)[0]
    if base in ("struct", "array"):
        open_, close = type_.find("<"), type_.rfind(">")
        if open_ < 0 or close < open_:
            raise UserError(f"--schema: field {path} has type {type_}: write {base.upper()}<...>")
        inner = type_[open_ + 1:close]
        if base == "array":
            return Field(name, "array", type_, (_typed_field(name, inner.strip(), path),), path)
        children = tuple(_field(part, path) for part in _split_top_level(inner))
        if not children:
            raise UserError(f"--schema: field {path} is a STRUCT with no fields")
        return Field(name, "struct", type_, children, path)
    if base not in _TYPES:
        raise UserError(f"--schema: field {path} has type {type_}; records can be generated for "
                        f"{', '.join(sorted({t.upper() for t in _TYPES}))}, STRUCT<...> and ARRAY<...>")
    return Field(name, _TYPES[base], type_, (), path)


def leaves(fields: list[Field] | tuple[Field, ...]) -> list[Field]:
    """The fields that hold values, nested ones included, in the payload's order."""
    out = []
    for f in fields:
        out.extend(leaves(f.children) if f.children else [f])
    return out


def _split_top_level(ddl: str) -> list[str]:
    parts, depth, current, quoted = [], 0, "", False
    for ch in ddl:
        if ch == "`":
            quoted = not quoted
        elif not quoted and ch in "(<":
            depth += 1
        elif not quoted and ch in ")>":
            depth -= 1
        if ch == "," and depth == 0 and not quoted:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current)
    return parts


def id_like(name: str) -> bool:
    """A field name that says it is an id: ``id``, ``uuid``, ``order_id``, ``eventId``, ``TransactionID`` (not
    ``PAID`` or ``VALID``: ``ID`` after a lower-case letter)."""
    return name.lower() in ("id", "uuid") or name.lower().endswith("_id") or name.endswith("Id") \
        or (name.endswith("ID") and len(name) > 2 and name[-3].islower())


def roles(fields: list[Field], id_name: str = "", time: TimeForm | None = None) -> dict[str, str]:
    """Which scenario column fills each value field (by its path), so the scenario's keys, skew, values and
    event-time disorder (late records included) reach the job: the field ``id_name`` (``--id``), else every field
    named like an id, gets the event's unique id; the field ``time`` names (``--time``) and every timestamp or date
    its event time; the first other string field gets the event's key, the first other number its value; the rest
    are derived from the id. Nested fields take part in the payload's order. Documented in docs/jobs.md."""
    out: dict[str, str] = {}
    for f in leaves(fields):
        idlike = (f.key == id_name if id_name else id_like(f.name)) and f.kind in ("string", "int")
        if time is not None and f.key == time.field:
            out[f.key] = "event_time"
        elif idlike:
            out[f.key] = "id"
        elif f.kind == "string" and "key" not in out.values():
            out[f.key] = "key"
        elif f.kind in ("int", "float") and "value" not in out.values():
            out[f.key] = "value"
        elif f.kind in ("timestamp", "date"):
            out[f.key] = "event_time"
        else:
            out[f.key] = "derived"
    return out


def record(fields: list[Field], role: dict[str, str], id_: int, key: str, value: int, ms: int,
           values: dict[str, list] | None = None, time: TimeForm | None = None) -> dict:
    """One payload as the job's producer would have written it (JSON-ready values); ``values``: the values a field
    takes (``--values``, chaos.jobs.values); ``time``: the field that carries the event time in its own form. A
    STRUCT is an object, an ARRAY a list of one element (an event stays one element when the job explodes it)."""
    def fill(f: Field):
        if f.kind == "struct":
            return {c.name: fill(c) for c in f.children}
        if f.kind == "array":
            return [fill(f.children[0])]
        r = role[f.key]
        if values and f.key in values:
            return pick(values[f.key], r, id_, key)
        if time is not None and f.key == time.field:
            return time.write(ms, f.kind)
        if f.kind == "timestamp":
            return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        if f.kind == "date":
            return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d")
        if f.kind == "string":
            return f"{f.name}-{id_}" if r == "id" else key if r == "key" else f"{f.name}-{id_ % 7}"
        if f.kind == "int":
            return id_ if r == "id" else value if r == "value" else id_ % 97
        if f.kind == "float":
            return value / 100 if r == "value" else (id_ % 97) / 4
        return id_ % 2 == 0

    return {f.name: fill(f) for f in fields}


def id_field(fields: list[Field], id_name: str = "", time: TimeForm | None = None) -> Field | None:
    """The payload field that carries each event's unique id (``roles``, with the same ``--time`` the generator
    fills it by), if the schema has one: output rows that keep it name the event they came from."""
    role = roles(fields, id_name, time)
    return next((f for f in leaves(fields) if role[f.key] == "id"), None)


def event_id(field: Field, value) -> int | None:
    """The event id in a value of ``id_field`` as the sink stored it (``order_id-600`` or 600), or None."""
    if value is None:
        return None
    text = str(value)
    prefix = f"{field.name}-"
    digits = text[len(prefix):] if field.kind == "string" and text.startswith(prefix) else text
    return int(digits) if digits.isdigit() else None


def typed(fields: list[Field], row: dict, *, records: bool = False) -> tuple | dict:
    """A payload as a Spark row of the job's schema (a file source's records); ``records``: as a dict whose STRUCTs
    are dicts too (an Avro record: chaos.jobs.avro_values). A time the job writes in a form of its own (``--time``)
    stays as it is."""
    def cast(f: Field, v):
        if v is None:
            return None
        if f.kind == "struct":
            values = {c.name: cast(c, v.get(c.name)) for c in f.children}
            return values if records else tuple(values.values())
        if f.kind == "array":
            return [cast(f.children[0], item) for item in v]
        if f.kind == "timestamp" and isinstance(v, str):
            return datetime.strptime(v, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        if f.kind == "date" and isinstance(v, str):
            return datetime.strptime(v, "%Y-%m-%d").date()
        return v

    values = {f.name: cast(f, row[f.name]) for f in fields}
    return values if records else tuple(values.values())


def kafka_row(fields: list[Field], role: dict[str, str], topics: list[str], id_: int, key: str, value: int,
              ms: int, partition: int, offset: int, values: dict[str, list] | None = None,
              time: TimeForm | None = None, encoding: str = "json") -> tuple:
    """One event as Spark's Kafka source gives it: the payload in ``value`` (compact JSON, or a CSV line in the
    schema's order: ``encoding``), the event's key as the record key (the value its key field takes where
    ``--values`` names that field), its partition and offset as the record's provenance."""
    payload = encode(record(fields, role, id_, key, value, ms, values, time), encoding, fields)
    topic = topics[partition % len(topics)]
    keyed = next((path for path, r in role.items() if r == "key" and values and path in values), None)
    record_key = str(pick(values[keyed], "key", id_, key)) if keyed else key
    return (record_key.encode(), payload, topic, partition, offset, datetime.fromtimestamp(ms / 1000, tz=UTC), 0)


VALUE_ENCODINGS = ("json", "csv", "avro:FILE", "avro-confluent:FILE")


def encode(row: dict, encoding: str = "json", fields: list[Field] | None = None) -> bytes:
    """A payload as a Kafka record's value: compact JSON (what ``from_json`` reads), one CSV line of its values
    in the schema's order as ``from_csv`` reads it with Spark's defaults (comma, ``"`` quotes, ``true``/``false``,
    an empty field for null, ISO times), or Avro in the job's schema file (chaos/jobs/avro_values.py)."""
    if encoding == "json":
        return json.dumps(row, separators=(",", ":")).encode()
    if encoding.startswith(("avro:", "avro-confluent:")):
        from chaos.jobs import avro_values

        return avro_values.encode(typed(fields or [], row, records=True), encoding)
    cells = []
    for v in row.values():
        text = "" if v is None else ("true" if v else "false") if isinstance(v, bool) else str(v)
        quoted = any(c in text for c in ',"\\\n\r') or text != text.strip()
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')  # Spark's CSV escape is a backslash
        cells.append(f'"{escaped}"' if quoted else text)
    return ",".join(cells).encode()


def schema_from_sample(text: str) -> str:
    """A payload's DDL from one sample record (JSON): strings, integers, floats, booleans, and strings that read
    as ISO dates or timestamps."""
    try:
        sample = json.loads(text)
    except ValueError as exc:
        raise UserError(f"--schema: the sample record is not JSON ({exc})") from None
    if not isinstance(sample, dict) or not sample:
        raise UserError("--schema: give a sample record as one JSON object, e.g. '{\"customer\": \"c1\", "
                        "\"amount\": 5}'")
    fields = []
    for name, value in sample.items():
        if isinstance(value, bool):
            kind = "BOOLEAN"
        elif isinstance(value, int):
            kind = "LONG"
        elif isinstance(value, float):
            kind = "DOUBLE"
        elif isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            kind = "DATE"
        elif isinstance(value, str) and re.fullmatch(ISO_TIMESTAMP, value):
            kind = "TIMESTAMP"
        elif isinstance(value, str):
            kind = "STRING"
        else:
            raise UserError(f"--schema: the sample's field {name} holds {type(value).__name__}; records can be "
                            "generated for flat fields only")
        fields.append(f"{name} {kind}")
    return ", ".join(fields)


def as_ddl(schema) -> str | None:
    """A payload schema as given: Spark DDL, a sample record (JSON), or a ``StructType``."""
    if schema is None:
        return None
    if hasattr(schema, "fields"):
        return ", ".join(f"{_ddl_name(f.name)} {_ddl_type(f.dataType)}" for f in schema.fields)
    text = str(schema).strip()
    return schema_from_sample(text) if text.startswith("{") else text


def _ddl_name(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f"`{name}`"


def _ddl_type(data_type) -> str:
    """A Spark type as DDL, nested names backquoted where they need it (``simpleString`` leaves them bare)."""
    if hasattr(data_type, "fields"):
        return "STRUCT<" + ", ".join(f"{_ddl_name(f.name)}: {_ddl_type(f.dataType)}" for f in data_type.fields) + ">"
    if hasattr(data_type, "elementType"):
        return f"ARRAY<{_ddl_type(data_type.elementType)}>"
    return data_type.simpleString().upper()
