"""The stream a user's job reads in place of its Kafka topic, file directory or rate source.

The same replayable event log as ``chaos.source`` (batch N covers the same offsets in every replay, the
``planned`` and ``reading`` phases are reported), shaped as the job's own source: Spark's Kafka schema with
the payload as JSON in ``value``, the job's schema for a file directory, ``timestamp, value`` for rate.
Also a batch reader over the whole log: the Spark batch query the oracle runs (``chaos.asjob``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import quote

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from chaos.jobspec import KAFKA_SCHEMA, RATE_SCHEMA, kafka_row, parse_schema, record, roles, typed
from chaos.source import EventLogStreamReader, _get

JOB_SOURCE_NAME = "streamchaos-job"


class _Shaper:
    """Turns an event-log row into a row of the job's source."""

    def __init__(self, options: dict) -> None:
        self.shape = options.get("shape", "kafka")
        self.fields = parse_schema(options["payload"]) if options.get("payload") else []
        self.role = roles(self.fields)
        self.topics = [t for t in options.get("topics", "").split(",") if t] or ["events"]

    def schema(self) -> str:
        if self.shape == "kafka":
            return KAFKA_SCHEMA
        if self.shape == "rate":
            return RATE_SCHEMA
        return ", ".join(f"`{f.name}` {f.ddl_type}" for f in self.fields)

    def rows(self, raw: list[list]):
        for id_, key, value, ms, part, offset in raw:
            if self.shape == "kafka":
                yield kafka_row(self.fields, self.role, self.topics, id_, key, value, ms, part, offset)
            elif self.shape == "rate":
                yield (datetime.fromtimestamp(ms / 1000, tz=UTC), id_)
            else:
                yield typed(self.fields, record(self.fields, self.role, id_, key, value, ms))


class JobStreamReader(EventLogStreamReader):
    def __init__(self, options: dict) -> None:
        super().__init__(options)
        self.shaper = _Shaper(options)

    def read(self, partition):
        if self.controller:
            from chaos import barrier

            barrier.report(self.controller, partition.batch, "reading", partition=partition.partition,
                           start=partition.start, end=partition.end)
        rows = _get(f"{self.url}/read?p={partition.partition}&start={partition.start}&end={partition.end}")
        yield from self.shaper.rows(rows)


class WholeLog(InputPartition):
    def __init__(self, partition: int, end: int) -> None:
        super().__init__(partition)
        self.partition = partition
        self.end = end


class JobBatchReader(DataSourceReader):
    """Every event of the log, once: the input of the Spark batch query that is the oracle."""

    def __init__(self, options: dict) -> None:
        self.url = options["eventlog"]
        self.shaper = _Shaper(options)

    def partitions(self) -> list[WholeLog]:
        parts = int(_get(f"{self.url}/meta")["partitions"])
        start = {str(p): 0 for p in range(parts)}
        end = _get(f"{self.url}/advance?from={quote(json.dumps(start))}")
        return [WholeLog(int(p), int(n)) for p, n in sorted(end.items(), key=lambda kv: int(kv[0])) if int(n) > 0]

    def read(self, partition: WholeLog):
        yield from self.shaper.rows(_get(f"{self.url}/read?p={partition.partition}&start=0&end={partition.end}"))


class JobSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return JOB_SOURCE_NAME

    def schema(self) -> str:
        return _Shaper(self.options).schema()

    def streamReader(self, schema) -> JobStreamReader:
        return JobStreamReader(self.options)

    def reader(self, schema) -> JobBatchReader:
        return JobBatchReader(self.options)
