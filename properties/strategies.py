"""Hypothesis strategies: event streams and crash schedules (the public generator surface).

Users import these for their own ``@given`` tests; campaigns and the shrinking helper use them too::

    from properties.strategies import crash_schedules, event_streams, scenarios

A stream is drawn as a :class:`StreamSpec` (a handful of numbers and a seed) rather than as rows:
the rows follow from the spec deterministically (``spec.frame()``), so a drawn stream is stored in
``scenario.json`` and replays exactly, and shrinking acts on what matters (fewer events, fewer keys,
no late data) instead of on millions of row values.

A schedule shrinks toward fewer faults, earlier batches, simpler actions (kill before pause before
channel before checkpoint damage) and earlier phases, because each of those is drawn from an
ordered choice whose first element is the simplest. ``str(schedule)`` is the text the CLI takes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import polars as pl
from hypothesis import strategies as st

from chaos.scenario.faults import DAMAGE_MODES, PHASES, STATE_DAMAGE, Fault, damage_fires, parse_fault
from chaos.scenario.scenario import Scenario, generate_events

if TYPE_CHECKING:
    from pipelines_under_test import Pipeline

# Simplest first: Hypothesis shrinks a sampled_from toward its first element.
ACTION_ORDER = (
    "kill-driver", "kill-executor", "kill-worker", "kill-sink-db",
    "pause-driver", "pause-executor", "pause-worker",
    "delay-source", "delay-sink", "cut-source", "cut-sink", "reset-source", "reset-sink",
    "down-source", "down-sink",
    "damage-checkpoint",
)
# Whole-node faults, on --cluster docker only (never drawn unless asked for), each the most complex of its kind.
NODE_ACTIONS = ("kill-node", "pause-node", "slow-node", "oom-node", "partition")
# Graceful decommission (never drawn unless asked for): the way a cluster manager drains an executor or a host.
DECOMMISSION_ACTIONS = ("decommission-executor", "decommission-worker")
# The harness's Kafka broker and the trial's topic (never drawn unless asked for, and only for a pipeline that reads
# through it; a topic grows only where it is written ahead: ``applicable_actions``).
KAFKA_ACTIONS = ("kill-broker", "pause-broker", "add-partitions")
NEW_PARTITIONS = (1, 2)
ALL_ACTIONS = ACTION_ORDER + KAFKA_ACTIONS + DECOMMISSION_ACTIONS + NODE_ACTIONS  # the shrink order of every action
# Actions every pipeline can take (sink channel faults need a database sink).
NO_SINK_CHANNEL = tuple(a for a in ACTION_ORDER if "sink" not in a)
PAUSE_DURATIONS = ("2s", "5s", "10s")
LATENCIES_MS = (500, 2000)
CHANNEL_DURATIONS = ("3s", "8s")

# Default parameter strategies (module level: strategies are immutable and reusable).
ANY_PARTITIONS = st.integers(1, 4)
ANY_KEYS = st.integers(1, 50)
ANY_SKEW = st.sampled_from([0.0, 1.0, 2.0])
ANY_DISORDER_MS = st.integers(0, 5000)


@dataclass(frozen=True)
class StreamSpec:
    """The parameters of an event stream; ``frame()`` makes its rows (``chaos.scenario.scenario.generate_events``)."""

    events: int
    seed: int
    events_per_batch: int = 200
    partitions: int = 2
    keys: int = 20
    skew: float = 1.0
    max_disorder_ms: int = 2000
    late_fraction: float = 0.0
    late_by_ms: int = 600_000
    resent_fraction: float = 0.0

    @property
    def batches(self) -> int:
        return math.ceil(self.events / self.events_per_batch)

    def frame(self) -> pl.DataFrame:
        return generate_events(self)

    def scenario(self, pipeline: str, schedule: Schedule | list[Fault] = (), **harness) -> Scenario:
        """The replayable scenario of this stream under ``schedule`` (``harness``: cluster, workers, ...)."""
        return Scenario(pipeline=pipeline, faults=list(schedule), **asdict(self), **harness)


class Schedule(tuple):
    """An ordered tuple of faults that prints as the CLI's ``--fault`` arguments."""

    def __str__(self) -> str:
        return " ".join(f"--fault {f.spec}" for f in self)

    @property
    def specs(self) -> list[str]:
        return [f.spec for f in self]


def event_streams(
    *,
    min_events: int = 1,
    max_events: int = 2000,
    events_per_batch: int | st.SearchStrategy[int] = 200,
    partitions: int | st.SearchStrategy[int] = ANY_PARTITIONS,
    keys: int | st.SearchStrategy[int] = ANY_KEYS,
    skew: float | st.SearchStrategy[float] = ANY_SKEW,
    max_disorder_ms: int | st.SearchStrategy[int] = ANY_DISORDER_MS,
    late: bool = False,
    resent: bool = False,
) -> st.SearchStrategy[StreamSpec]:
    """Streams with unique ids, skewed keys, bounded disorder, and optionally late or re-sent events.

    Every parameter is a fixed value or a strategy. ``late=True`` draws a late fraction up to 10 %
    (event time 10 minutes behind: beyond any watermark delay the catalogue uses); ``resent=True``
    draws up to 10 % of events re-sent with a new id and the same payload (input for dedup pipelines).
    Shrinks toward one event, one key, no disorder, no late and no re-sent events.
    """

    def fixed(value):
        return value if isinstance(value, st.SearchStrategy) else st.just(value)

    fractions = st.sampled_from([0.0, 0.01, 0.05, 0.1])
    return st.builds(
        StreamSpec,
        events=st.integers(min_events, max_events),
        seed=st.integers(0, 2**32 - 1),
        events_per_batch=fixed(events_per_batch),
        partitions=fixed(partitions),
        keys=fixed(keys),
        skew=fixed(skew),
        max_disorder_ms=fixed(max_disorder_ms),
        late_fraction=fractions if late else st.just(0.0),
        resent_fraction=fractions if resent else st.just(0.0),
    )


def faults(
    batches: int,
    *,
    actions: tuple[str, ...] = ACTION_ORDER,
    phases: tuple[str, ...] = PHASES,
    state: bool = True,
) -> st.SearchStrategy[Fault]:
    """One fault within batches ``0..batches-1``, with the arguments its action needs. A checkpoint's damage is
    one that finds something to damage at its point, and none of the state store's files without ``state``."""
    unknown = [a for a in actions if a not in ALL_ACTIONS]
    if unknown:
        raise ValueError(f"unknown actions {unknown}: use some of {ALL_ACTIONS}")
    ordered = tuple(a for a in ALL_ACTIONS if a in actions)  # keep the shrink order whatever the caller's
    modes = DAMAGE_MODES if state else tuple(m for m in DAMAGE_MODES if m not in STATE_DAMAGE)

    @st.composite
    def one(draw) -> Fault:
        action = draw(st.sampled_from(ordered))
        batch = draw(st.integers(0, batches - 1))
        phase = draw(st.sampled_from(phases))
        args: tuple[str, ...] = ()
        if action.startswith("pause-") or action in ("slow-node", "oom-node"):
            args = (draw(st.sampled_from(PAUSE_DURATIONS)),)
        elif action == "partition":  # the node at the phase, cut off for a while
            args = (draw(st.sampled_from(CHANNEL_DURATIONS)),)
        elif action.startswith("delay-"):
            args = (f"latency={draw(st.sampled_from(LATENCIES_MS))}", draw(st.sampled_from(CHANNEL_DURATIONS)))
        elif action.split("-")[0] in ("cut", "reset", "down"):
            args = (draw(st.sampled_from(CHANNEL_DURATIONS)),)
        elif action == "damage-checkpoint":
            args = (draw(st.sampled_from([m for m in modes if damage_fires(m, batch, phase)])),)
        elif action == "add-partitions":
            args = (str(draw(st.sampled_from(NEW_PARTITIONS))),)
        fault = Fault(action, batch, phase, args)
        return parse_fault(fault.spec)  # the same validation a typed spec gets

    return one()


def crash_schedules(
    batches: int,
    *,
    max_faults: int = 3,
    min_faults: int = 0,
    actions: tuple[str, ...] = ACTION_ORDER,
    phases: tuple[str, ...] = PHASES,
    state: bool = True,
) -> st.SearchStrategy[Schedule]:
    """Schedules of at most ``max_faults`` faults, no two at the same (batch, phase), sorted by batch and phase.

    Every fault the harness injects is healed before the input drains (killed processes restart,
    pauses end, the trial ends only after recovery), so any schedule is a complete trial.
    """
    if batches < 1:
        raise ValueError("a schedule needs at least one batch")
    order = {p: i for i, p in enumerate(PHASES)}
    return st.lists(
        faults(batches, actions=actions, phases=phases, state=state),
        min_size=min_faults, max_size=max_faults,
        unique_by=lambda f: (f.batch, f.phase),
    ).map(lambda fs: Schedule(sorted(fs, key=lambda f: (f.batch, order[f.phase]))))


@st.composite
def scenarios(draw, pipeline: Pipeline, streams: st.SearchStrategy[StreamSpec] | None = None, max_faults: int = 3,
              actions: tuple[str, ...] | None = None, **harness) -> Scenario:
    """A stream and a schedule that fits its batch count, as one replayable Scenario of ``pipeline`` (e.g.
    ``pipelines_under_test.resolve("my_module:MyPipeline")``: the scenario names it as it was resolved).

    ``actions`` default: every action the pipeline can take (sink faults need a database sink).
    """
    if actions is None:
        actions = ACTION_ORDER if pipeline.sink_channel else NO_SINK_CHANNEL
    spec = draw(event_streams() if streams is None else streams)
    schedule = draw(crash_schedules(spec.batches, max_faults=max_faults, actions=actions, phases=pipeline.phases))
    return spec.scenario(pipeline.ref, schedule, **harness)


def records(schema) -> st.SearchStrategy[dict]:
    """Payloads of a job's schema (Spark DDL, a sample record as JSON, or a ``StructType``), as JSON-ready
    dicts: for property tests of a job's parsing and logic on single records. A trial's records come from its
    scenario instead (``chaos.jobs.payloads.record``), so that keys, skew and lateness reach the job."""
    from datetime import UTC, datetime, timedelta

    from chaos.jobs.payloads import as_ddl, parse_schema

    start = datetime(2026, 1, 1, tzinfo=UTC)
    instants = st.integers(0, 365 * 24 * 3600 * 1000).map(lambda ms: start + timedelta(milliseconds=ms))
    by_kind = {
        "string": st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
        "int": st.integers(-(2**31), 2**31 - 1),
        "float": st.floats(allow_nan=False, allow_infinity=False, width=32),
        "bool": st.booleans(),
        "timestamp": instants.map(lambda t: t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"),
        "date": instants.map(lambda t: t.strftime("%Y-%m-%d")),
    }
    def of(field) -> st.SearchStrategy:
        if field.kind == "struct":
            return st.fixed_dictionaries({c.name: of(c) for c in field.children})
        if field.kind == "array":
            return st.lists(of(field.children[0]), max_size=3)
        return by_kind[field.kind]

    return st.fixed_dictionaries({f.name: of(f) for f in parse_schema(as_ddl(schema))})
