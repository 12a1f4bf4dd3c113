"""The sink phases around a job's own writers: the barriers its faults land on, with nothing asked of the job.

``foreachBatch`` functions get ``sink-write`` before and ``sink-done`` after; a Python ``DataSourceStreamWriter``
and a row-level ``foreach`` writer report them from the executors (chaos.jobs.as_written installs them while a job
starts; ``Pipeline.auto_phases`` pipelines get them through ``sink_phases``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter


@contextmanager
def patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    """``owner.name`` is ``value`` while the context lasts (PySpark's classes, while a job starts)."""
    old = owner.__dict__[name]
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, old)



def bracketed(func: Callable, phase: Callable[..., None] | None) -> Callable:
    """The job's foreachBatch function between the sink phases the harness's faults land on."""
    if phase is None:
        return func

    def in_phases(batch_df, batch_id):
        from chaos.jobs.databases import in_batch

        phase(batch_id, "sink-write")
        with in_batch(batch_id):  # its JDBC writes' tasks report their own sink-write (chaos.jobs.databases)
            func(batch_df, batch_id)
        phase(batch_id, "sink-done")

    return in_phases


class PhasedWriter(DataSourceStreamWriter):
    """A job's own Python ``DataSourceStreamWriter`` with the sink phases around it: ``sink-write`` as each task
    starts writing (on the executors, the batch id from the task's ``streaming.sql.batchId``), ``sink-done``
    after the driver's ``commit``."""

    def __init__(self, inner: DataSourceStreamWriter, controller: str, incarnation: int) -> None:
        self.inner = inner
        self.controller = controller
        self.incarnation = incarnation

    def _phase(self, batch: int, name: str, **detail) -> None:
        from chaos.nemesis import barrier

        barrier.report(self.controller, batch, name, incarnation=self.incarnation, **detail)

    def write(self, iterator):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        self._phase(int(ctx.getLocalProperty("streaming.sql.batchId")), "sink-write", partition=ctx.partitionId())
        return self.inner.write(iterator)

    def commit(self, messages, batchId: int) -> None:  # noqa: N803 - Spark's parameter name
        self.inner.commit(messages, batchId)
        self._phase(batchId, "sink-done")

    def abort(self, messages, batchId: int) -> None:  # noqa: N803
        self.inner.abort(messages, batchId)


class PhasedForeach:
    """A job's row-level ``foreach`` writer (an object with ``open``/``process``/``close``, or a function of a row)
    with the sink phases, reported from the executors: ``sink-write`` once each partition has opened (its epoch id
    is the batch id), before its first row, ``sink-done`` once it closed without an error. After ``open``, not
    before: what a writer's ``open`` does (a mark of the partition done, a transaction begun) is in place when a
    fault lands there, so a writer that marks before it writes is caught by a kill while it writes."""

    def __init__(self, inner: Any, controller: str, incarnation: int) -> None:
        self.inner = inner
        self.controller = controller
        self.incarnation = incarnation
        self.batch = self.partition = -1

    def _phase(self, name: str) -> None:
        from chaos.nemesis import barrier

        barrier.report(self.controller, self.batch, name, incarnation=self.incarnation, partition=self.partition)

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self.batch, self.partition = int(epoch_id), int(partition_id)
        opener = getattr(self.inner, "open", None)
        opened = True if opener is None else opener(partition_id, epoch_id)
        self._phase("sink-write")
        return opened

    def process(self, row) -> None:
        processor = getattr(self.inner, "process", None)
        (processor or self.inner)(row)

    def close(self, error) -> None:
        closer = getattr(self.inner, "close", None)
        if closer is not None:
            closer(error)
        if error is None:
            self._phase("sink-done")


def phased_sources(stack: ExitStack, controller: str, incarnation: int) -> None:
    """``spark.dataSource.register(S)``: a streaming writer of ``S`` comes wrapped in ``PhasedWriter``."""
    from pyspark.sql.datasource import DataSourceRegistration

    register = DataSourceRegistration.__dict__["register"]

    def phased(self, source):
        class Phased(source):
            def streamWriter(self, schema, overwrite):  # noqa: N802 - Spark's method name
                return PhasedWriter(super().streamWriter(schema, overwrite), controller, incarnation)

        Phased.__name__, Phased.__qualname__, Phased.__doc__ = source.__name__, source.__qualname__, source.__doc__
        return register(self, Phased)

    stack.enter_context(patched(DataSourceRegistration, "register", phased))


@contextmanager
def sink_phases(phase: Callable[..., None], controller: str, incarnation: int) -> Iterator[None]:
    """While a pipeline starts its query: the sink phases around every ``foreachBatch`` function and every
    Python ``DataSourceStreamWriter`` it registers, so it need not report them itself
    (``Pipeline.auto_phases``)."""
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    foreach_batch = DataStreamWriter.__dict__["foreachBatch"]
    with ExitStack() as stack:
        stack.enter_context(patched(DataStreamWriter, "foreachBatch",
                                     lambda self, func: foreach_batch(self, bracketed(func, phase))))
        if controller:
            phased_sources(stack, controller, incarnation)
        yield
