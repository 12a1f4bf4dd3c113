"""The values a payload field takes, from the user's domain (``--values FIELD=...``).

Generated payloads fill a string field with the event's key (``k000``..``k019``) and derive the others
from the id. A job that joins its stream with a dimension table, or filters on known codes, then sees
nothing it recognises. ``--values`` names the values a field takes instead:

* ``account=acc-1,acc-2,acc-3``: a list;
* ``shard=1..8``: an inclusive range of integers;
* ``account=@accounts.csv``: a file: its column named like the field if its first row names one, else its
  first column (a plain list, one value per line, is a one-column file).

The file is read once, where the command runs; the values travel in the job's reference (JSON), so a
stored scenario replays without the file. A field that gets the event's key keeps the key's distribution
(skew included): key ``kN`` takes value ``N mod len``; any other field takes ``id mod len``. Imported by the
executors' Python workers: the standard library only.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from chaos.errors import UserError

MAX_VALUES = 10_000
FILLABLE = ("string", "int", "float", "bool")


def parse_values(items: list[str] | tuple[str, ...] | dict | None, base: Path | None = None) -> str:
    """``--values`` options (or ``{field: [values]}``, as ``chaos_check`` takes them) as the canonical JSON text
    the job's reference carries ("" for none)."""
    out: dict[str, list[str]] = {}
    if isinstance(items, dict):
        out = {str(name): list(dict.fromkeys(str(v) for v in values)) for name, values in items.items()}
        items = ()
    for item in items or ():
        name, eq, spec = item.partition("=")
        name, spec = name.strip(), spec.strip()
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", name) or not spec:
            raise UserError(f"--values {item!r}: write FIELD=a,b,c or FIELD=1..100 or FIELD=@file.csv")
        if name in out:
            raise UserError(f"--values names {name} twice: give one list per field")
        out[name] = _values(name, spec, base or Path.cwd())
    return json.dumps(out, sort_keys=True, separators=(",", ":")) if out else ""


def _values(name: str, spec: str, base: Path) -> list[str]:
    if spec.startswith("@"):
        values = _from_file(name, (base / spec[1:]).expanduser())
    elif m := re.fullmatch(r"(-?\d+)\.\.(-?\d+)", spec):
        lo, hi = int(m[1]), int(m[2])
        if hi < lo or hi - lo >= MAX_VALUES:
            raise UserError(f"--values {name}={spec}: a range runs from low to high, at most {MAX_VALUES} values")
        values = [str(v) for v in range(lo, hi + 1)]
    else:
        values = [v.strip() for v in spec.split(",") if v.strip()]
    values = list(dict.fromkeys(values))
    if not values:
        raise UserError(f"--values {name}={spec}: no value in it")
    if len(values) > MAX_VALUES:
        raise UserError(f"--values {name}: {len(values)} values, at most {MAX_VALUES}: give a sample of them")
    return values


def _from_file(name: str, path: Path) -> list[str]:
    try:
        rows = [r for r in csv.reader(path.read_text(encoding="utf-8").splitlines()) if any(c.strip() for c in r)]
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--values {name}=@{path}: cannot read it ({exc.__class__.__name__}): give a UTF-8 CSV "
                        "or a list, one value per line") from None
    header = [c.strip() for c in rows[0]] if rows else []
    column = header.index(name) if name in header else 0
    body = rows[1:] if name in header else rows
    return [r[column].strip() for r in body if len(r) > column and r[column].strip()]


def value_lists(text: str | None, fields, role: dict[str, str]) -> dict[str, list]:
    """The JSON of ``parse_values`` typed for the job's fields (``role``: chaos.jobs.payloads.roles); a field the
    schema lacks, the field that carries each event's id, or one whose type cannot take the values is one line."""
    if not text:
        return {}
    kinds = {f.key: f.kind for f in fields}  # nested fields by their path (chaos.jobs.payloads.leaves)
    out = {}
    for name, values in json.loads(text).items():
        kind = kinds.get(name)
        if kind is None:
            raise UserError(f"--values {name}: the payload has no field {name}; its fields: {', '.join(kinds)}")
        if role.get(name) == "id":
            raise UserError(f"--values {name}: this field carries each event's unique id (its name ends in id), "
                            "which names the event in the sink: give values for another field")
        if kind not in FILLABLE or role.get(name) == "event_time":
            raise UserError(f"--values {name}: this field takes the event's time; give values for other "
                            f"{', '.join(FILLABLE)} fields")
        out[name] = [_typed(name, kind, v) for v in values]
    return out


def _typed(name: str, kind: str, value: str):
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "bool":
            return {"true": True, "false": False}[value.lower()]
    except (ValueError, KeyError):
        article = "an" if kind == "int" else "a"
        raise UserError(f"--values {name}: {value!r} is not {article} {kind}: give {kind} values for this field") \
            from None
    return value


def pick(values: list, role: str, id_: int, key: str):
    """The value of event ``id_`` (key ``key``): by key index for the field that carries the key, else by id."""
    n = int(key[1:]) if role == "key" and key[1:].isdigit() else id_
    return values[n % len(values)]
