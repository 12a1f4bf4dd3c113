"""The catalogue of pipelines under test, and how a name (or ``module:attr``) resolves to one."""

from __future__ import annotations

from pathlib import Path

from chaos.errors import UserError
from pipelines_under_test.base import DriverContext, Pipeline
from pipelines_under_test.continuous import CONTINUOUS_MAP
from pipelines_under_test.counts import API_COUNT, API_COUNT_INCREMENT, API_COUNT_TWO_PHASE, KEY_COUNT, RESCALE
from pipelines_under_test.delta import DELTA_APPEND, DELTA_MERGE, DELTA_STREAM, DELTA_TXN
from pipelines_under_test.event_time import (
    DEDUP_WINDOW_COUNT,
    DEDUP_WITHIN_WATERMARK,
    WINDOWED_COUNT,
    WINDOWED_COUNT_CHANGELOG,
    WINDOWED_COUNT_CHANGELOG_V2,
    WINDOWED_COUNT_ROCKSDB,
    WINDOWED_COUNT_ROCKSDB_V2,
)
from pipelines_under_test.expiry import KEYED_STATE_EXPIRY
from pipelines_under_test.files import PASSTHROUGH_FILE, PASSTHROUGH_FILE_RAW
from pipelines_under_test.join import JOIN_WINDOW_COUNT, STREAM_JOIN, STREAM_JOIN_OUTER
from pipelines_under_test.kafka import (
    KAFKA_PASSTHROUGH,
    KAFKA_REAL_TIME,
    KAFKA_TRANSACTIONAL,
    KAFKA_TRANSACTIONAL_ID,
    KAFKA_WINDOWED_COUNT,
)
from pipelines_under_test.keyed_state import (
    KEYED_STATE_EVOLVE,
    KEYED_STATE_LIST,
    KEYED_STATE_MAP,
    KEYED_STATE_TIMERS,
    KEYED_STATE_TTL,
    KEYED_STATE_VALUE,
)
from pipelines_under_test.nondeterministic import NondeterministicKey
from pipelines_under_test.passthrough import (
    FOREACH_WRITER,
    PASSTHROUGH_APPEND,
    PASSTHROUGH_IDEMPOTENT,
    QUERY_BATCH_DEDUP,
)
from pipelines_under_test.postgres import PG_APPEND, PG_TWO_PHASE, PG_UPSERT_BY_BATCH
from pipelines_under_test.socket_source import SOCKET_SOURCE

CATALOGUE: dict[str, Pipeline] = {
    p.name: p for p in (PASSTHROUGH_APPEND, PASSTHROUGH_IDEMPOTENT, KEY_COUNT, API_COUNT, API_COUNT_TWO_PHASE,
                        API_COUNT_INCREMENT,
                        PG_APPEND, PG_UPSERT_BY_BATCH, PG_TWO_PHASE, WINDOWED_COUNT, WINDOWED_COUNT_ROCKSDB,
                        WINDOWED_COUNT_CHANGELOG, WINDOWED_COUNT_ROCKSDB_V2, WINDOWED_COUNT_CHANGELOG_V2,
                        DEDUP_WITHIN_WATERMARK, NondeterministicKey(), PASSTHROUGH_FILE,
                        PASSTHROUGH_FILE_RAW, FOREACH_WRITER, KEYED_STATE_VALUE,
                        KEYED_STATE_LIST, KEYED_STATE_MAP, STREAM_JOIN, SOCKET_SOURCE, RESCALE, CONTINUOUS_MAP,
                        QUERY_BATCH_DEDUP, DEDUP_WINDOW_COUNT, KEYED_STATE_TIMERS, KEYED_STATE_TTL, KEYED_STATE_EVOLVE,
                        STREAM_JOIN_OUTER, KEYED_STATE_EXPIRY, JOIN_WINDOW_COUNT, KAFKA_PASSTHROUGH, KAFKA_REAL_TIME,
                        KAFKA_WINDOWED_COUNT, KAFKA_TRANSACTIONAL, KAFKA_TRANSACTIONAL_ID,
                        DELTA_STREAM, DELTA_APPEND, DELTA_TXN, DELTA_MERGE)
}

__all__ = ["CATALOGUE", "DriverContext", "Pipeline", "for_run", "resolve"]


def for_run(run_dir) -> Pipeline:
    """The pipeline a stored run directory's scenario names (for the checker, which takes a Pipeline)."""

    from chaos.scenario.scenario import Scenario

    return resolve(Scenario.load(Path(run_dir) / "scenario.json").pipeline)


def resolve(name: str) -> Pipeline:
    """A catalogue name; ``package.module:attribute`` naming a user's Pipeline (instance or class); or a user's
    job as written, ``module:function?schema=...&sink=...`` (``chaos.jobs.reference``)."""
    if name in CATALOGUE:
        return CATALOGUE[name]
    from chaos.scenario.names import is_script

    if is_script(name.partition("?")[0]):  # a script, run as __main__ (chaos.jobs.as_written)
        from chaos.jobs.reference import parse_ref
        from pipelines_under_test.user_job import UserJob

        return UserJob(parse_ref(name))
    if ":" in name:
        from chaos.jobs.reference import import_entry, parse_ref
        from chaos.scenario.names import entry_module
        from pipelines_under_test.user_job import UserJob

        entry, _, query = name.partition("?")
        if query:  # a job with its options: judged without importing it (a stored run re-checks anywhere)
            return UserJob(parse_ref(name))
        _, attr, _ = entry_module(entry)
        module = import_entry(entry, "pipeline module")  # as a driver imports it (chaos/machine/own_packages.py)
        obj = getattr(module, attr, None)
        if isinstance(obj, type) and issubclass(obj, Pipeline):
            obj = obj()
        if isinstance(obj, Pipeline):
            obj.ref = name  # what a scenario names it by, to be resolved again on replay
            return obj
        if callable(obj) and not isinstance(obj, type | Pipeline):
            return UserJob(parse_ref(name))
        raise UserError(f"{entry!r} is neither a streamchaos Pipeline (subclass pipelines_under_test.Pipeline) "
                        "nor a job's function")
    raise UserError(
        f"unknown pipeline {name!r}: use one of {', '.join(sorted(CATALOGUE))}, module:attribute or your job's "
        "module:function"
    )
