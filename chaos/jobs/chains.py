"""A job whose query under test reads a table another of its queries writes: bronze to silver, run as written.

A lakehouse job often starts two queries: one lands the stream in a bronze table (a Delta table or a file sink's
directory, by path), the next reads that table as a stream and writes silver. Named with ``--sink
delta:/lake/bronze,delta:/lake/silver`` (the table between them, then the sink under test), the trial runs both:

* the harness's source (the stand-in, or Kafka's connector) feeds the first query, on a checkpoint of its own
  beside the trial's (``checkpoint-upstream``) and reporting no phases: faults and phases are the second query's,
  its ``planned`` and ``reading`` from the JVM (its checkpoint's files, its tasks' start), as for a Kafka source;
* the bronze table is the run's (a Delta table routed by chaos.jobs.delta_tables, a file sink's directory
  ``files-upstream``), and the second query's read of it reads that;
* the second query's offsets name versions of the table, which chaos.store.chained counts as the first query's
  events, so the drained input, attribution and late records work as for a query reading the source itself;
* a stop (the trial's end, the answer's run) lets the first query finish before the second one
  (``finish_available``), and a first query that fails ends the driver with its error (``stopped_feeder``).

Beside chains, what any job with several queries needs: every query but the one under test starts without the
JVM's ``reading`` reports, and all of them stop with it (``stop_side_queries``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from chaos.errors import UserError
from chaos.jobs import delta_tables
from chaos.jobs.delta_tables import normalized
from chaos.store import chained

UPSTREAM = "upstream"  # the first query's name beside the trial's: checkpoint-upstream, files-upstream
READING_KEYS = ("streamchaos.reading.controller", "streamchaos.reading.incarnation")
_FEEDING: dict[int, list] = {}  # id(query under test) -> the query writing the table it reads
TABLE_WAIT_S = 120.0  # how long silver's read waits for the first commit of the bronze Delta table


class Chain:
    """The table between the job's two queries, in one run (the trial's stream, or the answer's)."""

    def __init__(self, kind: str, path: str, checkpoint: str, file_sink: Path) -> None:
        self.kind = "delta" if kind == "delta" else "files"
        self.path = normalized(path)  # as the job names it
        self.checkpoint = f"{checkpoint}-{UPSTREAM}"
        self.feeders: list = []  # the queries writing it (one, started on it)
        self.read = False  # whether the query under test's read of it was seen
        self.table = delta_tables.route(path) if self.kind == "delta" else \
            str(file_sink.with_name(f"{file_sink.name}-{UPSTREAM}"))
        if self.kind == "files":  # a file source refuses a directory not there yet; the sink would make it
            Path(self.table).mkdir(parents=True, exist_ok=True)
        chained.describe(checkpoint, self.checkpoint, self.table, self.kind)
        _FEEDING.clear()  # a recycled driver's last job's queries are gone

    def names(self, path: object) -> bool:
        """Whether the job's ``path`` is this table."""
        return bool(path) and normalized(str(path)) == self.path

    def feeds(self, fmt: str, files: bool, path: object) -> bool:
        """Whether a query writing format ``fmt`` (``files``: a file sink) at ``path`` writes this table."""
        return self.names(path) and (fmt == "delta" if self.kind == "delta" else files)

    def reads(self, fmt: str, path: object) -> bool:
        """Whether a stream read of format ``fmt`` at ``path`` reads this table (noted: it must be read)."""
        found = self.names(path) and (fmt.lower() == "delta") == (self.kind == "delta")
        self.read = self.read or found
        return found

    def await_table(self, wait_s: float = TABLE_WAIT_S) -> None:
        """A Delta source refuses a table with no commit yet; on a lake, bronze has run before silver starts. So
        silver's read waits for bronze's first commit (bronze started: it makes one within seconds), and a job that
        reads the table before starting the query that writes it is one line naming the ways out."""
        log = Path(self.table) / "_delta_log"
        deadline = time.monotonic() + (wait_s if self.feeders else 0.0)
        while not any(log.glob("*.json")):
            if time.monotonic() >= deadline:
                raise UserError(f"the job reads the Delta table {self.path} before it has a commit: start the query "
                                f"that writes it first, or create it (CREATE TABLE IF NOT EXISTS delta.`{self.path}` "
                                "...) before reading it")
            time.sleep(0.2)

    def started(self, judged: str, tested, queries: list) -> None:
        """The job's queries have started (``(query, under test, sink kind)``): the one under test is fed by the
        query writing the table; a job that does not write it by path, or whose query under test does not read it,
        is one line."""
        sink = "Delta table" if self.kind == "delta" else "file sink"
        if not self.feeders:
            raise UserError(f"none of the job's queries writes {self.path} as a streaming {sink} by path (it starts "
                            f"{', '.join(kind for _, _, kind in queries)} queries): name the table its first query "
                            f"writes with start(PATH), or test the first query alone (--sink {judged})")
        if not self.read:
            raise UserError(f"the job's query writing {judged} does not read {self.path} as a stream (by that "
                            "path): name the table it reads before its sink in --sink")
        _FEEDING[id(tested)] = list(self.feeders)

    def source_options(self, options: dict[str, str]) -> dict[str, str]:
        """The harness's source as the first query reads it: on that query's checkpoint, reporting no phases."""
        return {**{k: v for k, v in options.items() if k != "controller"}, "checkpoint": self.checkpoint}


def chain_for(spec, checkpoint: str, file_sink: Path) -> Chain | None:
    """The chain of a job named with one (``JobSpec.upstream``); call after ``delta_tables.begin``."""
    return Chain(*spec.upstream, checkpoint, file_sink) if spec.upstream else None


@contextmanager
def without_reading_reports(spark) -> Iterator[None]:
    """A query started here reports no ``reading`` (chaos/machine/jvm/ReadingBarrier): its tasks inherit the
    starting thread's local properties, and only the query under test's tasks are the trial's."""
    sc = spark.sparkContext
    saved = {key: sc.getLocalProperty(key) for key in READING_KEYS}
    for key, value in saved.items():
        if value is not None:
            sc.setLocalProperty(key, None)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is not None:
                sc.setLocalProperty(key, value)


def stop_side_queries(spark) -> None:
    """The queries the job started beside the one under test (a console query): stopped with it, so none runs on
    into the oracle's run or a recycled driver's next trial."""
    for other in spark.streams.active:
        other.stop()


def stopped_feeder(query):
    """A query feeding ``query`` that is no longer running (it failed: the trial's driver exits with its error,
    rather than the query under test waiting for input that never comes), or None."""
    return next((q for q in _FEEDING.get(id(query), ()) if not q.isActive), None)


def in_order(query) -> list:
    """The queries feeding ``query``, in the order they started, then ``query``."""
    return [*_FEEDING.get(id(query), ()), query]


FINISH_S = 60.0  # how long a drained job's query may take for what Spark still has to do before it is stopped


def finish_available(query, wait_s: float = FINISH_S) -> None:
    """Let a drained job's query do what Spark still has to do before it stops: the no-data batch that moves its
    watermark and emits the windows the last records closed, the queries feeding it first, in order. The stream is
    drained once a batch covers the input, but Spark's answer (chaos.jobs.as_written.run_answer) runs until nothing
    is left; stopped before that batch, the stream would miss those windows and the verdict would call them lost.
    Each wait is bounded by ``wait_s`` (``query.stop()`` ends one that hangs); a failing query is judged from its
    checkpoint."""
    for each in in_order(query):
        done = threading.Event()

        def wait(q=each, done=done) -> None:
            try:
                q.processAllAvailable()
            except Exception:  # noqa: BLE001 - judged from its checkpoint, as before
                pass
            finally:
                done.set()

        threading.Thread(target=wait, name="chaos-finish", daemon=True).start()
        done.wait(wait_s)
