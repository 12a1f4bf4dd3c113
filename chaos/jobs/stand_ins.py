"""The stream a user's job reads in place of its Kafka topic, file directory or rate source.

The same replayable event log as ``chaos.stream.source`` (batch N covers the same offsets in every replay, the
``planned`` and ``reading`` phases are reported), shaped as the job's own source: Spark's Kafka schema with
the payload as JSON in ``value``, the job's schema for a file directory, ``timestamp, value`` for rate.
The oracle's run reads it too, in one micro-batch (``chaos.jobs.as_written.run_answer``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pyspark.sql.datasource import DataSource

from chaos.jobs.reference import KAFKA_SCHEMA, RATE_SCHEMA, kafka_row, parse_schema, record, roles, typed
from chaos.jobs.values import value_lists
from chaos.stream.source import EventLogStreamReader

JOB_SOURCE_NAME = "streamchaos-job"


class _Shaper:
    """Turns an event-log row into a row of the job's source."""

    def __init__(self, options: dict) -> None:
        self.shape = options.get("shape", "kafka")
        self.fields = parse_schema(options["payload"]) if options.get("payload") else []
        self.role = roles(self.fields, options.get("id") or "")
        self.values = value_lists(options.get("values"), self.fields, self.role)  # --values (chaos.jobs.values)
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
                yield kafka_row(self.fields, self.role, self.topics, id_, key, value, ms, part, offset, self.values)
            elif self.shape == "rate":
                yield (datetime.fromtimestamp(ms / 1000, tz=UTC), id_)
            else:
                yield typed(self.fields, record(self.fields, self.role, id_, key, value, ms, self.values))


def on_time(rows: list[list], late: list | None) -> list[list]:
    """``rows`` without the records a stream read at or behind its batch's watermark: ``late`` lists
    ``[end offsets, watermark ms]`` of its batches, oldest first (chaos.jobs.as_written.batch_watermarks)."""
    if not late:
        return rows
    kept = []
    for row in rows:
        ms, part, offset = row[3], str(row[4]), row[5]
        mark = next((wm for ends, wm in late if int(ends.get(part, 0)) > offset), None)
        if mark is None or ms > mark:
            kept.append(row)
    return kept


class JobStreamReader(EventLogStreamReader):
    """With ``late`` (the oracle's on-time answer): the records the trial's stream read late left out."""

    def __init__(self, options: dict) -> None:
        super().__init__(options)
        self.shaper = _Shaper(options)
        self.late = json.loads(options["late"]) if options.get("late") else None

    def shape(self, rows: list[list]):
        yield from self.shaper.rows(on_time(rows, self.late))


class JobSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return JOB_SOURCE_NAME

    def schema(self) -> str:
        return _Shaper(self.options).schema()

    def streamReader(self, schema) -> JobStreamReader:
        return JobStreamReader(self.options)
