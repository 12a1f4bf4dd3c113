"""``continuous-map``: a stateless map under the continuous trigger, into Spark's console sink.

Continuous processing runs long-lived tasks and commits epochs (offsets/N, commits/N) instead of
micro-batches; Spark's documentation promises at-least-once for it. Only JVM sources can feed a
continuous query (a Python data source cannot), and of those only the rate source replays from its
checkpointed offsets here, so this pipeline reads ``format("rate")``: its ``value`` is the event id
(partition p of P emits p, p+P, ...; ``place_events`` lays the trial's events out the same way) and
the query stops emitting at the trial's event count. The map is ``mapped = 3 * id + 1``.

The console sink prints an epoch on the driver when the epoch commits, right before Spark writes
commits/N. ``chaos/machine/jvm/ConsoleBarrier.java`` becomes the driver JVM's stdout: it copies every line
into ``sink/console-<incarnation>.txt`` (what ``read_output`` parses: the output of every driver
incarnation) and holds the driver at ``sink-write`` (header printed, rows not yet) and ``sink-done``
(rows printed, commits/N not yet). A driver killed at ``sink-done`` has printed an epoch that the
restarted query, resuming from the last committed epoch's offsets, prints again: at-least-once.

What the harness found (Spark 4.3): a driver killed after offsets/N and before commits/N (either
barrier) leaves offsets/N behind; the restarted query resumes from commits/N-1, but
``offsetLog.add(N, ...)`` does not overwrite the dead incarnation's offsets/N, and its commit of
epoch N records them. If those offsets are ahead of what the new incarnation printed, a stop (or a
second crash) before epoch N+1 commits loses the gap for good: a restart from that checkpoint
starts after it. The docs' at-least-once does not hold then.

Epochs are cut by time (every ``EPOCH_SECONDS``, about one batch of events each), not by offsets:
which ids an epoch holds differs between runs, and epoch 0 may be empty while the tasks start;
faults still land at the same point of the epoch they name. Every partition is a task running all
the time: the cluster needs as many executor cores as the stream has partitions (two by default,
which the default trial has).
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from pipelines_under_test.base import DriverContext, Pipeline

HEADER = re.compile(r"^Batch: (\d+)$")
ROW = re.compile(r"^\|\s*(-?\d+)\s*\|\s*(-?\d+)\s*\|$")
# Long enough that the tasks (4-7 s to start on the standalone cluster) run before epoch 1 ends: epoch 0
# may be empty, later ones carry rows until the input ends.
EPOCH_SECONDS = 6
SCHEMA = {"id": pl.Int64, "mapped": pl.Int64, "batch": pl.Int64, "incarnation": pl.Int64}


def parse_console(text: str, incarnation: int) -> tuple[list[tuple[int, int, int, int]], list[tuple[int, int, int]]]:
    """Rows (id, mapped, epoch, incarnation) and deliveries (epoch, incarnation, rows) of one capture file.

    A table cut short by the kill (its closing border missing) still counts the rows it printed.
    """
    rows: list[tuple[int, int, int, int]] = []
    deliveries: dict[int, int] = {}
    epoch = None
    for line in text.splitlines():
        header = HEADER.match(line.strip())
        if header:
            epoch = int(header.group(1))
            deliveries.setdefault(epoch, 0)
            continue
        row = ROW.match(line.strip())
        if row and epoch is not None:
            rows.append((int(row.group(1)), int(row.group(2)), epoch, incarnation))
            deliveries[epoch] += 1
    return rows, [(e, incarnation, n) for e, n in deliveries.items()]


class ContinuousMap(Pipeline):
    name = "continuous-map"
    guarantee = "at-least-once"
    description = ("continuous trigger (rate source, 6 s epochs) mapping each id into the console sink, read from "
                   "every driver incarnation's output: at-least-once.")
    own_source = True
    phases = ("sink-write", "sink-done", "committed")
    # A restarted continuous query can commit epoch N with the offsets a dead incarnation wrote for it
    # (offsetLog.add keeps the file) and a later epoch can go back to older ones: "drained" may be a
    # stale claim. A restart after the drain shows whether the missing rows still come (at-least-once)
    # or never do (lost).
    settle_commits = 2
    # The standard mix without the phases a continuous query has not (planned, reading).
    conformance_mix = (
        "kill-driver@1:sink-done kill-driver@3:sink-write",
        "kill-driver@1:sink-write kill-executor@2:sink-done kill-driver@3:committed",
        "kill-driver@1:committed kill-driver@2:sink-done",
    )

    def place_events(self, events: pl.DataFrame, partitions: int) -> pl.DataFrame:
        return events.with_columns(partition=(pl.col("id") % partitions).cast(pl.Int32),
                                   offset=pl.col("id") // partitions)

    def transform(self, source):
        from pyspark.sql import functions as F

        return source.select("id", (F.col("id") * 3 + 1).alias("mapped"))

    def unavailable(self) -> str | None:
        from chaos.machine.jvm import hooks_unavailable

        return hooks_unavailable()

    def boot_conf(self) -> dict[str, str]:
        from chaos.machine.jvm import hooks_jar

        return {"spark.driver.extraClassPath": str(hooks_jar())}

    def prepare_sink(self, sink_dir: Path) -> None:
        from chaos.machine.jvm import hooks_jar

        hooks_jar()  # built in the harness: a missing javac is one clear line before any JVM starts

    def start(self, ctx: DriverContext):
        from pyspark.sql import functions as F

        capture = Path(ctx.sink_dir) / f"console-{ctx.incarnation}.txt"
        ctx.spark._jvm.streamchaos.ConsoleBarrier.install(str(capture), ctx.controller or "", str(ctx.incarnation))
        per_second = max(1, round(ctx.events_per_batch / EPOCH_SECONDS))  # one batch of events an epoch
        rate = (ctx.spark.readStream.format("rate").option("rowsPerSecond", str(per_second))
                .option("numPartitions", str(ctx.partitions)).load())
        ids = rate.where(F.col("value") < ctx.events).select(F.col("value").alias("id"))
        return (
            self.transform(ids).writeStream.format("console")
            .option("numRows", str(max(ctx.events, 20))).option("truncate", "false")
            .option("checkpointLocation", ctx.checkpoint)
            .queryName(self.query_name)
            .trigger(continuous=f"{EPOCH_SECONDS} seconds")
            .start()
        )

    def _parse(self, sink_dir: Path):
        rows, deliveries = [], []
        for path in sorted(Path(sink_dir).glob("console-*.txt")):
            incarnation = int(path.stem.split("-", 1)[1])
            r, d = parse_console(path.read_text(errors="replace"), incarnation)
            rows += r
            deliveries += d
        return rows, deliveries

    def read_output(self, sink_dir: Path) -> pl.DataFrame:
        return pl.DataFrame(self._parse(sink_dir)[0], schema=SCHEMA, orient="row")

    def read_deliveries(self, sink_dir: Path) -> pl.DataFrame:
        return pl.DataFrame(self._parse(sink_dir)[1], orient="row",
                            schema={"batch_id": pl.Int64, "incarnation": pl.Int64, "rows": pl.Int64})

    def batch_output(self, result) -> pl.DataFrame:
        rows = [(r.id, r.mapped, None, None) for r in result.collect()]
        return pl.DataFrame(rows, schema=SCHEMA, orient="row")

    def oracle(self, events: pl.DataFrame) -> pl.DataFrame:
        from properties import oracle

        return oracle.passthrough_expected(events)

    def unexplained(self, output: pl.DataFrame, events: pl.DataFrame) -> list[dict]:
        wrong = output.filter(pl.col("mapped") != pl.col("id") * 3 + 1).head(1000)
        return [{"id": r["id"], "why": f"sink has mapped={r['mapped']}, 3*id+1 is {3 * r['id'] + 1}"}
                for r in wrong.iter_rows(named=True)]


CONTINUOUS_MAP = ContinuousMap()
