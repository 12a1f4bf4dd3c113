"""Campaign plans: which fault schedules a campaign runs, drawn by Hypothesis, chosen for coverage.

A trial costs about a minute, so a campaign of N trials cannot hope that random draws hit the one
(action, phase) pair that breaks a pipeline. The plan therefore draws many candidate schedules
from ``crash_schedules`` (deterministically, from the campaign seed) and picks, trial by trial, the
candidate that exercises the most (action, phase) pairs not yet covered, simplest actions first
(``ACTION_ORDER``: a driver kill at every phase comes before pauses and channel faults). Once
every pair is covered, the remaining trials follow Hypothesis' own draw order.

The plan is computed without Spark and stored in ``campaign.json``: a campaign replays, resumes
and can be reviewed before it runs.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterable

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from chaos.errors import UserError
from chaos.spec import PHASES, Fault, parse_fault
from properties.strategies import ACTION_ORDER, Schedule, crash_schedules

# ``--faults`` kinds and the actions each one allows.
FAULT_KINDS: dict[str, tuple[str, ...]] = {
    "kill": ("kill-driver", "kill-executor", "kill-worker"),
    "pause": ("pause-driver", "pause-executor", "pause-worker"),
    "channel": tuple(a for a in ACTION_ORDER if a.split("-")[0] in ("delay", "cut", "reset", "down")),
    "checkpoint": ("damage-checkpoint",),
    "db": ("kill-sink-db",),
}
DEFAULT_KINDS = ("kill",)
CANDIDATES_PER_TRIAL = 12


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


def applicable_actions(kinds: Iterable[str], *, sink_channel: bool, database: bool,
                       owns_workers: bool, source_channel: bool = True) -> tuple[str, ...]:
    """The actions of ``kinds`` a pipeline and cluster can take, in shrink order. A pipeline with a
    source of its own (socket, rate) has no source channel: a fault there would change nothing."""
    wanted = {a for k in kinds for a in FAULT_KINDS[k]}
    out = []
    for action in ACTION_ORDER:
        if action not in wanted:
            continue
        if action.endswith("-sink") and not sink_channel:
            continue
        if action.endswith("-source") and not source_channel:
            continue
        if action == "kill-sink-db" and not database:
            continue
        if action.endswith("-worker") and not owns_workers:
            continue
        out.append(action)
    return tuple(out)


def stable_seed(seed: int, *parts: str) -> int:
    """A per-pipeline seed that does not depend on Python's hash randomization."""
    return (seed * 1_000_003 + zlib.crc32("/".join(parts).encode())) % (2**32)


def draw_schedules(batches: int, actions: tuple[str, ...], count: int, seed: int,
                   max_faults: int, phases: tuple[str, ...] = PHASES) -> list[Schedule]:
    """``count`` schedules as Hypothesis draws them for ``seed`` (the same list every time)."""
    drawn: list[Schedule] = []

    @hypothesis_seed(seed)
    @settings(max_examples=count, phases=(Phase.generate,), database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(crash_schedules(batches, max_faults=max_faults, min_faults=1, actions=actions, phases=phases))
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


def plan_schedules(batches: int, actions: tuple[str, ...], trials: int, seed: int, *,
                   max_faults: int = 2, examples: Iterable[str] = (),
                   phases: tuple[str, ...] = PHASES) -> list[list[str]]:
    """The fault schedules of ``trials`` trials: ``examples`` first, then coverage-first Hypothesis draws."""
    plan = [[parse_fault(s).spec for s in example.split()] for example in examples if example.strip()][:trials]
    if not actions:
        return plan
    rank = {a: len(ACTION_ORDER) - i for i, a in enumerate(ACTION_ORDER)}
    candidates = draw_schedules(batches, actions, max(50, CANDIDATES_PER_TRIAL * trials), seed, max_faults, phases)
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
