"""``streamchaos init``: a starter consistency test for a user's job, ready for ``pytest``."""

from __future__ import annotations

import json
import re
from pathlib import Path

from chaos.errors import UserError
from chaos.jobs.reference import parse_ref
from chaos.scenario.names import entry_module
from chaos.store.atomic import write_text

TEMPLATE = '''"""{entry} under crashes: does it keep its output exactly-once?

Written by `streamchaos init`; run it with `pytest {path}`. A violation fails the test with the
smallest fault schedule that shows it and the `streamchaos trial` command that replays it;
`--chaos-trials N` runs more schedules (docs/jobs.md).
"""

import pytest

JOB = "{entry}"
# The payload the job parses, as Spark DDL: the harness serves records of it in place of the job's source.
SCHEMA = "{schema}"
# Where the job writes, read back after every trial{sink_note}.
SINK = "{sink}"
KEY = {key}  # an upsert sink's key: its final row per key is compared; () compares every row
VALUES = {values}  # the values payload fields take (--values); None: generated ones
EVENT_ID = {event_id}  # the payload field carrying the event id (--id); None: the first named like one
TIME = {time}  # the event-time field and its form (--time FIELD:FORM); None: its TIMESTAMP fields
KAFKA_VALUE = {encoding}  # its Kafka records' values: "json" (None) or "csv" (--kafka-value)
SQL_INIT = {sql_init}  # SQL files run in the trial's databases before the job starts (--sql-init)
ARGS = {args}  # a script's own command-line arguments (after --)


@pytest.mark.consistency(expect="exactly-once", faults="kill")
def test_{name}_is_exactly_once_under_crashes(chaos_check):
    chaos_check(JOB, schema=SCHEMA, sink=SINK, key=KEY, values=VALUES, id=EVENT_ID, time=TIME,
                kafka_value=KAFKA_VALUE,
                sql_init=SQL_INIT, args=ARGS)
'''


def starter_test(ref: str, out: Path | None) -> Path:
    """Write the test for the job ``ref`` names (its options already folded in: chaos.jobs.reference.job_ref)."""
    spec = parse_ref(ref).validate()
    module, func, _ = entry_module(spec.entry)
    name = re.sub(r"\W+", "_", f"{module.rsplit('.', 1)[-1]}_{func}").strip("_").lower()
    path = out or Path("tests") / f"test_{name}_consistency.py"
    if path.exists():
        raise UserError(f"{path} exists: give another path with --out, or remove it")
    note = {"postgres": " (the job gets the harness's PostgreSQL as DATABASE_URL)",
            "sqlite": " (the job gets a SQLite file of the trial's as DATABASE_URL)"}.get(
        spec.sink_kind, " (its file sink's path is the trial's)")
    text = TEMPLATE.format(entry=spec.entry, path=path, schema=(spec.schema or "").replace('"', '\\"'),
                           sink=spec.sink, sink_note=note, key=repr(tuple(spec.key)), name=name,
                           values=repr(json.loads(spec.values)) if spec.values else None,
                           event_id=repr(spec.id or None), time=repr(spec.time or None),
                           encoding=repr(spec.encoding or None),
                           sql_init=repr(list(spec.sql)) if spec.sql else None,
                           args=repr(list(spec.args)) if spec.args else None)
    return write_text(path, text)
