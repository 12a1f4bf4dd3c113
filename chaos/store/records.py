"""Reading back what a run stored (scenario.json, result.json, history.jsonl, campaign.json, verdict.json):
every damaged file is one clear line naming the file and the fix, never a traceback and never a verdict.

A run directory is evidence. A file that was truncated by a full disk, edited by hand, written by another
version or replaced by something else must stop the check with a ``UserError`` rather than let the checker
judge from whatever part of it still parses: a ``result.json`` whose ``offsets`` became a string would
otherwise attribute nothing and could pass as exactly-once. So each file is read whole (bounded in size),
decoded as UTF-8, parsed as JSON, and its fields are checked against the types the harness writes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from chaos.errors import UserError
from chaos.guarantees import VERDICTS

MAX_BYTES = 64 << 20  # far above anything a run writes (a 100k-event history is a few MiB)

NUMBER = (int, float)
OPT_INT = (int, type(None))
OPT_STR = (str, type(None))
OPT_LIST = (list, type(None))
OPT_DICT = (dict, type(None))

# The fields a trial's result.json must have, and their JSON types (properties/check.py reads these).
RESULT_FIELDS: dict[str, tuple] = {
    "outcome": (str,), "seconds": NUMBER, "offsets": (list,), "faults": (list,), "deliveries": OPT_LIST,
}
OFFSET_FIELDS: dict[str, tuple] = {"batch": (int,), "start": OPT_DICT, "end": OPT_DICT, "committed": (bool,)}
# A fault at a time that fired before any phase was reported landed at no phase (None).
RESULT_FAULT_FIELDS: dict[str, tuple] = {"spec": (str,), "fired": (bool,), "phase": OPT_STR}
HISTORY_FIELDS: dict[str, tuple] = {"t": NUMBER, "kind": (str,), "batch": OPT_INT, "phase": OPT_STR,
                                    "detail": (dict,)}
# Keys of a history record's detail that the checker and the report read: their types when present.
DETAIL_FIELDS: dict[str, tuple] = {"incarnation": (int,), "spec": (str,), "event": (str,), "done": (bool,),
                                   "attempt": (int,)}
# A trial's verdict.json as properties/check.py writes it and the campaign and the report read it.
VERDICT_FIELDS: dict[str, tuple] = {
    "pipeline": (str,), "declared": (str,), "verdict": (str,), "meets": (bool, type(None)), "effect": (dict,),
    "lost": (list,), "duplicated": (list,), "unexpected": (list,), "deliveries": OPT_DICT,
    "consistent_cut": OPT_DICT,
}

# A shrink record (campaign/shrinks/P.json), as the summary and the report read it.
SHRINK_FIELDS: dict[str, tuple] = {
    "pipeline": (str,), "declared": (str,), "from": (str,), "from_faults": (list,), "minimal": (list,),
    "minimal_trial": (str,), "verdict": (str,), "path": (list,), "command": (str,),
}


def read_text(path: Path, fix: str) -> str:
    """The whole file as text, or one line saying why not (missing, too large, not UTF-8)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise UserError(f"{path} is {size >> 20} MiB, larger than anything streamchaos writes "
                            f"({MAX_BYTES >> 20} MiB): it is damaged; {fix}")
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise UserError(f"{path} is missing: is this a streamchaos run directory?") from None
    except IsADirectoryError:
        raise UserError(f"{path} is a directory, not a file: {fix}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 text (byte {exc.start}): it is damaged; {fix}") from None
    except OSError as exc:
        raise UserError(f"{path} is unreadable ({exc.strerror or exc}): {fix}") from None


def parse_json(text: str, where: str, fix: str) -> Any:
    """JSON as the harness writes it: no NaN or infinities, no absurd nesting or numbers."""
    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not a value streamchaos writes")

    try:
        value = json.loads(text, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where} is corrupt ({exc.msg} at line {exc.lineno}): {fix}") from None
    except (ValueError, RecursionError) as exc:  # a 5000-digit integer, 1e999, nesting deeper than Python's stack
        raise UserError(f"{where} is corrupt ({str(exc)[:80] or type(exc).__name__}): {fix}") from None
    _finite(value, where, fix)
    return value


def _finite(value: Any, where: str, fix: str) -> None:
    """No float that overflowed to infinity (``1e999`` parses as inf)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            raise UserError(f"{where} is corrupt (a number out of range): {fix}")
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def load_json(path: Path, fix: str = "re-run the trial") -> Any:
    return parse_json(read_text(path, fix), str(path), fix)


def load_object(path: Path, fields: Mapping[str, tuple] | None = None, fix: str = "re-run the trial") -> dict:
    """A JSON object whose ``fields`` are present with their types."""
    value = load_json(path, fix)
    return require(value, fields or {}, str(path), fix)


def require(value: Any, fields: Mapping[str, tuple], where: str, fix: str) -> dict:
    """``value`` is an object holding every one of ``fields`` with one of its types (a bool is not a number)."""
    if not isinstance(value, dict):
        raise UserError(f"{where} holds {_kind(value)}, not an object: it is damaged; {fix}")
    for name, types in fields.items():
        if name not in value:
            raise UserError(f"{where} has no field {name!r}: it is damaged or from another version; {fix}")
        if not _is(value[name], types):
            raise UserError(f"{where}: field {name!r} is {_kind(value[name])}, expected "
                            f"{' or '.join(_TYPE_NAMES[t] for t in types)}: it is damaged; {fix}")
    return value


def require_each(items: list, fields: Mapping[str, tuple], where: str, fix: str) -> list[dict]:
    for k, item in enumerate(items):
        require(item, fields, f"{where}[{k}]", fix)
    return items


def load_result(run_dir: Path) -> dict:
    """A trial's result.json, checked field by field where the checker reads it."""
    path = Path(run_dir) / "result.json"
    fix = "re-run the trial (streamchaos replay DIR)"
    result = load_object(path, RESULT_FIELDS, fix)
    require_each(result["offsets"], OFFSET_FIELDS, f"{path}: offsets", fix)
    for k, entry in enumerate(result["offsets"]):
        for side in ("start", "end"):
            ends = entry[side] or {}
            if not all_of(ends.values(), (int,)):
                raise UserError(f"{path}: offsets[{k}].{side} holds a non-integer offset: it is damaged; {fix}")
    require_each(result["faults"], RESULT_FAULT_FIELDS, f"{path}: faults", fix)
    if result["deliveries"] is not None:
        require_each(result["deliveries"], {"batch_id": (int,)}, f"{path}: deliveries", fix)
    return result


def load_verdict(run_dir: Path) -> dict:
    """A trial's verdict.json, checked where the campaign and the report read it."""
    path = Path(run_dir) / "verdict.json"
    fix = "re-check the trial: streamchaos check DIR (or streamchaos analyze CAMPAIGN_DIR)"
    v = load_object(path, VERDICT_FIELDS, fix)
    if v["verdict"] not in VERDICTS:
        raise UserError(f"{path}: verdict {str(v['verdict'])[:40]!r} is none of {', '.join(VERDICTS)}: {fix}")
    counts = require(v["effect"], {"counts": (dict,)}, f"{path}: effect", fix)["counts"]
    if not all_of(counts.values(), (int,)):
        raise UserError(f"{path}: effect.counts holds something other than integers: {fix}")
    for name in ("lost", "duplicated", "unexpected"):
        require_each(v[name], {}, f"{path}: {name}", fix)
    if v["deliveries"] is not None:
        require(v["deliveries"], {"redelivered": (list,)}, f"{path}: deliveries", fix)
    if not isinstance(v.get("late_writes"), (dict, type(None))):
        raise UserError(f"{path}: late_writes is {_kind(v['late_writes'])}, expected an object or null: {fix}")
    return v


def load_shrink(path: Path, fix: str) -> dict:
    record = load_object(path, SHRINK_FIELDS, fix)
    for name in ("from_faults", "minimal"):
        if not all_of(record[name], (str,)):
            raise UserError(f"{path}: {name} holds something other than fault specs: {fix}")
    require_each(record["path"], {"trial": (str,), "faults": (list,), "verdict": (str,), "violates": (bool,)},
                 f"{path}: path", fix)
    if not all_of((f for step in record["path"] for f in step["faults"]), (str,)):
        raise UserError(f"{path}: a shrink step's faults hold something other than fault specs: {fix}")
    return record


def load_history(run_dir: Path) -> list[dict]:
    """A trial's history.jsonl (none yet: empty), each record checked."""
    path = Path(run_dir) / "history.jsonl"
    if not path.exists():
        return []
    fix = "re-run the trial (streamchaos replay DIR)"
    records = []
    for n, line in enumerate(read_text(path, fix).splitlines(), 1):
        where = f"{path} line {n}"
        record = require(parse_json(line, where, fix), HISTORY_FIELDS, where, fix)
        detail = record["detail"]
        for name, types in DETAIL_FIELDS.items():
            if name in detail and not _is(detail[name], types):
                raise UserError(f"{where}: detail.{name} is {_kind(detail[name])}: it is damaged; {fix}")
        records.append(record)
    return records


def _elements_ok(annotation: str, value: Any) -> bool:
    """The insides of the containers a stored dataclass holds (fault specs, conf values, conf matrices)."""
    if annotation in ("list[str]", "list[Fault]"):  # a scenario's faults are stored as their specs
        return all_of(value, (str,))
    if annotation == "dict[str, str]":
        return all_of(value.values(), (str,))
    if annotation == "dict[str, list[str]] | None" and value is not None:
        return all(isinstance(v, list) and all_of(v, (str,)) for v in value.values())
    return True


def _is(value: Any, types: tuple) -> bool:
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, types)


def all_of(values: Iterable[Any], types: tuple) -> bool:
    """Every value of one of ``types`` (a bool is not an integer)."""
    return all(_is(v, types) for v in values)


_TYPE_NAMES = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
               float: "a number", type(None): "null"}


def _kind(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


# A stored dataclass's field annotations (``from __future__ import annotations``: strings) as JSON types.
_ANNOTATION_TYPES = {"str": (str,), "int": (int,), "float": NUMBER, "bool": (bool,), "list[str]": (list,),
                     "list[Fault]": (list,),
                     "str | None": OPT_STR, "int | None": OPT_INT, "float | None": (int, float, type(None)),
                     "bool | None": (bool, type(None)), "dict[str, list[str]] | None": OPT_DICT,
                     "dict[str, str]": (dict,)}


def dataclass_fields(cls: type, data: Any, where: str, fix: str) -> dict:
    """The entries of ``data`` that are fields of dataclass ``cls``, each of its declared type (lists of
    strings hold strings), ready for ``cls(**...)``; required fields must be there."""
    from dataclasses import MISSING, fields

    if not isinstance(data, dict):
        raise UserError(f"{where} holds {_kind(data)}, not an object: it is damaged; {fix}")
    out = {}
    for f in fields(cls):
        if f.name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise UserError(f"{where} has no field {f.name!r}: it is damaged; {fix}")
            continue
        value, types = data[f.name], _ANNOTATION_TYPES[str(f.type)]
        if not _is(value, types) or not _elements_ok(str(f.type), value):
            raise UserError(f"{where}: field {f.name!r} is {_kind(value)}, expected {f.type}: it is damaged; {fix}")
        out[f.name] = value
    return out
