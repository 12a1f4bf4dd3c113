"""Driver side of the consistent-cut check: read the state store of committed batches to parquet.

Runs in the last driver incarnation after its query stopped cleanly, reusing its SparkSession (a
separate process would pay a JVM start). One ``spark.read.format("statestore")`` per batch, with
``batchId`` = N: the state as it was when batch N committed; the reads are unioned into one job
(one job per batch cost ~0.5 s each, a third of a trial's stop).
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl

MAX_BATCHES = 40  # each read is a scan of its own in the job; long streams are sampled evenly
BATCH_COLUMN = "__streamchaos_batch"


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
    if not chosen:
        return {"batches": [], "seconds": 0.0}
    from functools import reduce

    from pyspark.sql import functions as F

    reads = []
    for batch in chosen:
        reader = spark.read.format("statestore").options(**pipeline.state_options)
        raw = reader.option("batchId", batch).load(checkpoint)
        reads.append(pipeline.state_rows(raw).withColumn(BATCH_COLUMN, F.lit(batch)))
    table = pl.from_pandas(reduce(lambda a, b: a.unionByName(b), reads).toPandas())
    for batch in chosen:
        frame = table.filter(pl.col(BATCH_COLUMN) == batch).drop(BATCH_COLUMN)
        tmp = out_dir / f"{batch}.parquet.tmp"
        frame.write_parquet(tmp)
        tmp.replace(out_dir / f"{batch}.parquet")
    return {"batches": chosen, "seconds": round(time.monotonic() - started, 2)}
