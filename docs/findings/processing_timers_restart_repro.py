"""Plain PySpark (no streamchaos): a ``transformWithState`` query in processing-time mode, restarted after its
last data batch, never fires the processing-time timers that are due, as long as no new record arrives.

A: events are read in batch 0; each key registers a processing-time timer one millisecond after the batch's
timestamp and keeps its events in a ``ListState`` until the timer emits them. The trigger is one minute, so the
batch without data that would fire the timers is not due yet when A stops cleanly (what a driver that dies right
after ``commits/0`` leaves). B: the same query from the same checkpoint, trigger 500 ms, no new input, for 10 s
(twenty triggers). C: one new record in a new file, then the same query again.

Spark's guide says a processing-time timer fires in the first micro-batch after its time passes, and in
processing-time mode the operator asks for batches without data (``shouldRunAnotherBatch`` is true); but after a
restart ``MicroBatchExecution.constructNextBatch`` asks only the previous batch's plan of this run, which a
restarted query does not have, so with no new data no batch runs.

Run: ``python docs/findings/processing_timers_restart_repro.py`` (PySpark 4.3.0, Java 17; about a minute).
Exit 1 when B emits nothing in 10 s (the bug), 0 when the due timers fire.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

EVENTS = 10
WAIT_S = 10


def main() -> int:
    from pyspark.sql import Row, SparkSession
    from pyspark.sql.streaming import StatefulProcessor

    root = Path(tempfile.mkdtemp(prefix="processing-timers-"))
    source, out, checkpoint = root / "in", root / "out", root / "checkpoint"
    source.mkdir()
    spark = (SparkSession.builder.master("local[2]").appName("processing-timers-restart")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.streaming.stateStore.providerClass",
                     "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    class Flush(StatefulProcessor):
        """Keeps a key's events until a processing-time timer one millisecond after their batch emits them."""

        def init(self, handle) -> None:
            self.handle = handle
            self.pending = handle.getListState("pending", "id long")

        def handleInputRows(self, key, rows, timerValues):
            if not self.pending.exists():
                self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + 1)
            self.pending.appendList([(int(r.id),) for r in rows])
            return iter(())

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            ids = [i for (i,) in self.pending.get()]
            self.pending.clear()
            for i in ids:
                yield Row(id=i, key=key[0])

        def close(self) -> None:
            pass

    def start(trigger: str):
        return (spark.readStream.schema("id long, key string").json(str(source)).groupBy("key")
                .transformWithState(statefulProcessor=Flush(), outputStructType="id long, key string",
                                    outputMode="Append", timeMode="ProcessingTime")
                .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
                .trigger(processingTime=trigger).start())

    def emitted() -> int:
        return spark.read.parquet(str(out)).count() if (out / "_spark_metadata").is_dir() else 0

    def batches() -> list[int]:
        folder = checkpoint / "commits"
        return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else []

    try:
        (source / "a.json").write_text("".join(json.dumps({"id": i, "key": f"k{i % 3}"}) + "\n"
                                               for i in range(EVENTS)))
        query = start("1 minute")  # batch 0 now; the next trigger, a batch without data, a minute away
        while 0 not in batches():
            time.sleep(0.05)
        query.stop()
        print(f"A committed batches {batches()}, emitted {emitted()} of {EVENTS}; the timers are due from then on")
        query = start("500 milliseconds")
        time.sleep(WAIT_S)
        query.stop()
        stuck = emitted()
        print(f"B restarted, no new input, {WAIT_S} s: committed batches {batches()}, emitted {stuck} of {EVENTS}")
        (source / "b.json").write_text(json.dumps({"id": EVENTS, "key": "late"}) + "\n")
        query = start("500 milliseconds")
        deadline = time.monotonic() + 180  # a loaded machine: three batches may take a while
        while emitted() < EVENTS + 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        query.stop()
        print(f"C one new record: committed batches {batches()}, emitted {emitted()} of {EVENTS + 1}")
        return 1 if stuck == 0 and emitted() == EVENTS + 1 else 0
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
