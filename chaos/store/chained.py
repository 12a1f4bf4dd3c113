"""Offsets of a query that reads another query's table (bronze to silver), counted in events of the trial's stream.

A job may write the stream into a table with one query (bronze) and read that table with a second one (silver),
the query under test. The second query's ``offsets/N`` name versions of the table (Delta's ``reservoirVersion`` and
``index``) or entries of its file source's log (``logOffset``), not events: yet the watcher (is the input drained?),
the checker (which batch first read an event?) and the answer (which events were late?) count events. So an offset
of the query under test is translated through the table's own log to the upstream batch that wrote the last part
read in full, and that batch's ``offsets/N`` in the upstream's checkpoint counts the events. A Delta table's
streaming writes name their batch in the commit (the ``txn`` action); a file sink's ``_spark_metadata/N`` lists the
files of batch N, and the file source's ``sources/K/N`` the files it took.

The driver describes the chain beside the checkpoint (``<checkpoint>.chain.json``) before the query starts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import unquote, urlparse

SUFFIX = ".chain.json"
KINDS = ("delta", "files")
# Delta's offsets past the last file of a version (``DeltaSourceOffset.END_INDEX``, Long.MaxValue - 100).
END_INDEX = 2**63 - 1 - 100


def describe(checkpoint: str, upstream: str, table: str, kind: str) -> None:
    """Write the chain of the query on ``checkpoint``: it reads ``table`` (``kind``: delta or files), which the
    query on ``upstream`` writes."""
    from chaos.store.atomic import write_json

    write_json(Path(checkpoint + SUFFIX), {"upstream": upstream, "table": table, "kind": kind})


def chain_of(checkpoint: str) -> dict | None:
    try:
        with open(checkpoint + SUFFIX) as fh:
            found = json.load(fh)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and found.get("kind") in KINDS else None


def chained_batch(offsets_file: str, source: int, value: object) -> tuple[str, int | None] | None:
    """For the offset ``value`` of source ``source`` in ``offsets_file`` (``CHECKPOINT/offsets/N``), if the query on
    that checkpoint reads another query's table: that query's checkpoint and its newest batch the offset has read in
    full (None: none yet), whose ``offsets/B`` counts the events. None for any other query."""
    if not isinstance(value, dict) or not ("reservoirVersion" in value or "logOffset" in value):
        return None
    checkpoint = os.path.dirname(os.path.dirname(offsets_file))
    chain = chain_of(checkpoint)
    if chain is None:
        return None
    try:
        if chain["kind"] == "delta":
            return chain["upstream"], _delta_batch(chain["table"], value)
        return chain["upstream"], _files_batch(checkpoint, source, chain["table"], int(value["logOffset"]))
    except (KeyError, TypeError, ValueError):
        return None


def _delta_batch(table: str, offset: dict) -> int | None:
    """The newest upstream batch whose table version the Delta source has read in full at ``offset``: every version
    before ``reservoirVersion`` (the one it names is read up to ``index``), that one too past its last file; none of
    a starting snapshot read in part."""
    version, index = int(offset["reservoirVersion"]), int(offset.get("index", -1))
    if index >= END_INDEX:
        last = version
    elif offset.get("isStartingVersion"):
        last = -1
    else:
        last = version - 1
    batches = [b for v, b in delta_batches(table).items() if v <= last]
    return max(batches) if batches else None


def delta_batches(table: str) -> dict[int, int]:
    """``version -> batch`` of a Delta table's streaming writes: the batch id its ``txn`` action records."""
    log = Path(table) / "_delta_log"
    found: dict[int, int] = {}
    try:
        names = [p for p in log.iterdir() if p.suffix == ".json" and p.stem.isdigit()]
    except OSError:
        return found
    for path in names:
        try:
            lines = path.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                txn = json.loads(line).get("txn")
            except (ValueError, AttributeError):
                continue
            if isinstance(txn, dict) and isinstance(txn.get("version"), int):
                found[int(path.stem)] = txn["version"]
    return found


def _files_batch(checkpoint: str, source: int, table: str, log_offset: int) -> int | None:
    """The newest upstream batch whose files the file source has all taken by its log entry ``log_offset``, every
    batch before it too."""
    taken = {_plain(entry["path"]) for batch, entry in _log_entries(Path(checkpoint) / "sources" / str(source))
             if batch <= log_offset and "path" in entry}
    written = sink_files(Path(table) / "_spark_metadata")
    newest = None
    for batch in sorted(written):
        if not written[batch] <= taken:
            break
        newest = batch
    return newest


def sink_files(log: Path) -> dict[int, set[str]]:
    """``batch -> the files it added`` of a file sink's ``_spark_metadata``. A compacted file holds every batch's
    files up to its own with no batch of their own: where a batch's own file is gone, its files count as the
    compacted file's batch (read in full later than they were)."""
    found: dict[int, set[str]] = {}
    for batch, entry in _log_entries(log):
        if entry.get("action", "add") == "add" and "path" in entry:
            found.setdefault(batch, set()).add(_plain(entry["path"]))
    return found


def _log_entries(log: Path) -> list[tuple[int, dict]]:
    """The entries of a Spark metadata log (``N``, ``N.compact``: a version line, then one JSON entry a line), each
    with its batch: an entry's own ``batchId`` where it has one (a file source's), else its file's number. A batch
    with a file of its own is read from it, not from a compacted file."""
    try:
        files = {p.name: p for p in log.iterdir()}
    except OSError:
        return []
    own = {int(n) for n in files if n.isdigit()}
    out: list[tuple[int, dict]] = []
    for name, path in files.items():
        stem, _, suffix = name.partition(".")
        if not stem.isdigit() or suffix not in ("", "compact"):
            continue
        try:
            lines = path.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            batch = int(entry.get("batchId", stem))
            if suffix == "compact" and batch in own:
                continue
            out.append((batch, entry))
    return out


def _plain(path: str) -> str:
    """A file's path as the file sink and the file source write it (``file:/x``, ``file:///x``) in one form."""
    plain = os.path.normpath(unquote(urlparse(path).path or path))
    return "/" + plain.lstrip("/") if plain.startswith("/") else plain
