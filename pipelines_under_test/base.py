"""What a pipeline under test is: how to start it on the harness's source, and how to read its sink.

Users implement this for their own pipelines and run them as ``streamchaos trial module:attr``.
The driver side (``start``) runs in the driver process, inside Spark; the harness side
(``prepare_sink``, ``read_output``) runs in the harness and never needs Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

GUARANTEES = ("exactly-once", "at-least-once", "at-most-once", "none")


@dataclass
class DriverContext:
    """What the driver hands a pipeline: Spark, the source stream, where to checkpoint and write."""

    spark: Any  # pyspark.sql.SparkSession
    source: Any  # the streaming DataFrame of events (EVENT_SCHEMA)
    checkpoint: str
    sink_dir: Path
    incarnation: int
    phase: Callable[..., None]  # phase(batch, name, **detail): report and wait at a barrier


class Pipeline:
    """Base class. Subclasses set the three attributes and implement the three methods."""

    name: str = ""
    description: str = ""
    guarantee: str = "exactly-once"

    def prepare_sink(self, sink_dir: Path) -> None:
        """Create the sink's tables/directories before the first driver incarnation."""

    def start(self, ctx: DriverContext):
        """Start the streaming query (with ``checkpointLocation=ctx.checkpoint``) and return it."""
        raise NotImplementedError

    def read_output(self, sink_dir: Path) -> pl.DataFrame:
        """The sink's final contents; must have an ``id`` column (event provenance)."""
        raise NotImplementedError

    def oracle(self, events: pl.DataFrame) -> pl.DataFrame:
        """Expected provenance: one row per input id with ``required`` and ``multiplicity``."""
        raise NotImplementedError

    def unexplained(self, output: pl.DataFrame, events: pl.DataFrame) -> list[dict]:
        """Output rows that no loss or duplication of inputs explains (wrong values)."""
        return []

    def read_deliveries(self, sink_dir: Path) -> pl.DataFrame | None:
        """The sink's write history (batch_id, incarnation, rows), if it keeps one."""
        return None
