"""Plain PySpark (no streamchaos): a batch replayed after its sink had committed it is skipped by the sink without
running, so the watermark its records would have advanced stays where it was; a record a run without the crash
drops as late is counted into its window.

The query: JSON files, a 10 s watermark on ``ts``, a 10 s tumbling-window count per key, append mode, Spark's own
Parquet file sink (``FileStreamSink``: it skips a batch its ``_spark_metadata`` log already holds). Batch 0 reads
``first.json`` (ten events at 0-9 s and one at 30 s): after it the watermark is 20 s and window [0 s, 10 s) is final.
Then, one file a batch (``maxFilesPerTrigger`` 1), ``second.json`` brings an event at 45 s and ``third.json`` a late
one at 5 s, for the window [0 s, 10 s) a run without the crash has already emitted.

``A`` runs batch 0 alone (``trigger(once=True)``) and stops: ``offsets/0``, the state, ``_spark_metadata/0`` and
``commits/0`` with ``nextBatchWatermarkMs`` 20000. Two copies of that checkpoint and sink:

- ``control``: as A left it (the driver lived to write ``commits/0``);
- ``crash``: ``commits/0`` deleted, which is what a driver killed after the sink committed batch 0 and before
  ``commits/0`` leaves (the sink's log entry is written before the commit log's, in the same driver; nothing else
  is written in between). streamchaos gets the same state from a real SIGKILL at that point (``kill-driver@N:
  sink-done``).

``B`` restarts each copy with ``trigger(availableNow=True)``, both files in the input. ``control``: batch 1 runs at
watermark 20 s and emits [0 s, 10 s) with 10; batch 2 drops the late event (late by batch 1's watermark). ``crash``:
batch 0 runs again, the sink skips it (it is in ``_spark_metadata``) without running its plan, so no event time is
observed and ``commits/0`` records ``nextBatchWatermarkMs`` 0; batch 1 runs at watermark 0 and emits nothing, batch 2
takes the late event into the window, which is emitted with 11.

Run: ``python docs/findings/skipped_batch_watermark_repro.py`` (PySpark 4.x, Java 17; about a minute). Exit 1 when
the crash copy's answer differs as described and the control's does not, 0 when both agree, 2 otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

SCHEMA = "id long, key string, ts timestamp"
BASE_MS = 946_684_800_000  # 2000-01-01T00:00:00 UTC: the events' time 0


def event(i: int, second: int, key: str = "a") -> str:
    return json.dumps({"id": i, "key": key, "ts": f"2000-01-01T00:00:{second:02d}"}) + "\n"


def session():
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master("local[2]").appName("skipped-batch-watermark")
            .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")  # the events' times, without an offset, are UTC
            .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
            .getOrCreate())


def run(spark, source: Path, out: Path, once: bool) -> None:
    from pyspark.sql import functions as F

    counts = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
              .withWatermark("ts", "10 seconds")
              .groupBy(F.window("ts", "10 seconds"), "key").count()
              .select(F.col("window.start").alias("start"), "key", "count"))
    writer = (counts.writeStream.format("parquet").outputMode("append").option("path", str(out / "sink"))
              .option("checkpointLocation", str(out / "checkpoint")))
    writer = writer.trigger(once=True) if once else writer.trigger(availableNow=True)
    writer.start().awaitTermination()


def watermarks(checkpoint: Path) -> dict[int, str]:
    """Each commit's ``nextBatchWatermarkMs``, in seconds of the events' time ("0" where Spark wrote 0)."""
    commits = checkpoint / "commits"

    def seconds(ms: int) -> str:
        return f"{(ms - BASE_MS) / 1000:g} s" if ms else "0"

    return {int(p.name): seconds(json.loads(p.read_text().splitlines()[-1]).get("nextBatchWatermarkMs") or 0)
            for p in sorted(commits.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
            if p.name.isdigit()}


def first_window(spark, out: Path) -> list[int]:
    rows = spark.read.parquet(str(out / "sink")).where("second(start) = 0 and minute(start) = 0").collect()
    return sorted(r["count"] for r in rows)


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="skipped-batch-"))
    source = root / "input"
    source.mkdir()
    (source / "first.json").write_text("".join(event(i, i) for i in range(10)) + event(10, 30))
    spark = session()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        base = root / "A"
        run(spark, source, base, once=True)
        print(f"A ran batch 0 and stopped: nextBatchWatermarkMs {watermarks(base / 'checkpoint')}")
        copies = {name: root / name for name in ("control", "crash")}
        for copy in copies.values():
            shutil.copytree(base, copy)
        (copies["crash"] / "checkpoint" / "commits" / "0").unlink()
        (copies["crash"] / "checkpoint" / "commits" / ".0.crc").unlink(missing_ok=True)
        for n, (name, line) in enumerate((("second.json", event(11, 45)), ("third.json", event(12, 5)))):
            (source / name).write_text(line)
            later = (source / "first.json").stat().st_mtime + 10 + n  # second before third, both after first
            os.utime(source / name, (later, later))
        found = {}
        for name, copy in copies.items():
            run(spark, source, copy, once=False)
            found[name] = (watermarks(copy / "checkpoint"), first_window(spark, copy))
            print(f"B {name}: nextBatchWatermarkMs by batch {found[name][0]}, window [0 s, 10 s) counted "
                  f"{found[name][1]}")
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    control, crash = found["control"], found["crash"]
    if control[1] == [10] and crash[1] == [11] and crash[0].get(0) == "0" and control[0].get(0) == "20 s":
        print("the replayed batch 0 was skipped by the sink: its commit kept watermark 0, and the late event at 5 s "
              "was counted (11), which the run without the crash dropped (10)")
        return 1
    if control[1] == crash[1]:
        print("both copies agree")
        return 0
    print("unexpected outcome")
    return 2


if __name__ == "__main__":
    sys.exit(main())
