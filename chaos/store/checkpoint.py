"""Reading a Spark checkpoint's files as stored, whatever wrote them: the source offsets of each batch."""

from __future__ import annotations

import json


def read_offsets_file(path: str) -> list[dict]:
    """The source offsets recorded in one offsets/N file (line 1: version, 2: metadata), each as
    ``{partition: events read}`` whatever the source (ours, the socket source, the rate source).
    A damaged file (truncated, not UTF-8, wrong types: ``damage-checkpoint`` makes them) yields only the
    lines that still read as offsets."""
    try:
        with open(path, "rb") as fh:
            lines = fh.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []
    found = []
    for line in lines[2:]:
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or a number too long to convert
            continue
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            try:
                found.append(_rate_counts(value))
            except (KeyError, TypeError, ValueError):
                continue
        elif isinstance(value, dict) and all(type(v) is int for v in value.values()):
            found.append(value)
        elif type(value) is int:  # a LongOffset (socket source): the index of the last line read
            found.append({"0": value + 1})
    return found


def _rate_counts(offset: dict) -> dict:
    """A rate source's offset (``{p: {"value": last emitted, "runTimeMs": t}}``) as events read per partition.

    Partition p of P emits p, p+P, p+2P, ... and starts at ``value = p - P``; so it has emitted
    ``(value - p) // P + 1`` values.
    """
    parts = len(offset)
    return {p: (int(v["value"]) - int(p)) // parts + 1 for p, v in offset.items()}
