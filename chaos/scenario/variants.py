"""Configuration variants: ``--conf KEY=VALUE`` on a trial, ``--conf KEY=V1,V2`` on a campaign (every combination
is a variant with its own verdict).

A variant is applied to the pipeline's own query as it starts, in the driver, so a pipeline needs no code for it:
``spark.*`` keys are set on the trial's session (Spark SQL settings such as the state store provider,
``spark.sql.streaming.minBatchesToRetain`` or ``spark.sql.streaming.noDataMicroBatches.enabled``: the query
takes them when it starts, and every restarted driver applies them again); ``trigger`` sets the trigger
(``processingTime:0``, ``processingTime:3s``, ``availableNow``, ``once``); any other key is a ``writeStream``
option (``asyncProgressTrackingEnabled``, ``asyncProgressTrackingCheckpointIntervalMs``). Set on
``DataStreamWriter.start`` and ``toTable``, after the pipeline's own settings, so the variant wins.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from contextlib import contextmanager

from chaos.errors import UserError

TRIGGER = "trigger"
# A driver's exit code when the job itself cannot start (a script that exits or raises before its query starts,
# a job that starts none): the trial ends as the user's mistake, in the one line the driver logged (JOB_ERROR).
JOB_ERROR_RC = 65
JOB_ERROR = "streamchaos: job error: "
REFUSED_RC = 78  # a driver's exit code when Spark refuses the trial's variant (EX_CONFIG): the verdict ``refused``
# The harness's one line for the job's own mistake raised inside a batch, where the job's code called it (a client
# it cannot reroute: chaos.jobs): the query's error carries the Python traceback's last line.
_RAISED_FOR_THE_JOB = re.compile(r"chaos\.errors\.UserError: ([^\n]+)")


def raised_for_the_job(error: str) -> str | None:
    """What the harness told the job inside a batch, found in the query's error (None: the job failed otherwise)."""
    said = _RAISED_FOR_THE_JOB.search(error)
    return said.group(1).strip() if said else None


_TRIGGER = re.compile(r"processingTime:(\d+(?:\.\d+)?)(ms|s|m)?|availableNow|once")


def parse_assignment(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (the value may hold ``=``)."""
    key, sep, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not key or not value:
        raise UserError(f"--conf {text!r}: use KEY=VALUE, e.g. --conf spark.sql.streaming.minBatchesToRetain=2")
    if key == TRIGGER:
        trigger_args(value)  # one line now, not a crashed driver later
    return key, value


def parse_conf(texts: list[str]) -> dict[str, str]:
    """A trial's ``--conf KEY=VALUE`` options."""
    conf: dict[str, str] = {}
    for text in texts:
        key, value = parse_assignment(text)
        if key in conf:
            raise UserError(f"--conf {key} given twice: give each key once")
        conf[key] = value
    return conf


def parse_matrix(texts: list[str]) -> dict[str, list[str]]:
    """A campaign's ``--conf KEY=V1,V2`` options: each key with its values, in the order given."""
    matrix: dict[str, list[str]] = {}
    for text in texts:
        key, values = parse_assignment(text)
        if key in matrix:
            raise UserError(f"--conf {key} given twice: list its values once, comma-separated (KEY=V1,V2)")
        options = [v.strip() for v in values.split(",")]
        if not all(options) or len(set(options)) != len(options):
            raise UserError(f"--conf {text!r}: give distinct, non-empty values separated by commas")
        for value in options:
            parse_assignment(f"{key}={value}")
        matrix[key] = options
    return matrix


def variants(matrix: dict[str, list[str]] | None) -> list[dict[str, str]]:
    """Every combination, the first key varying slowest; ``[{}]`` for no matrix."""
    if not matrix:
        return [{}]
    keys = list(matrix)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(matrix[k] for k in keys))]


def short(text: str) -> str:
    """The last dotted part of a key or a class name (``...HDFSBackedStateStoreProvider``)."""
    return text.rsplit(".", 1)[-1]


def label(conf: dict[str, str]) -> str:
    """A variant as a report shows it: ``providerClass=RocksDBStateStoreProvider, trigger=availableNow``."""
    return ", ".join(f"{short(k)}={short(v) if '.' in v and not v[0].isdigit() else v}" for k, v in conf.items())


def trigger_args(value: str) -> dict:
    """``DataStreamWriter.trigger`` keyword arguments for a ``trigger`` value."""
    match = _TRIGGER.fullmatch(value)
    if not match:
        raise UserError(f"trigger {value!r}: use processingTime:0, processingTime:3s (ms, s or m), availableNow "
                        "or once")
    if value == "availableNow":
        return {"availableNow": True}
    if value == "once":
        return {"once": True}
    amount, unit = float(match.group(1)), match.group(2) or "ms"
    millis = amount * {"ms": 1, "s": 1000, "m": 60_000}[unit]
    return {"processingTime": f"{millis:g} milliseconds"}


@contextmanager
def applied(spark, conf: dict[str, str] | None) -> Iterator[None]:
    """While the pipeline starts its query: the variant's settings on every ``writeStream`` start."""
    if not conf:
        yield
        return
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    original_start, original_to_table = DataStreamWriter.start, DataStreamWriter.toTable

    def configure(writer: DataStreamWriter) -> None:
        for key, value in conf.items():
            if key == TRIGGER:
                writer.trigger(**trigger_args(value))
            elif key.startswith("spark."):
                spark.conf.set(key, value)
            else:
                writer.option(key, value)
        print(f"streamchaos: query started with {label(conf)}", flush=True)

    def start(self, *args, **kwargs):
        configure(self)
        return original_start(self, *args, **kwargs)

    def to_table(self, *args, **kwargs):
        configure(self)
        return original_to_table(self, *args, **kwargs)

    DataStreamWriter.start, DataStreamWriter.toTable = start, to_table
    try:
        yield
    finally:
        DataStreamWriter.start, DataStreamWriter.toTable = original_start, original_to_table


def grid(summary: dict) -> tuple[list[str], dict[str, dict[str, dict]]] | None:
    """A campaign summary with configuration variants as a pipeline x configuration grid: the variants' labels
    (columns) and per pipeline the summary row of each (cells); None without variants."""
    rows = summary["pipelines"]
    if not any(row.get("conf") for row in rows.values()):
        return None
    columns: list[str] = []
    cells: dict[str, dict[str, dict]] = {}
    for row in rows.values():
        column = label(row.get("conf") or {}) or "(none)"
        if column not in columns:
            columns.append(column)
        cells.setdefault(row.get("pipeline", "?"), {})[column] = row
    return columns, cells


def async_progress(conf: dict[str, str] | None) -> bool:
    """Whether a variant turns asynchronous progress tracking on (its offsets and commits then lag the query)."""
    return str((conf or {}).get("asyncProgressTrackingEnabled", "")).lower() == "true"
