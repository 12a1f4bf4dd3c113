"""``socket-source``: Spark's socket source feeding an idempotent SQLite sink.

The socket source (``format("socket")``) keeps what it received in driver memory and cannot be
replayed; Spark's documentation lists it as not fault-tolerant, for testing only. Without faults it
delivers every line once. After a driver kill the lines the dead driver had buffered are gone, and
the restarted query either fails ("offsets committed out of order") or goes on without them: the
harness records which, as a verdict (``stalled`` with the failure, or ``at-most-once`` with the lost
ids), never as a harness crash. The feed is ``chaos/stream/socketfeed.py``, paced one chunk per batch.
"""

from __future__ import annotations

from pipelines_under_test.base import DriverContext
from pipelines_under_test.passthrough import SqlitePassthrough


class SocketSource(SqlitePassthrough):
    socket_feed = True
    own_source = True
    # One partition: the feed's line number is then each event's offset, as attribution expects.
    stream_defaults = {"partitions": 1}  # noqa: RUF012

    def __init__(self) -> None:
        super().__init__("socket-source", "idempotent", "none",
                         "Spark's socket source (not fault-tolerant) into an idempotent sink: a driver kill loses "
                         "lines or fails the restart.")

    def start(self, ctx: DriverContext):
        from pyspark.sql import functions as F

        host, port = ctx.feed.rsplit(":", 1)
        lines = ctx.spark.readStream.format("socket").option("host", host).option("port", port).load()
        parts = F.split("value", ",")
        events = lines.select(
            parts[0].cast("long").alias("id"), parts[1].alias("key"), parts[2].cast("long").alias("value"),
            F.timestamp_millis(parts[3].cast("long")).alias("event_time"),
            F.lit(0).alias("partition"), parts[0].cast("long").alias("offset"))
        ctx.source = events  # the pipeline's own source replaces the harness's replayable one
        return super().start(ctx)


SOCKET_SOURCE = SocketSource()
