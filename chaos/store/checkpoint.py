"""Reading a Spark checkpoint's files as stored, whatever wrote them: the source offsets of each batch."""

from __future__ import annotations

import json
import os
from pathlib import Path

from chaos.store.chained import chained_batch


def read_offsets_file(path: str) -> list[dict]:
    """The source offsets recorded in one offsets/N file (line 1: version, 2: metadata), each as
    ``{partition: events read}`` whatever the source (ours, Spark's Kafka connector, the socket source, the rate
    source; a Delta or file source reading a table another query of the job writes, through that query's offsets).
    A damaged file (truncated, not UTF-8, wrong types: ``damage-checkpoint`` makes them) yields only the
    lines that still read as offsets."""
    try:
        with open(path, "rb") as fh:
            lines = fh.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []
    found = []
    for source, line in enumerate(lines[2:]):
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or a number too long to convert
            continue
        # A query reading another query's table counts that query's events (chaos.store.chained).
        if (chained := chained_batch(path, source, value)) is not None:
            upstream, batch = chained
            ends = read_offsets_file(os.path.join(upstream, "offsets", str(batch))) if batch is not None else []
            counts = ends[0] if ends else {}
        else:
            counts = offset_counts(value)
        if counts is not None:
            found.append(counts)
    return found


def offset_counts(value: object) -> dict | None:
    """One source's offset (parsed JSON, as in offsets/N or a progress report's ``endOffset``) as
    ``{partition: events read}``, or None where it is no offset of a source the harness knows."""
    if isinstance(value, dict) and value and all(_is_kafka_topic(v) for v in value.values()):
        return _kafka_counts(value)
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        try:
            return _rate_counts(value)
        except (KeyError, TypeError, ValueError):
            return None
    if isinstance(value, dict) and all(type(v) is int for v in value.values()):
        return value
    if type(value) is int:  # a LongOffset (socket source): the index of the last line read
        return {"0": value + 1}
    return None


def _rate_counts(offset: dict) -> dict:
    """A rate source's offset (``{p: {"value": last emitted, "runTimeMs": t}}``) as events read per partition.

    Partition p of P emits p, p+P, p+2P, ... and starts at ``value = p - P``; so it has emitted
    ``(value - p) // P + 1`` values.
    """
    parts = len(offset)
    return {p: (int(v["value"]) - int(p)) // parts + 1 for p, v in offset.items()}


def _is_kafka_topic(value: object) -> bool:
    """Spark's Kafka connector writes ``{topic: {partition: next offset}}``: partitions are digit strings, offsets
    ints (a rate source's inner dict has ``value`` and ``runTimeMs``)."""
    return isinstance(value, dict) and bool(value) and all(
        isinstance(p, str) and p.isdigit() and type(o) is int for p, o in value.items())


def _kafka_counts(offset: dict) -> dict:
    """A Kafka offset as records read per partition: a topic the trial made starts at offset 0, so the next offset
    is the count. One topic's partitions are named by number, as the harness's own source names them; a second
    topic's are ``topic-partition``."""
    topics = sorted(offset)
    if len(topics) == 1:
        return dict(offset[topics[0]])
    return {f"{t}-{p}": o for t in topics for p, o in offset[t].items()}


def kafka_offsets(path: str) -> dict | None:
    """The Kafka source's entry of an offsets/N file as Spark wrote it (``{topic: {partition: offset}}``), if any."""
    try:
        with open(path, "rb") as fh:
            lines = fh.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in lines[2:]:
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict) and value and all(_is_kafka_topic(v) for v in value.values()):
            return value
    return None


def unfinished_first_offsets(checkpoint: Path) -> list[str]:
    """The temporary files of an ``offsets/0`` whose writer was killed before the rename, when the offset log holds
    no batch: Spark 4.1 and later refuse every restart on them (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY: the
    first-start check counts them as checkpoint data; docs/findings/003), so a refusal can say what it is."""
    offsets = checkpoint / "offsets"
    names = sorted(p.name for p in offsets.iterdir()) if offsets.is_dir() else []
    if any(name.isdigit() for name in names):
        return []
    return [name for name in names if name.startswith(".") and ".tmp" in name]
