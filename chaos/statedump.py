"""Driver side of the consistent-cut check: read the state store of committed batches to parquet.

Runs in the last driver incarnation after its query stopped cleanly, reusing its SparkSession (a
separate process would pay a JVM start). One ``spark.read.format("statestore")`` per batch, with
``batchId`` = N: the state as it was when batch N committed.
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl

MAX_BATCHES = 40  # each read is a small Spark job (~0.3 s); long streams are sampled evenly


def committed_batches(checkpoint: Path) -> list[int]:
    folder = Path(checkpoint) / "commits"
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else []


def choose(batches: list[int], limit: int = MAX_BATCHES) -> list[int]:
    """All batches, or ``limit`` of them spread evenly, always with the first and the last."""
    if len(batches) <= limit:
        return batches
    step = (len(batches) - 1) / (limit - 1)
    return sorted({batches[round(i * step)] for i in range(limit)})


def dump_state(spark, pipeline, checkpoint: str, out_dir: Path) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    chosen = choose(committed_batches(Path(checkpoint)))
    for batch in chosen:
        reader = spark.read.format("statestore").options(**pipeline.state_options)
        raw = reader.option("batchId", batch).load(checkpoint)
        frame = pl.from_pandas(pipeline.state_rows(raw).toPandas())
        tmp = out_dir / f"{batch}.parquet.tmp"
        frame.write_parquet(tmp)
        tmp.replace(out_dir / f"{batch}.parquet")
    return {"batches": chosen, "seconds": round(time.monotonic() - started, 2)}
