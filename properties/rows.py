"""Loss and duplication inferred from whole rows: a sink against the Spark batch query's output.

A user's job writes rows that name no input event. What Spark's own tests do (``StreamTest`` checks a
stream's answer against the same query run as a batch) works here too: the batch query's output is the
exactly-once answer, and the sink's rows are compared with it as multisets. A row the sink holds more
often than the batch answer is a duplicate, less often a loss, a row the batch answer never has is
unexpected. With a key (an upsert sink), the final row per key is compared: a key missing is a loss, a
key too many unexpected, and a row whose numbers all exceed the answer's is counted as duplicated input
(all below: lost input); any other difference is unexpected. Labelled inferred, like per-key counts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal

import polars as pl

from chaos.errors import UserError
from properties.inference import Inference
from properties.verdicts import from_anomalies

FLOAT_DIGITS = 9  # sums of doubles in another order differ in their last bits


def _plain(value):
    if isinstance(value, float):
        return float(f"{value:.{FLOAT_DIGITS}g}")
    if isinstance(value, Decimal):
        return float(f"{float(value):.{FLOAT_DIGITS}g}")
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return value


def _rows(frame: pl.DataFrame, columns: list[str]) -> list[tuple]:
    return [tuple(_plain(v) for v in row) for row in frame.select(columns).iter_rows()]


def _columns(expected: pl.DataFrame, observed: pl.DataFrame) -> list[str]:
    missing = [c for c in expected.columns if c not in observed.columns]
    if missing and observed.width:
        raise UserError(f"the sink has no column(s) {', '.join(missing)} that the batch query wrote: read the "
                        "table the job writes to")
    return list(expected.columns)


def infer_from_rows(expected: pl.DataFrame, observed: pl.DataFrame, key: tuple[str, ...] = (),
                    ids: Callable[[dict], int | None] | None = None) -> Inference:
    """``expected``: the batch query's output; ``observed``: the sink's. Deltas count rows (keys with ``key``).
    ``ids``: the event a row came from, if its columns name one; each anomaly then lists ``ids`` (the checker
    attributes them to batches and faults as it does provenance)."""
    if expected.width == 0 and observed.width == 0:
        return Inference(from_anomalies(False, False, False), keys={"exact": 0, "over": 0, "under": 0})
    columns = _columns(expected, observed) if expected.width else list(observed.columns)
    if observed.width == 0:
        observed = pl.DataFrame(schema=expected.select(columns).schema)
    found = _by_key(expected, observed, columns, key) if key else _multiset(expected, observed, columns)
    if ids is not None:
        for entry in (*found.lost, *found.duplicated, *found.unexpected):
            event = ids(json.loads(entry["key"]))
            if event is not None:
                entry["ids"] = [event]
    return found


def _label(columns: list[str], row: tuple) -> str:
    return json.dumps(dict(zip(columns, row, strict=True)), default=str)


def _multiset(expected: pl.DataFrame, observed: pl.DataFrame, columns: list[str]) -> Inference:
    want: dict[tuple, int] = {}
    for row in _rows(expected, columns):
        want[row] = want.get(row, 0) + 1
    have: dict[tuple, int] = {}
    for row in _rows(observed, columns):
        have[row] = have.get(row, 0) + 1
    lost, dup, unexpected = [], [], []
    exact = 0
    for row in sorted(set(want) | set(have), key=repr):
        w, h = want.get(row, 0), have.get(row, 0)
        label = _label(columns, row)
        if w == 0:
            unexpected.append({"key": label, "why": f"the batch query never writes this row; the sink holds it {h}x"})
        elif h > w:
            dup.append({"key": label, "delta": h - w})
        elif h < w:
            lost.append({"key": label, "delta": h - w})
        else:
            exact += 1
    return Inference(from_anomalies(bool(lost), bool(dup), bool(unexpected)), lost, dup, unexpected,
                     {"exact": exact, "over": len(dup), "under": len(lost)})


def _by_key(expected: pl.DataFrame, observed: pl.DataFrame, columns: list[str], key: tuple[str, ...]) -> Inference:
    absent = [k for k in key if k not in columns]
    if absent:
        raise UserError(f"--key {','.join(key)}: the job's output has no column(s) {', '.join(absent)}")
    rest = [c for c in columns if c not in key]
    idx = [columns.index(k) for k in key]

    def final(frame: pl.DataFrame) -> dict[tuple, tuple]:  # the last row per key (an upsert keeps one)
        return {tuple(r[i] for i in idx): tuple(r[columns.index(c)] for c in rest) for r in _rows(frame, columns)}

    want, have = final(expected), final(observed)
    lost, dup, unexpected = [], [], []
    exact = 0
    for k in sorted(set(want) | set(have), key=repr):
        label = _label(list(key), k)
        if k not in have:
            lost.append({"key": label, "delta": -1, "want": _label(rest, want[k])})
        elif k not in want:
            unexpected.append({"key": label, "why": f"the batch query writes no row for this key; the sink holds "
                                                    f"{_label(rest, have[k])}"})
        elif have[k] == want[k]:
            exact += 1
        else:
            pairs = [(h, w) for h, w in zip(have[k], want[k], strict=True) if h != w]
            numeric = all(isinstance(h, int | float) and isinstance(w, int | float) for h, w in pairs)
            entry = {"key": label, "want": _label(rest, want[k]), "have": _label(rest, have[k])}
            if numeric and all(h > w for h, w in pairs):
                dup.append({**entry, "delta": 1})
            elif numeric and all(h < w for h, w in pairs):
                lost.append({**entry, "delta": -1})
            else:
                unexpected.append({"key": label, "why": f"the sink holds {entry['have']}, the batch query writes "
                                                        f"{entry['want']}"})
    return Inference(from_anomalies(bool(lost), bool(dup), bool(unexpected)), lost, dup, unexpected,
                     {"exact": exact, "over": len(dup), "under": len(lost)})
