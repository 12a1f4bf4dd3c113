"""Plain PySpark (no streamchaos): a micro-batch query whose driver died while it wrote its first offset log entry
can never be restarted from its checkpoint (Spark 4.1 and later).

``HDFSMetadataLog`` writes ``offsets/0`` as a temporary file, ``offsets/.0.<uuid>.tmp`` (and, on a local or Hadoop
checksummed file system, ``offsets/..0.<uuid>.tmp.crc``), renamed to ``offsets/0`` once written. A driver killed
between the two leaves the temporary file. The restart finds no batch in the offset log (the log lists only files
named by a number), so it starts "for the first time" and runs ``verifyNewCheckpointDirectory``, which lists
``offsets/`` without that filter, finds the temporary file and throws ``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``,
at every restart.

Cases, each on a fresh checkpoint, the same stateless query (a JSON file source, a projection, a Parquet sink;
``processAllAvailable`` then ``stop``):

- ``control``: no leftover: the query runs.
- ``A``: the two files a driver killed between the create and the rename leaves (``--crashes`` shows a real kill
  leaving them) are in ``offsets/``: the start fails with STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY, and again.
- ``B``: the same checkpoint with ``spark.sql.streaming.verifyCheckpointDirectoryEmptyOnStart=false`` (internal,
  default true): the query runs, reads the input whole, and writes ``offsets/0``; the temporary file was harmless.

``--crashes N``: N real crashes besides: each starts the query in a child process on a fresh checkpoint and kills
it (SIGKILL) the moment a temporary file shows in ``offsets/``, then restarts from that checkpoint here and says
whether it was refused. The window between create and rename is short: a kill that lands after the rename leaves
no temporary file, and such a crash restarts fine; the count says how many landed.

Run: ``python docs/findings/first_offsets_temp_repro.py [--crashes N]`` (PySpark 4.1 or later, Java 17; about a
minute). Exit 1 when A is refused twice and control and B run (the bug), 0 when A runs, 2 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROWS = 100
VERIFY = "spark.sql.streaming.verifyCheckpointDirectoryEmptyOnStart"
REFUSAL = "STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY"
CHILD = """
import sys, time
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
src, chk, out = sys.argv[1:4]
q = (spark.readStream.schema("id LONG, name STRING").json(src).selectExpr("id", "upper(name) AS name")
     .writeStream.format("parquet").option("checkpointLocation", chk).start(out))
q.processAllAvailable()
time.sleep(600)
"""


def session():
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master("local[2]").appName("first-offsets-temp")
            .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())


def write_input(src: Path) -> None:
    src.mkdir(parents=True)
    (src / "part-0.json").write_text("".join(json.dumps({"id": i, "name": f"n{i}"}) + "\n" for i in range(ROWS)))


def plant_leftover(chk: Path) -> list[str]:
    """The two files a driver killed between HDFSMetadataLog's create and rename of ``offsets/0`` leaves (the
    contents are never read: a restart sees the names only)."""
    offsets = chk / "offsets"
    offsets.mkdir(parents=True)
    tmp = offsets / f".0.{uuid.uuid4()}.tmp"
    tmp.write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}\n{"logOffset":0}\n')
    crc = offsets / f".{tmp.name}.crc"
    crc.write_bytes(b"crc\x00\x00\x02\x00\x00\x00\x00")
    return sorted(p.name for p in offsets.iterdir())


def run_query(spark, src: Path, chk: Path, out: Path) -> tuple[bool, str, int]:
    """(ran, the error's first line if it did not, rows in the sink)."""
    try:
        q = (spark.readStream.schema("id LONG, name STRING").json(str(src)).selectExpr("id", "upper(name) AS name")
             .writeStream.format("parquet").option("checkpointLocation", str(chk)).start(str(out)))
        q.processAllAvailable()
        q.stop()
    except Exception as exc:  # the refusal comes as a StreamingQueryException, its condition inside
        first = str(exc).strip().splitlines()[0]
        return False, first[first.find(f"[{REFUSAL}]"):] if REFUSAL in first else first[:300], 0
    return True, "", spark.read.parquet(str(out)).count()


def crash_once(work: Path, src: Path, k: int) -> tuple[list[str], bool | None, str]:
    """A child runs the query; SIGKILLed when a temporary file shows in offsets/. (what it left, refused?, why)."""
    chk, out = work / f"crash-{k}" / "chk", work / f"crash-{k}" / "out"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(src), str(chk), str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    offsets = chk / "offsets"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        if offsets.is_dir() and any(p.name.endswith(".tmp") or p.name.isdigit() for p in offsets.iterdir()):
            break
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    left = sorted(p.name for p in offsets.iterdir()) if offsets.is_dir() else []
    if not left:
        return left, None, "the kill landed before offsets/ was written"
    spark = session()
    ran, error, _ = run_query(spark, src, chk, out)
    return left, not ran, error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crashes", type=int, default=0, help="real crashes to try besides the planted leftover")
    args = parser.parse_args()
    import pyspark

    work = Path(tempfile.mkdtemp(prefix="first-offsets-temp-"))
    src = work / "in"
    write_input(src)
    spark = session()
    print(f"PySpark {pyspark.__version__}")
    try:
        ran, error, rows = run_query(spark, src, work / "control" / "chk", work / "control" / "out")
        print(f"control (fresh checkpoint): {'ran' if ran else 'failed: ' + error}, {rows} of {ROWS} rows")
        control_ok = ran and rows == ROWS
        left = plant_leftover(work / "a" / "chk")
        print(f"A offsets/ holds {left}")
        refusals = []
        for attempt in (1, 2):
            ran_a, error, _ = run_query(spark, src, work / "a" / "chk", work / "a" / "out")
            refusals.append(not ran_a and REFUSAL in error)
            print(f"A start {attempt}: {'ran' if ran_a else 'refused: ' + error}")
        spark.conf.set(VERIFY, "false")
        ran_b, error, rows_b = run_query(spark, src, work / "a" / "chk", work / "a" / "out")
        offsets_b = sorted(p.name for p in (work / "a" / "chk" / "offsets").iterdir() if not p.name.startswith("."))
        print(f"B the same checkpoint, {VERIFY}=false: {'ran' if ran_b else 'failed: ' + error}, "
              f"{rows_b} of {ROWS} rows, offsets/ entries {offsets_b}")
        spark.conf.unset(VERIFY)
        spark.stop()
        for k in range(args.crashes):
            left, refused, why = crash_once(work, src, k)
            verdict = "restart refused" if refused else ("restart ran" if refused is False else "no restart")
            print(f"crash {k}: offsets/ left {left}: {verdict}{': ' + why if why else ''}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if all(refusals) and control_ok and ran_b and rows_b == ROWS:
        print("the bug: a temporary file the killed driver left in offsets/ refuses every restart")
        sys.exit(1)
    sys.exit(0 if not any(refusals) else 2)


if __name__ == "__main__":
    main()
