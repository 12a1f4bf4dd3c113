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

from chaos.jobs.payloads import KAFKA_SCHEMA, RATE_SCHEMA, kafka_row, leaves, parse_schema, record, roles, typed
from chaos.jobs.times import parse_time
from chaos.jobs.values import value_lists
from chaos.stream.source import EventLogStreamReader

JOB_SOURCE_NAME = "streamchaos-job"


class _Shaper:
    """Turns an event-log row into a row of the job's source."""

    def __init__(self, options: dict) -> None:
        self.shape = options.get("shape", "kafka")
        self.fields = parse_schema(options["payload"]) if options.get("payload") else []
        self.time = parse_time(options.get("time") or "")  # --time FIELD:FORM (chaos.jobs.times)
        self.encoding = options.get("encoding") or "json"  # --kafka-value
        self.role = roles(self.fields, options.get("id") or "", self.time)
        self.values = value_lists(options.get("values"), leaves(self.fields), self.role)  # --values
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
                yield kafka_row(self.fields, self.role, self.topics, id_, key, value, ms, part, offset, self.values,
                                self.time, self.encoding)
            elif self.shape == "rate":
                yield (datetime.fromtimestamp(ms / 1000, tz=UTC), id_)
            else:
                yield typed(self.fields, record(self.fields, self.role, id_, key, value, ms, self.values,
                                                self.time))


def on_time(rows: list[list], late: list | None, unit_ms: int = 1) -> list[list]:
    """``rows`` without the records a stream read at or behind the watermark Spark filters late records with:
    ``late`` lists ``[end offsets, watermark ms]`` of its batches, oldest first
    (chaos.jobs.as_written.batch_watermarks), and a record read by batch N is late against batch N-1's watermark
    (Spark's default ``WatermarkPropagator`` since 3.4: "we use watermark for previous microbatch to determine
    late events"; docs/spark-notes.md); ``unit_ms``: the precision the job reads its time at (epoch seconds:
    1000), the time truncated to it."""
    if not late:
        return rows
    kept = []
    for row in rows:
        ms, part, offset = row[3] // unit_ms * unit_ms, str(row[4]), row[5]
        reader = next((i for i, (ends, _) in enumerate(late) if int(ends.get(part, 0)) > offset), None)
        if reader is None or ms > (late[reader - 1][1] if reader else 0):
            kept.append(row)
    return kept


class JobStreamReader(EventLogStreamReader):
    """With ``late`` (the oracle's on-time answer): the records the trial's stream read late left out."""

    def __init__(self, options: dict) -> None:
        super().__init__(options)
        self.shaper = _Shaper(options)
        self.late = json.loads(options["late"]) if options.get("late") else None

    def shape(self, rows: list[list]):
        time = self.shaper.time
        yield from self.shaper.rows(on_time(rows, self.late, time.unit_ms if time else 1))


class JobSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return JOB_SOURCE_NAME

    def schema(self) -> str:
        return _Shaper(self.options).schema()

    def streamReader(self, schema) -> JobStreamReader:
        return JobStreamReader(self.options)
