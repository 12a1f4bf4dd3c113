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
  (``finish_available``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from chaos.errors import UserError
from chaos.jobs import delta_tables
from chaos.jobs.delta_tables import normalized
from chaos.store import chained

UPSTREAM = "upstream"  # the first query's name beside the trial's: checkpoint-upstream, files-upstream
READING_KEYS = ("streamchaos.reading.controller", "streamchaos.reading.incarnation")
_FEEDING: dict[int, list] = {}  # id(query under test) -> the queries before it, in the order they started


class Chain:
    """The table between the job's two queries, in one run (the trial's stream, or the answer's)."""

    def __init__(self, kind: str, path: str, checkpoint: str, file_sink: Path) -> None:
        self.kind = "delta" if kind == "delta" else "files"
        self.path = normalized(path)  # as the job names it
        self.checkpoint = f"{checkpoint}-{UPSTREAM}"
        self.fed = False  # whether a query of the job writes it (one started on it)
        self.table = delta_tables.route(path) if self.kind == "delta" else \
            str(file_sink.with_name(f"{file_sink.name}-{UPSTREAM}"))
        if self.kind == "files":  # a file source refuses a directory not there yet; the sink would make it
            Path(self.table).mkdir(parents=True, exist_ok=True)
        chained.describe(checkpoint, self.checkpoint, self.table, self.kind)

    def names(self, path: object) -> bool:
        """Whether the job's ``path`` is this table."""
        return bool(path) and normalized(str(path)) == self.path

    def fed_by(self, table: bool, path: object) -> bool:
        """Whether a query writing a table (``table``: a file or Delta sink) at ``path`` writes this one."""
        if table and self.names(path):
            self.fed = True
            return True
        return False

    def started(self, sink: str, tested, queries: list) -> None:
        """The job's queries have started (``(query, under test, sink kind)``): the one under test is fed by those
        before it; a job none of whose queries writes the table is one line."""
        if not self.fed:
            raise UserError(f"--sink {sink}: none of the job's queries writes {self.path} (it starts "
                            f"{', '.join(kind for _, _, kind in queries)} queries): name the table its first query "
                            "writes")
        _FEEDING.clear()
        _FEEDING[id(tested)] = [q for q, under_test, _ in queries if not under_test]

    def reads(self, fmt: str, path: object) -> bool:
        """Whether a stream read of format ``fmt`` at ``path`` reads this table."""
        return self.names(path) and (fmt.lower() == "delta") == (self.kind == "delta")

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
