"""Plain PySpark (no streamchaos): a restarted continuous query commits an epoch with the end offsets a dead
incarnation wrote for it, not its own, and the next restart skips the ids between.

What a driver killed after ``offsets/K+1`` and before ``commits/K+1`` leaves is planted as a file (the
fault, made deterministic): ``offsets/K+1`` naming 500 rows past the last id the stopped query printed. Then B
restarts the query from the checkpoint until it commits epoch K+1 and stops; C restarts it again. Each
incarnation is its own driver process printing to Spark's console sink (the continuous trigger takes the
console, memory and Kafka sinks only; the memory sink cannot restart from a checkpoint, a Python foreach
writer fails with CANNOT_GET_BATCH_ID). Spark documents at-least-once for continuous processing: every id
the rate source produced should be printed at least once.

Run: ``python docs/findings/continuous_offsets_repro.py`` (PySpark 4.3.0, Java 17; about a minute).
With a Kafka source, continuous processing's real use: ``python docs/findings/continuous_offsets_repro.py --kafka
HOST:PORT`` (a broker of yours; a PySpark whose Kafka connector Maven serves, e.g. 4.2.0: Spark resolves it with
``spark.jars.packages``). A feeder process writes the rate source's ids into a new one-partition topic, 200 a
second, through Spark's Kafka sink, so a record's offset is its id; the incarnations read the topic with
``startingOffsets=earliest`` and ``offsets/K+1`` names the topic's partition 500 records ahead.
Exit 1 and the missing ids when the bug shows, 0 when every id was delivered.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

AHEAD = 500  # rows the dead incarnation had read into epoch K+1
KAFKA, TOPIC = "REPRO_KAFKA_BOOTSTRAP", "REPRO_KAFKA_TOPIC"  # the broker and topic, for the incarnations too
ROW = re.compile(r"^\|\s*(\d+)\s*\|$")


def session(name: str):
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName(name).config("spark.ui.enabled", "false")
               .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1"))
    if os.environ.get(KAFKA):
        import pyspark

        # slf4j-api is Spark's own; left out, a ~/.m2 holding its pom without its jar does not fail the resolution
        builder = (builder.config("spark.jars.packages",
                                  f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}")
                   .config("spark.jars.excludes", "org.slf4j:slf4j-api"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def source(spark):
    """The rate source's ids, or the Kafka topic's records (their values: the ids the feeder wrote)."""
    if not os.environ.get(KAFKA):
        return spark.readStream.format("rate").option("rowsPerSecond", 200).option("numPartitions", 1).load()
    return (spark.readStream.format("kafka").option("kafka.bootstrap.servers", os.environ[KAFKA])
            .option("subscribe", os.environ[TOPIC]).option("startingOffsets", "earliest").load()
            .selectExpr("CAST(CAST(value AS STRING) AS BIGINT) AS value"))


def incarnation(checkpoint: str, stop_at_commit: int) -> None:
    """One driver: the query from ``checkpoint`` until ``commits/stop_at_commit`` exists, then a clean stop."""
    spark = session("continuous-offsets")
    query = (source(spark).select("value").writeStream.format("console").option("numRows", 100_000)
             .option("truncate", False).trigger(continuous="5 seconds").option("checkpointLocation", checkpoint)
             .start())
    deadline = time.monotonic() + 120
    while not (Path(checkpoint) / "commits" / str(stop_at_commit)).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()
    spark.stop()


def feeder(checkpoint: str) -> None:
    """The topic (one partition, made here through the connector's own Kafka admin client), then the rate source's
    ids written into it, 200 a second, until stdin closes."""
    spark = session("continuous-offsets-feeder")
    jvm = spark.sparkContext._jvm
    props = jvm.java.util.Properties()
    props.put("bootstrap.servers", os.environ[KAFKA])
    admin = jvm.org.apache.kafka.clients.admin.Admin.create(props)
    topic = jvm.org.apache.kafka.clients.admin.NewTopic(os.environ[TOPIC], 1, jvm.java.lang.Short.valueOf("1"))
    admin.createTopics(jvm.java.util.List.of(topic)).all().get()
    admin.close()
    query = (spark.readStream.format("rate").option("rowsPerSecond", 200).option("numPartitions", 1).load()
             .selectExpr("CAST(value AS STRING) AS value").writeStream.format("kafka")
             .option("kafka.bootstrap.servers", os.environ[KAFKA]).option("topic", os.environ[TOPIC])
             .option("checkpointLocation", checkpoint).trigger(processingTime="200 milliseconds").start())
    print("feeding", flush=True)
    sys.stdin.read()
    query.stop()
    spark.stop()


def run(checkpoint: Path, stop_at_commit: int) -> list[int]:
    """An incarnation in its own process: the ids its console sink printed."""
    done = subprocess.run([sys.executable, __file__, "incarnation", str(checkpoint), str(stop_at_commit)],
                          capture_output=True, text=True, timeout=300)
    return sorted(int(m.group(1)) for line in done.stdout.splitlines() if (m := ROW.match(line.strip())))


def span(ids: list[int]) -> str:
    return f"ids {ids[0]}..{ids[-1]} ({len(ids)})" if ids else "no id"


def numbered(folder: Path) -> list[int]:
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else []


def cut_after(checkpoint: Path, epoch: int) -> None:
    """Removes what a checkpoint holds past ``epoch``: what a driver killed right after that epoch leaves."""
    for log in ("offsets", "commits"):
        for later in numbered(checkpoint / log):
            if later > epoch:
                (checkpoint / log / str(later)).unlink()
                (checkpoint / log / f".{later}.crc").unlink(missing_ok=True)


def main() -> int:
    checkpoint = Path(tempfile.mkdtemp(prefix="continuous-offsets-")) / "checkpoint"
    feed = None
    if "--kafka" in sys.argv:
        os.environ[KAFKA] = sys.argv[sys.argv.index("--kafka") + 1]
        os.environ[TOPIC] = f"continuous-offsets-{uuid.uuid4().hex[:8]}"
        feed = subprocess.Popen([sys.executable, __file__, "feeder", str(checkpoint.parent / "feeder")],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if feed.stdout.readline().strip() != "feeding":
            print("the feeder did not start: see its error above")
            return 2
        time.sleep(3)  # records ahead of A's first epoch
    try:
        a = run(checkpoint, 2)
        k = numbered(checkpoint / "commits")[-1]
        cut_after(checkpoint, k)  # A's stop may have written offsets past its last commit
        version, meta, offset = (checkpoint / "offsets" / str(k)).read_text().splitlines()
        ahead = json.loads(offset)
        for partition in ahead.values():  # past every id A printed: on a slow machine A prints into epoch K+1
            if "value" in partition:  # the rate source's position
                partition["value"] = max(partition["value"], max(a, default=-1)) + AHEAD
            else:  # Kafka's: {"0": next offset}, the offset of a record being its id
                partition["0"] = max(partition["0"], max(a, default=-1) + 1) + AHEAD
        planted = f"{version}\n{meta}\n{json.dumps(ahead)}"
        (checkpoint / "offsets" / str(k + 1)).write_text(planted)  # the dead incarnation's offsets/K+1
        b = run(checkpoint, k + 1)
        kept = (checkpoint / "offsets" / str(k + 1)).read_text() == planted
        # On a loaded machine B's stop can take long enough to commit one more epoch with its own offsets; a driver
        # killed right after committing epoch K+1 (the case this reproduces) leaves none: what B left past it goes.
        b_past = [n for n in numbered(checkpoint / "commits") if n > k + 1]
        cut_after(checkpoint, k + 1)
        c = run(checkpoint, k + 5)
    finally:
        if feed is not None:
            feed.stdin.close()
            feed.wait(timeout=120)
        shutil.rmtree(checkpoint.parent, ignore_errors=True)
    produced = set(a) | set(b) | set(c)
    missing = sorted(set(range(max(produced, default=-1) + 1)) - produced)
    print(f"A printed {span(a)}, committed epochs 0..{k}; offsets/{k + 1} planted {AHEAD} "
          f"{'records' if feed else 'rows'} ahead")
    print(f"B printed {span(b)}, committed epoch {k + 1} with {'the planted' if kept else 'its own'} offsets"
          + (f"; its stop went on to epochs {b_past[0]}..{b_past[-1]}, removed" if b_past else ""))
    print(f"C printed {span(c)}")
    print(f"missing: {len(missing)} ids" + (f", {missing[0]}..{missing[-1]}" if missing else ""))
    return 1 if missing else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["incarnation"]:
        incarnation(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1:2] == ["feeder"]:
        feeder(sys.argv[2])
    else:
        sys.exit(main())
