"""Campaign plans: which fault schedules a campaign runs, canonical windows first, then Hypothesis' draws.

A trial costs seconds to a minute, so a campaign of N trials cannot hope that random draws hit the
one window that breaks a pipeline. The plan therefore opens the **canonical windows** first
(``CANONICAL_WINDOWS``: the points where micro-batch sinks lose or repeat work), packed two to a
trial at consecutive batches when ``max_faults`` allows, so that four trials open all of them
and the first one already kills the driver before the sink writes and, at the second batch after
that restart, after the sink wrote and before ``commits/N``; the third kills it while a batch's tasks read
and again once that batch's replay wrote (``RETRY``: is a job's path for a batch it has seen before
idempotent?). Only windows whose action the campaign allows and whose phase the pipeline reaches
(``Pipeline.phases``) are planned. After them, the plan draws many
candidate schedules from ``crash_schedules`` (deterministically, from the campaign seed) and picks,
trial by trial, the candidate that exercises the most (action, phase) pairs not yet covered,
simplest actions first (``ACTION_ORDER``). Once every pair is covered, the remaining trials follow
Hypothesis' own draw order. A plan of N trials is the first N trials of a longer plan.

The plan is computed without Spark and stored in ``campaign.json``: a campaign replays, resumes
and can be reviewed before it runs.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Iterable

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from chaos.errors import UserError
from chaos.scenario.faults import PHASES, Fault, parse_fault
from properties.strategies import (
    ACTION_ORDER,
    ALL_ACTIONS,
    DECOMMISSION_ACTIONS,
    KAFKA_ACTIONS,
    NODE_ACTIONS,
    Schedule,
    crash_schedules,
)

# ``--faults`` kinds and the actions each one allows.
FAULT_KINDS: dict[str, tuple[str, ...]] = {
    "kill": ("kill-driver", "kill-executor", "kill-worker"),
    "pause": ("pause-driver", "pause-executor", "pause-worker"),
    "channel": tuple(a for a in ACTION_ORDER if a.split("-")[0] in ("delay", "cut", "reset", "down")),
    "checkpoint": ("damage-checkpoint",),
    "db": ("kill-sink-db",),
    "kafka": KAFKA_ACTIONS,  # the broker killed or frozen, the topic grown (pipelines that read Kafka through it)
    "node": NODE_ACTIONS,  # Docker nodes or hosts: kill, freeze, starve or cut off a whole node
    "decommission": DECOMMISSION_ACTIONS,  # Spark's graceful decommission of an executor or a worker
}
DEFAULT_KINDS = ("kill",)
CANDIDATES_PER_TRIAL = 12

# The windows every campaign opens first, most revealing first: (action, phase, what it exercises).
# ``sink-write`` is "before the sink writes" for foreachBatch sinks and "after the part files, before the log"
# for Spark's file sink: paired with ``sink-done`` at the next batch, one of them lands after the write. In
# that order, the pair also catches a continuous query that loses an epoch: a driver killed before the epoch's
# rows were written, whose replacement commits the epoch with the dead driver's offsets and dies in the next.
CANONICAL_WINDOWS: tuple[tuple[str, str, str], ...] = (
    ("kill-driver", "sink-write", "driver kill before (file sink: during) the sink's write"),
    ("kill-driver", "sink-done", "driver kill after the sink wrote, before commits/N"),
    ("kill-driver", "committed", "driver kill right after commits/N (work still pending)"),
    ("kill-executor", "reading", "executor kill while reading"),
    # Inside a foreachBatch function, its Spark jobs read the batch between its writes (a marker first, then
    # the rows): a driver killed there stops the function half way.
    ("kill-driver", "reading", "driver kill while the batch's tasks read (inside a foreachBatch, between writes)"),
    ("kill-executor", "sink-write", "executor kill while writing"),
    ("kill-driver", "state-commit", "driver kill after the state store wrote version N+1, before commits/N"),
)
STATE_WINDOW = "kill-driver:state-commit"  # a query's state store, learned from its checkpoint (Campaign.summarize)
TASK_WRITE_WINDOW = "kill-executor:sink-write"
# Covered when a trial's second driver kill fired at the batch after its first one's: the second
# batch a restarted driver runs (the first is the replay).
AFTER_RESTART = ("kill-driver", "after-restart", "driver kill at the second batch after a restart")
# Covered when a trial's second driver kill fired at the batch its first one killed, in the replay. Jobs often take a
# path of their own for a batch they have seen before (a retry), and the window asks whether that path is itself
# idempotent: the first kill lands while the batch's tasks read (inside a foreachBatch, after what the function did
# first), the second after the retry wrote, before ``commits/N``.
RETRY = ("kill-driver", "retry", "driver kill after a retried batch wrote, its first run killed while reading")
READING_WINDOW = ("kill-driver", "reading")
PSEUDO_WINDOWS = (AFTER_RESTART, RETRY)  # named by how two kills fall, planned through the windows they pair


def parse_kinds(text: str | Iterable[str] | None) -> tuple[str, ...]:
    """``"kill,channel"`` -> ("kill", "channel"); an unknown kind is a user error."""
    if text is None:
        return DEFAULT_KINDS
    items = text.split(",") if isinstance(text, str) else [k for t in text for k in t.split(",")]
    kinds = tuple(dict.fromkeys(k.strip() for k in items if k.strip()))
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if unknown or not kinds:
        raise UserError(f"unknown fault kind(s) {', '.join(unknown) or '(none given)'} in --faults: "
                        f"use a comma-separated list of {', '.join(FAULT_KINDS)}")
    return kinds


def applicable_actions(kinds: Iterable[str], *, sink_channel: bool, database: bool, source_channel: bool = True,
                       refused: Callable[[str], bool] = lambda action: False, kafka: bool = False,
                       kafka_fed: bool = False) -> tuple[str, ...]:
    """The actions of ``kinds`` a pipeline and cluster can take, in shrink order. A pipeline with a
    source of its own (socket, rate) has no source channel: a fault there would change nothing. ``refused``:
    the actions the cluster refuses (its kind says which: ``chaos.campaign.stored.refused_by``). ``kafka_fed``:
    its topic is fed as batches commit (real-time mode), not written ahead, so it has no later records to place
    in new partitions."""
    wanted = {a for k in kinds for a in FAULT_KINDS[k]}
    out = []
    for action in ALL_ACTIONS:
        if action not in wanted:
            continue
        if action.endswith("-sink") and not sink_channel:
            continue
        if action.endswith("-source") and not source_channel:
            continue
        if action == "kill-sink-db" and not database:
            continue
        if action in KAFKA_ACTIONS and not kafka:
            continue
        if action == "add-partitions" and kafka_fed:
            continue
        if refused(action):
            continue
        out.append(action)
    return tuple(out)


def stable_seed(seed: int, *parts: str) -> int:
    """A per-pipeline seed that does not depend on Python's hash randomization."""
    return (seed * 1_000_003 + zlib.crc32("/".join(parts).encode())) % (2**32)


def draw_schedules(batches: int, actions: tuple[str, ...], count: int, seed: int,
                   max_faults: int, phases: tuple[str, ...] = PHASES, state: bool = True) -> list[Schedule]:
    """``count`` schedules as Hypothesis draws them for ``seed`` (the same list every time)."""
    drawn: list[Schedule] = []

    @hypothesis_seed(seed)
    @settings(max_examples=count, phases=(Phase.generate,), database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(crash_schedules(batches, max_faults=max_faults, min_faults=1, actions=actions, phases=phases,
                           state=state))
    def collect(schedule: Schedule) -> None:
        drawn.append(schedule)

    collect()
    return drawn


def coverage(schedules: Iterable[Iterable[Fault | str]]) -> set[tuple[str, str]]:
    """The (action, phase) pairs a set of schedules exercises."""
    pairs = set()
    for schedule in schedules:
        for f in schedule:
            fault = parse_fault(f) if isinstance(f, str) else f
            pairs.add((fault.action, fault.phase))
    return pairs


def canonical_windows(actions: Iterable[str], phases: Iterable[str], max_faults: int = 2,
                      state_first: bool = False, task_write_first: bool = False) -> list[tuple[str, str, str]]:
    """The canonical windows a pipeline can take: action allowed, phase reached (``AFTER_RESTART`` needs
    two driver kills in a trial). ``state_first``: the pipeline is known to keep state (``Pipeline.state_known``),
    so the state store's window comes third (two faults a trial: in the second trial, where three trials open it;
    the executor kill while writing, which Spark retries, moves to the fourth). ``task_write_first``: its tasks
    report their own ``sink-write`` once they committed (Spark's JDBC writer: ``Pipeline.executor_phases``), where
    an executor kill makes Spark write a partition again, so that window comes right after (in the second trial)."""
    actions, phases = set(actions), set(phases)
    windows = [w for w in CANONICAL_WINDOWS if w[0] in actions and w[1] in phases]
    state = [w for w in windows if f"{w[0]}:{w[1]}" == STATE_WINDOW]
    if state_first and state:
        windows.remove(state[0])
        windows.insert(min(2, len(windows)), state[0])
    task_write = [w for w in windows if f"{w[0]}:{w[1]}" == TASK_WRITE_WINDOW]
    if task_write_first and task_write:
        windows.remove(task_write[0])
        windows.insert(min(3 if state_first and state else 2, len(windows)), task_write[0])
    if max_faults >= 2 and sum(1 for w in windows if w[0] == "kill-driver") >= 2:
        windows.append(AFTER_RESTART)
    if max_faults >= 2 and "sink-done" in phases and any(w[:2] == READING_WINDOW for w in windows):
        windows.append(RETRY)
    return windows


def window_names(windows: Iterable[tuple[str, str, str]]) -> list[str]:
    """``action:phase`` names, as summaries and reports print them."""
    return [f"{a}:{p}" for a, p, _ in windows]


def covered_windows(fired: Iterable[Fault | str]) -> set[str]:
    """The window names one trial's fired faults exercised (its ``action:phase`` pairs, and
    ``kill-driver:after-restart`` for a driver kill at the batch after an earlier one's). Faults fired at a time
    (``--timing random``) open no window the campaign can name."""
    faults = [parse_fault(f) if isinstance(f, str) else f for f in fired]
    faults = [f for f in faults if not f.timed]  # a fault at a time opened whatever window it hit: none claimed
    names = {f"{f.action}:{f.phase}" for f in faults}
    kills = sorted(f.batch for f in faults if f.action == "kill-driver")
    if any(b + 1 in kills for b in kills):
        names.add(window_names([AFTER_RESTART])[0])
    if len(set(kills)) < len(kills):
        names.add(window_names([RETRY])[0])
    return names


def canonical_schedules(batches: int, actions: tuple[str, ...], phases: tuple[str, ...], seed: int,
                        max_faults: int = 2, state_first: bool = False,
                        task_write_first: bool = False) -> list[list[str]]:
    """The canonical windows as trials: up to two per trial (``max_faults``), the second at the batch after
    the first's, at a batch drawn from ``seed`` that leaves two batches before it and one after it when the
    stream has them (a query's first batches may still be starting: a continuous query's first epochs are
    often empty, and a kill there shows nothing). With ``RETRY`` open, the driver kill while reading takes a trial
    with the kill after the same batch's replay wrote (``sink-done`` at that batch), ahead of the executor kill while
    reading, which moves to the next trial."""
    windows = canonical_windows(actions, phases, max_faults, state_first, task_write_first)
    retry = RETRY in windows
    units = [[(a, p, 0), ("kill-driver", "sink-done", 0)] if retry and (a, p) == READING_WINDOW else [(a, p, 0)]
             for a, p, _ in windows if (a, p, _) not in PSEUDO_WINDOWS]
    retried = [i for i, u in enumerate(units) if len(u) == 2]
    executor_read = [i for i, u in enumerate(units) if u[0][:2] == ("kill-executor", "reading")]
    if retried and executor_read and executor_read[0] < retried[0]:  # the driver's read first: it keeps its trial
        units.insert(executor_read[0], units.pop(retried[0]))
    per_trial = max(1, min(2, max_faults))
    groups = []
    while units:
        group = units.pop(0)
        fits = next((i for i, u in enumerate(units) if len(group) + len(u) <= per_trial), None)
        if fits is not None:
            group = group + [(a, p, 1) for a, p, _ in units.pop(fits)]
        groups.append(group)
    rng = random.Random(seed)
    order = {p: i for i, p in enumerate(PHASES)}
    out = []
    for group in groups:
        span = 1 + max(k for _, _, k in group)
        low = 2 if batches >= span + 4 else 1 if batches > span + 1 else 0
        first = rng.randrange(low, max(low + 1, batches - span))
        faults = [Fault(a, min(first + k, batches - 1), p) for a, p, k in group]
        faults.sort(key=lambda f: (f.batch, order[f.phase]))
        out.append([f.spec for f in faults])
    return out


def plan_schedules(batches: int, actions: tuple[str, ...], trials: int, seed: int, *,
                   max_faults: int = 2, examples: Iterable[str] = (),
                   phases: tuple[str, ...] = PHASES, state_first: bool = False,
                   task_write_first: bool = False) -> list[list[str]]:
    """The fault schedules of ``trials`` trials: ``examples`` first, then the canonical windows (the state store's
    early for a pipeline known to keep state: ``state_first``; the executor kill in a committed write task early
    where tasks report it: ``task_write_first``), then coverage-first Hypothesis draws (damage to the state
    store's files only for a pipeline known to keep state)."""
    plan = [[parse_fault(s).spec for s in example.split()] for example in examples if example.strip()][:trials]
    if not actions:
        return plan
    for schedule in canonical_schedules(batches, actions, phases, seed, max_faults, state_first, task_write_first):
        if len(plan) < trials and schedule not in plan:
            plan.append(schedule)
    rank = ({a: len(ACTION_ORDER) - i for i, a in enumerate(ACTION_ORDER)}
            | {a: 1 for a in (*KAFKA_ACTIONS, *DECOMMISSION_ACTIONS, *NODE_ACTIONS)})
    candidates = draw_schedules(batches, actions, max(50, CANDIDATES_PER_TRIAL * trials), seed, max_faults, phases,
                                state=state_first)
    seen = {tuple(s) for s in plan}
    unique = []
    for s in candidates:
        if tuple(s.specs) not in seen:
            seen.add(tuple(s.specs))
            unique.append(s)
    covered = coverage(plan)

    def gain(schedule: Schedule, covered: set[tuple[str, str]]) -> tuple[int, int]:
        new = {(f.action, f.phase) for f in schedule} - covered
        return (sum(rank[a] for a, _ in new), -len(schedule))

    while len(plan) < trials and unique:
        best = max(range(len(unique)), key=lambda i: (gain(unique[i], covered), -i))
        chosen = unique.pop(best)
        covered |= coverage([chosen])
        plan.append(chosen.specs)
    return plan


def trial_seeds(seed: int, pipeline: str, count: int) -> list[int]:
    """Event-stream seeds of a pipeline's trials (a new stream per trial, all derived from the campaign seed)."""
    rng = random.Random(stable_seed(seed, pipeline, "streams"))
    return [rng.randrange(2**31) for _ in range(count)]
