"""Loss and duplication inferred from whole rows: a sink against Spark's own answer.

A user's job writes rows that name no input event. What Spark's own tests do (``StreamTest`` checks a
stream's answer against the same query over all its input at once) works here too: the job run over every
record in one micro-batch, with no fault, is the exactly-once answer, and the sink's rows are compared with
it as multisets. A row the sink holds more often than the answer is a duplicate, less often a loss, a row
the answer never has is unexpected. With a key (an upsert sink), the final row per key is compared: a key
missing is a loss, a key too many unexpected, and a row whose numbers all exceed the answer's is counted as
duplicated input (all below: lost input); any other difference is unexpected. Labelled inferred, like
per-key counts.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

import polars as pl

from chaos.errors import UserError
from properties.inference import Inference
from properties.verdicts import from_anomalies

FLOAT_DIGITS = 9  # sums of doubles in another order differ in their last bits


@dataclass
class BatchAnswer:
    """What the job wrote run over every record at once (``rows``) and, for a job with a watermark, over the
    records no batch of the stream read behind its watermark (``on_time``). Spark promises nothing for late
    records: an operator keyed on event time may drop them, or aggregate them into a window it has emitted
    already and emit it again (an upsert then keeps that partial count); elsewhere they are kept. So a row
    the two answers disagree on is optional, whatever the sink holds for it: with a key, that key's row; without
    one, every row of the same group (the same values but for its numbers)."""

    rows: pl.DataFrame
    on_time: pl.DataFrame | None = None
    # Columns two runs of the answer disagree on (``varying_columns``): stamps such as current_timestamp() or
    # uuid(), which no two runs share; rows are compared without them.
    left_out: tuple[str, ...] = ()
    # Columns the database fills itself (``id BIGSERIAL``, ``inserted_at DEFAULT now()``): not the job's output, and
    # a replayed row gets a new value in them; rows are compared without them too.
    filled: tuple[str, ...] = ()


def varying_columns(first: pl.DataFrame, second: pl.DataFrame) -> tuple[str, ...]:
    """The columns whose values differ between two runs of the job over the same records with no fault: Spark's
    answer for them is not one answer. Two runs that differ in their number of rows (a ``rand()`` sample) leave
    every column in: rows that vary cannot be compared column by column."""
    if first.width == 0 or second.width == 0 or first.height != second.height or first.columns != second.columns:
        return ()
    return tuple(c for c in first.columns
                 if sorted(map(_plain, first[c].to_list()), key=repr) != sorted(map(_plain, second[c].to_list()),
                                                                               key=repr))


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


def _columns(expected: pl.DataFrame, observed: pl.DataFrame) -> list[str]:
    missing = [c for c in expected.columns if c not in observed.columns]
    if missing and observed.width:
        raise UserError(f"the sink has no column(s) {', '.join(missing)} that Spark's answer has: read the "
                        "table the job writes to")
    return list(expected.columns)


def infer_from_rows(expected: pl.DataFrame | BatchAnswer, observed: pl.DataFrame, key: tuple[str, ...] = (),
                    ids: Callable[[dict], int | None] | None = None) -> Inference:
    """``expected``: Spark's answer (the job over every record at once); ``observed``: the sink's. Deltas count
    rows (keys with ``key``).
    ``ids``: the event a row came from, if its columns name one; each anomaly then lists ``ids`` (the checker
    attributes them to batches and faults as it does provenance)."""
    answer = expected if isinstance(expected, BatchAnswer) else BatchAnswer(expected)
    if answer.left_out or answer.filled:  # compared without the columns no two runs share; a key of them is none
        gone = [*answer.left_out, *answer.filled]
        key = tuple(k for k in key if k not in gone)
        answer = BatchAnswer(answer.rows.drop(gone, strict=False),
                             None if answer.on_time is None else answer.on_time.drop(gone, strict=False))
        observed = observed.drop(gone, strict=False)
    everything = answer.rows
    if everything.width == 0 and observed.width == 0:
        return Inference(from_anomalies(False, False, False), keys={"exact": 0, "over": 0, "under": 0, "optional": 0})
    columns = _columns(everything, observed) if everything.width else list(observed.columns)
    if observed.width == 0:
        observed = everything.select(columns).clear()
    if everything.width == 0:  # no answer (a trial that never drained): every row the sink holds is unexplained
        everything = observed.select(columns).clear()
    on_time = answer.on_time if answer.on_time is not None and answer.on_time.width else everything
    found = (_by_key(everything, on_time, observed, columns, key) if key
             else _multiset(everything, on_time, observed, columns))
    if ids is not None:
        for entry in (*found.lost, *found.duplicated, *found.unexpected):
            event = ids(json.loads(entry["key"]))
            if event is not None:
                entry["ids"] = [event]
    return found


def _label(columns: list[str], row: tuple) -> str:
    return json.dumps(dict(zip(columns, row, strict=True)), default=str)


def _counts(frame: pl.DataFrame, columns: list[str]) -> dict[tuple, int]:
    """Rows (comparable values) and their multiplicity."""
    return Counter(tuple(_plain(v) for v in row) for row in frame.select(columns).iter_rows())


def _numeric(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _signature(row: tuple) -> tuple:
    """A row without its numbers: the group it counts (a window and a page, say)."""
    return tuple(v for v in row if not _numeric(v))


def _multiset(everything: pl.DataFrame, on_time: pl.DataFrame, observed: pl.DataFrame,
              columns: list[str]) -> Inference:
    every, timely, have = (_counts(f, columns) for f in (everything, on_time, observed))
    touched = {_signature(r) for r in set(every) | set(timely) if every.get(r, 0) != timely.get(r, 0)}
    lost, dup, unexpected = [], [], []
    exact = optional = 0
    for row in sorted(set(every) | set(timely) | set(have), key=repr):
        a, h = every.get(row, 0), have.get(row, 0)
        label = _label(columns, row)
        if _signature(row) in touched:  # a late record's group: any count, or none, is Spark's promise
            optional += 1
        elif a == 0:
            unexpected.append({"key": label, "why": f"Spark's answer never holds this row; the sink holds it {h}x"})
        elif h > a:
            dup.append({"key": label, "delta": h - a})
        elif h < a:
            lost.append({"key": label, "delta": h - a})
        else:
            exact += 1
    return Inference(from_anomalies(bool(lost), bool(dup), bool(unexpected)), lost, dup, unexpected,
                     {"exact": exact, "over": len(dup), "under": len(lost), "optional": optional})


def _by_key(everything: pl.DataFrame, on_time: pl.DataFrame, observed: pl.DataFrame, columns: list[str],
            key: tuple[str, ...]) -> Inference:
    absent = [k for k in key if k not in columns]
    if absent:
        raise UserError(f"--key {','.join(key)}: the job's output has no column(s) {', '.join(absent)}")
    rest = [c for c in columns if c not in key]
    idx = [columns.index(k) for k in key]

    def final(frame: pl.DataFrame) -> dict[tuple, tuple]:  # the last row per key (an upsert keeps one)
        out = {}
        for row in frame.select(columns).iter_rows():
            plain = tuple(_plain(v) for v in row)
            out[tuple(plain[i] for i in idx)] = tuple(plain[columns.index(c)] for c in rest)
        return out

    every, timely, have = final(everything), final(on_time), final(observed)
    lost, dup, unexpected = [], [], []
    exact = optional = 0
    for k in sorted(set(every) | set(timely) | set(have), key=repr):
        label = _label(list(key), k)
        if every.get(k) != timely.get(k):  # a late record's key: any row, or none, is Spark's promise
            optional += 1
            continue
        if k not in have:
            lost.append({"key": label, "delta": -1, "want": _label(rest, every[k])})
            continue
        got = have[k]
        if k not in every:
            unexpected.append({"key": label, "why": f"Spark's answer has no row for this key; the sink holds "
                                                    f"{_label(rest, got)}"})
        elif got == every[k]:
            exact += 1
        else:
            want = every[k]
            pairs = [(h, w) for h, w in zip(got, want, strict=True) if h != w]
            numeric = all(_numeric(h) and _numeric(w) for h, w in pairs)
            entry = {"key": label, "want": _label(rest, want), "have": _label(rest, got)}
            if numeric and all(h > w for h, w in pairs):
                dup.append({**entry, "delta": 1})
            elif numeric and all(h < w for h, w in pairs):
                lost.append({**entry, "delta": -1})
            else:
                unexpected.append({"key": label, "why": f"the sink holds {entry['have']}, Spark's answer "
                                                        f"{entry['want']}"})
    return Inference(from_anomalies(bool(lost), bool(dup), bool(unexpected)), lost, dup, unexpected,
                     {"exact": exact, "over": len(dup), "under": len(lost), "optional": optional})
