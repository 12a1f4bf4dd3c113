"""The threads a job starts of its own, waited for before its answer is computed or read.

A job may hand its writes to threads (a writer pool, a background flush): it has written only once they end. The
driver notes its own threads before it first runs a job; any thread that is neither one of those nor Spark's,
py4j's or the harness's is the job's.
"""

from __future__ import annotations

import threading
import time

ANSWER_THREADS_S = 60.0  # how long the oracle waits for the threads a job started to write its answer
_BEFORE_JOBS: set[threading.Thread] = set()  # the driver's threads before it first ran a job


def _job_threads() -> list[threading.Thread]:
    """The threads a job started (not Spark's, py4j's or the harness's, nor this one)."""
    ours = ("py4j", "pyspark", "chaos")
    found = []
    for thread in threading.enumerate():
        if thread is threading.current_thread() or thread in _BEFORE_JOBS:
            continue
        target = getattr(thread, "_target", None)
        module = getattr(target, "__module__", None) or type(thread).__module__
        if not module.startswith(ours):
            found.append(thread)
    return found


def note_harness_threads() -> None:
    """Note the driver's threads, once, before it first runs a job."""
    if not _BEFORE_JOBS:
        _BEFORE_JOBS.update(threading.enumerate())


def await_job_threads(timeout: float = ANSWER_THREADS_S) -> None:
    """A job that hands its writes to threads of its own has written only once they end: before the oracle runs
    (its ``DATABASE_URL`` is not the stream's) and before its answer is read, wait for them, ``timeout`` in all."""
    deadline = time.monotonic() + timeout
    for thread in _job_threads():
        thread.join(max(0.0, deadline - time.monotonic()))
