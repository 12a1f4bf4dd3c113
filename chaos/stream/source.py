"""The replayable streaming source: a PySpark Python data source over the event-log server.

``spark.readStream.format("streamchaos")`` with options ``eventlog`` (server URL), ``controller``
(barrier address), ``checkpoint`` (the query's checkpoint dir) and ``maxRowsPerBatch``.

Batch N always covers the same offsets: ``latestOffset`` cuts the log at start + maxRowsPerBatch
in the log's append order. The source reports two phases to the controller and waits at each:
``planned`` when the driver plans batch N's partitions (offsets/N is already written), and
``reading`` at the start of every executor task. The batch id is not part of the reader API, so
``partitions`` finds it in the write-ahead log: the offsets/N whose end offset equals ``end``.
"""

from __future__ import annotations

import json
import os
import urllib.request
from datetime import UTC, datetime
from urllib.parse import quote

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

try:  # Spark 4.2+: latestOffset(start, limit), with admission control and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # 4.0 and 4.1: latestOffset() (``EventLogStreamReader.latestOffset``)
    ReadMaxRows = None
    SupportsTriggerAvailableNow = object

from chaos.nemesis import barrier
from chaos.scenario.schema import EVENT_SCHEMA
from chaos.store.checkpoint import read_offsets_file

SOURCE_NAME = "streamchaos"
WARM_SOURCE_NAME = "streamchaos-warm"


def _get(url: str):
    with urllib.request.urlopen(url, timeout=60) as resp:
        return json.loads(resp.read())


def logged_offsets(checkpoint: str):
    """``(N, offsets/N's source offsets)`` for every write-ahead entry, newest first."""
    offsets_dir = os.path.join(checkpoint, "offsets")
    try:
        names = sorted((int(n) for n in os.listdir(offsets_dir) if n.isdigit()), reverse=True)
    except FileNotFoundError:
        return
    for n in names:
        yield n, read_offsets_file(os.path.join(offsets_dir, str(n)))


def batch_of(checkpoint: str, end: dict) -> int:
    """The id of the batch whose write-ahead entry (offsets/N) ends at ``end``; -1 if none."""
    return next((n for n, ends in logged_offsets(checkpoint) if end in ends), -1)


class BatchPartition(InputPartition):
    def __init__(self, batch: int, partition: int, start: int, end: int) -> None:
        super().__init__(partition)
        self.batch = batch
        self.partition = partition
        self.start = start
        self.end = end


class EventLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Reads the log in batches of maxRowsPerBatch, under Trigger.AvailableNow too (Spark 4.2+): a source
    without ``prepareForTriggerAvailableNow`` is wrapped by Spark and read whole in batch 0, which leaves a
    fault planned at a later batch nothing to fire at. The log holds the whole stream from the start, so
    the target of an AvailableNow run is its end, and a run restarted into the checkpoint reads on from
    the last logged batch up to it."""

    def __init__(self, options: dict) -> None:
        self.url = options["eventlog"]
        self.controller = options.get("controller")
        self.checkpoint = options.get("checkpoint", "")
        self.max_rows = int(options.get("maxRowsPerBatch", "0")) or None
        self.partition_count = int(_get(f"{self.url}/meta")["partitions"])

    def initialOffset(self) -> dict:
        return {str(p): 0 for p in range(self.partition_count)}

    def prepareForTriggerAvailableNow(self) -> None:  # Spark 4.2+
        """Nothing to pin: the log never grows during a trial, so ``latestOffset`` never passes its end."""

    def getDefaultReadLimit(self):  # called by Spark 4.2+ only
        return ReadMaxRows(self.max_rows) if self.max_rows else super().getDefaultReadLimit()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        if start is None:
            # Spark 4.0/4.1 passes neither: the next batch starts where the newest one in the write-ahead
            # log ends (offsets/N is written before batch N runs, and a restart reruns a logged batch before
            # it asks), and reads at most maxRowsPerBatch. One source per query.
            start, most = self._logged_end(), self.max_rows
        else:
            most = limit.max_rows if ReadMaxRows is not None and isinstance(limit, ReadMaxRows) else None
        query = f"from={quote(json.dumps(start))}"
        if most:
            query += f"&max={most}"
        return _get(f"{self.url}/advance?{query}")

    def _logged_end(self) -> dict:
        ends = next((ends[0] for _, ends in logged_offsets(self.checkpoint) if ends), None)
        return {str(k): int(v) for k, v in ends.items()} if ends else self.initialOffset()

    def partitions(self, start: dict, end: dict) -> list[BatchPartition]:
        batch = batch_of(self.checkpoint, end)
        if self.controller:
            barrier.report(self.controller, batch, "planned", start=start, end=end)
        return [
            BatchPartition(batch, int(p), int(start.get(p, 0)), int(end[p]))
            for p in sorted(end, key=int)
            if int(end[p]) > int(start.get(p, 0))
        ]

    def read(self, partition: BatchPartition):
        if self.controller:
            barrier.report(self.controller, partition.batch, "reading", partition=partition.partition,
                           start=partition.start, end=partition.end)
        rows = _get(f"{self.url}/read?p={partition.partition}&start={partition.start}&end={partition.end}")
        yield from self.shape(rows)

    def shape(self, rows: list[list]):
        """The log's rows (``id, key, value, ms, partition, offset``) as this source's rows (EVENT_SCHEMA)."""
        for id_, key, value, ms, part, offset in rows:
            yield (id_, key, value, datetime.fromtimestamp(ms / 1000, tz=UTC), part, offset)

    def commit(self, end: dict) -> None:
        """Nothing to release: the log keeps every event (it must, for replay)."""


class WarmPartition(InputPartition):
    pass


class WarmReader(DataSourceReader):
    def __init__(self, partitions: int) -> None:
        self.count = partitions

    def partitions(self) -> list[WarmPartition]:
        return [WarmPartition(k) for k in range(self.count)]

    def read(self, partition: WarmPartition):
        yield (0, "", 0, datetime.fromtimestamp(0, tz=UTC), partition.value, 0)


class WarmSource(DataSource):
    """A batch source of one row per partition, read to start the executors' Python daemon and workers
    ahead of a query (``chaos.driver.process.warm_up``). Spark keeps one daemon per set of worker environment
    variables: a ``mapPartitions`` job starts another daemon than a Python data source read does, so a
    warm-up must read through a data source to warm the workers the event log's reader tasks get."""

    @classmethod
    def name(cls) -> str:
        return WARM_SOURCE_NAME

    def schema(self) -> str:
        return EVENT_SCHEMA

    def reader(self, schema) -> WarmReader:
        return WarmReader(int(self.options.get("partitions", "2")))


class EventLogSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return EVENT_SCHEMA

    def streamReader(self, schema) -> EventLogStreamReader:
        return EventLogStreamReader(self.options)
