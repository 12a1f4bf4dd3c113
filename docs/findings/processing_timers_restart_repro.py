"""Plain PySpark (no streamchaos): a stateful query restarted after its last batch committed runs no batch without
data, so output that only such a batch produces waits for the next input record.

Three operators, each asking ``MicroBatchExecution`` for batches without data after a batch with data:

- ``tws``: ``transformWithState`` (Row API) in ``ProcessingTime`` mode; each key keeps its events in a
  ``ListState`` and registers a processing-time timer 1 ms after the batch timestamp; the timer emits them.
- ``fmgws``: ``applyInPandasWithState`` (PySpark's ``flatMapGroupsWithState``) with
  ``GroupStateTimeout.ProcessingTimeTimeout``; each key keeps its ids in the state, timeout duration 1 ms; the
  timeout emits them.
- ``window``: a 10 s tumbling-window count, watermark 10 s, append mode; batch 0 holds ten events in window
  [0 s, 10 s) and one at 30 s, so the watermark after batch 0 is 20 s and window [0 s, 10 s) is final: the next
  batch emits it.

For each: ``control`` runs the query without a restart (trigger 500 ms): the batch without data follows batch 0
and emits. ``A`` runs batch 0 with a 10-minute trigger and stops cleanly (the checkpoint a driver killed right after
``commits/0`` leaves). ``B`` restarts from that checkpoint, trigger 500 ms, no new input, for 10 s. ``C`` adds one
record in a new file and restarts again.

Run: ``python docs/findings/processing_timers_restart_repro.py [--case tws|fmgws|window|all]`` (PySpark 4.3.0 with
pandas, pyarrow and protobuf, Java 17; under a minute a case). Exit 1 when every case run shows the stall (B emits
nothing, control and C emit everything), 0 when none does, 2 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

EVENTS = 10
WAIT_S = 10
SCHEMA = "id long, key string, ts timestamp"


@dataclass
class Case:
    name: str
    build: Callable  # (spark, source dir) -> streaming DataFrame
    out_schema: str
    emitted: Callable  # (static DataFrame of the sink's output) -> int
    after_new_record: int  # what C must have emitted: the held rows, plus the new record's where it is due


def event(i: int, key: str, second: int) -> str:
    return json.dumps({"id": i, "key": key, "ts": f"2000-01-01T00:00:{second:02d}"}) + "\n"


def tws_case() -> Case:
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor

    class Flush(StatefulProcessor):
        """Keeps a key's ids until a processing-time timer 1 ms after their batch emits them."""

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

    def build(spark, source):
        return (spark.readStream.schema(SCHEMA).json(str(source)).groupBy("key")
                .transformWithState(statefulProcessor=Flush(), outputStructType="id long, key string",
                                    outputMode="Append", timeMode="ProcessingTime"))

    return Case("tws", build, "id long, key string", lambda df: df.count(), EVENTS + 1)


def fmgws_case() -> Case:
    import pandas as pd

    def flush_on_timeout(key, pdfs, state):
        ids = [int(i) for i in state.get[0].split(",")] if state.exists else []  # the state: ids, comma-joined
        if state.hasTimedOut:
            state.remove()
            yield pd.DataFrame({"id": ids, "key": [key[0]] * len(ids)})
            return
        for pdf in pdfs:
            ids.extend(int(i) for i in pdf["id"])
        state.update((",".join(map(str, ids)),))
        state.setTimeoutDuration(1)

    def build(spark, source):
        return (spark.readStream.schema(SCHEMA).json(str(source)).groupBy("key")
                .applyInPandasWithState(flush_on_timeout, outputStructType="id long, key string",
                                        stateStructType="ids string", outputMode="append",
                                        timeoutConf="ProcessingTimeTimeout"))

    return Case("fmgws", build, "id long, key string", lambda df: df.count(), EVENTS + 1)


def window_case() -> Case:
    from pyspark.sql import functions as F

    def build(spark, source):
        return (spark.readStream.schema(SCHEMA).json(str(source)).withWatermark("ts", "10 seconds")
                .groupBy(F.window("ts", "10 seconds")).agg(F.count("*").alias("n"))
                .select(F.col("window.start").alias("start"), "n"))

    # Counted in events: the one row of window [0 s, 10 s) holds ten. The new record (31 s) falls in [30 s, 40 s),
    # which stays open, so C owes the ten events only.
    return Case("window", build, "start timestamp, n long",
                lambda df: df.agg({"n": "sum"}).first()[0] or 0, EVENTS)


def run_case(spark, case: Case) -> bool | None:
    """True when the stall reproduces, False when B emits, None when control or C does not behave as expected."""
    root = Path(tempfile.mkdtemp(prefix=f"restart-{case.name}-"))
    tag = f"[{case.name}]"

    def start(name: str, trigger: str):
        source, out, checkpoint = root / name / "in", root / name / "out", root / name / "checkpoint"
        return (case.build(spark, source).writeStream.format("parquet").option("path", str(out))
                .option("checkpointLocation", str(checkpoint)).trigger(processingTime=trigger).start())

    def emitted(name: str) -> int:
        out = root / name / "out"
        if not (out / "_spark_metadata").is_dir():
            return 0
        return int(case.emitted(spark.read.schema(case.out_schema).parquet(str(out))))

    def logged(name: str, log: str) -> list[int]:
        folder = root / name / "checkpoint" / log
        return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else []

    def wait_until(query, done: Callable[[], bool], limit_s: float) -> float:
        began = time.monotonic()
        while not done() and time.monotonic() - began < limit_s:
            if not query.isActive:
                raise RuntimeError(f"{tag} the query failed: {query.exception()}")
            time.sleep(0.25)
        return time.monotonic() - began

    def write_first_input(name: str) -> None:
        source = root / name / "in"
        source.mkdir(parents=True)
        # Ten events in window [0 s, 10 s), keys k0..k2; for the window count, one more at 30 s, which moves the
        # watermark to 20 s and is not counted (its window stays open).
        rows = [event(i, f"k{i % 3}", i) for i in range(EVENTS)]
        if case.name == "window":
            rows.append(event(EVENTS, "w", 30))
        (source / "a.json").write_text("".join(rows))

    try:
        write_first_input("control")
        query = start("control", "500 milliseconds")
        wait_until(query, lambda: 0 in logged("control", "commits"), 300)
        planned = wait_until(query, lambda: 1 in logged("control", "offsets"), 60)
        wait_until(query, lambda: emitted("control") >= EVENTS, 120)
        query.stop()
        control = emitted("control")
        print(f"{tag} control, no restart: offsets/1 logged {planned:.1f} s after commits/0; committed batches "
              f"{logged('control', 'commits')}, emitted {control} of {EVENTS}")

        write_first_input("run")
        query = start("run", "10 minutes")  # batch 0 now; the next trigger, a batch without data, 10 min away
        wait_until(query, lambda: 0 in logged("run", "commits"), 300)
        query.stop()
        print(f"{tag} A committed batches {logged('run', 'commits')}, emitted {emitted('run')} of {EVENTS}; "
              f"due from then on")

        query = start("run", "500 milliseconds")
        time.sleep(WAIT_S)
        query.stop()
        held = emitted("run")
        print(f"{tag} B restarted, no new input, {WAIT_S} s: committed batches {logged('run', 'commits')}, "
              f"emitted {held} of {EVENTS} (offsets logged: {logged('run', 'offsets')})")

        (root / "run" / "in" / "b.json").write_text(event(EVENTS + 1, "late", 31))
        query = start("run", "500 milliseconds")
        # A loaded machine: three batches may take a while.
        wait_until(query, lambda: emitted("run") >= case.after_new_record, 180)
        query.stop()
        after = emitted("run")
        print(f"{tag} C one new record: committed batches {logged('run', 'commits')}, "
              f"emitted {after} of {case.after_new_record}")
        if control != EVENTS or after != case.after_new_record:
            return None
        return held == 0 if held in (0, EVENTS) else None
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=["tws", "fmgws", "window", "all"], default="all")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python workers with this interpreter's packages
    spark = (SparkSession.builder.master("local[2]").appName("stateful-restart-no-data-batch")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.streaming.stateStore.providerClass",
                     "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    builders = {"tws": tws_case, "fmgws": fmgws_case, "window": window_case}
    names = list(builders) if args.case == "all" else [args.case]
    try:
        results = []
        for name in names:
            try:
                results.append(run_case(spark, builders[name]()))
            except Exception as e:  # one case's failure should not hide the others
                print(f"[{name}] failed: {str(e)[:2000]}")
                for query in spark.streams.active:
                    query.stop()
                results.append(None)
    finally:
        spark.stop()
    if all(r is True for r in results):
        return 1
    return 0 if all(r is False for r in results) else 2


if __name__ == "__main__":
    sys.exit(main())
