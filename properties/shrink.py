"""Search crash schedules for a violation of a declared guarantee, and shrink it (Hypothesis-driven).

Hypothesis generates schedules from ``crash_schedules`` and, once one violates the guarantee,
shrinks it toward fewer faults, earlier batches, simpler actions and earlier phases; every
candidate is a real trial. Trials are expensive (a driver kill costs ~25 s here), so:

* results are cached by schedule (Hypothesis may ask for the same one twice);
* ``max_trials`` bounds the real trials; past it, untried schedules count as "no violation",
  which ends the search or stops the shrink early with the smallest violation found so far.

The result carries the minimal scenario and its replayable ``streamchaos trial ...`` command.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import NoSuchExample

from chaos.errors import UserError
from chaos.scenario.faults import DAMAGE_MODES, PHASES, Fault, parse_fault
from chaos.scenario.scenario import Scenario
from properties.strategies import ACTION_ORDER, ALL_ACTIONS, Schedule, StreamSpec, crash_schedules
from properties.verdicts import meets

if TYPE_CHECKING:
    from pipelines_under_test import Pipeline

# A trial runner: scenario in, the checker's verdict report (``properties.check.check_run``) out.
TrialRunner = Callable[[Scenario], dict]


@dataclass
class Search:
    """What a search tried and found."""

    pipeline: str
    declared: str
    trials: list[dict] = field(default_factory=list)  # {faults, verdict, violates}
    minimal: Scenario | None = None
    verdict: str | None = None

    @property
    def command(self) -> str | None:
        return self.minimal.command() if self.minimal else None

    def describe(self) -> str:
        if self.minimal is None:
            return (f"no schedule of {len(self.trials)} trial(s) violated {self.declared} "
                    f"for {self.pipeline}")
        return (f"{self.pipeline} violates {self.declared}: {self.verdict} under "
                f"{', '.join(self.minimal.specs) or 'no fault'} (minimal after {len(self.trials)} trials)\n"
                f"replay: {self.command}")


def search_violation(
    pipeline: Pipeline,
    declared: str,
    stream: StreamSpec,
    run: TrialRunner,
    *,
    actions: tuple[str, ...] = ACTION_ORDER,
    max_faults: int = 2,
    max_trials: int = 12,
    seed: int = 0,
    harness: dict | None = None,
) -> Search:
    """Find a schedule under which ``pipeline`` does not meet ``declared``, shrunk to a minimal one. Its
    scenarios name it by ``pipeline.ref``."""
    name = pipeline.ref
    found = Search(name, declared)
    cache: dict[tuple[str, ...], bool] = {}
    phases = pipeline.phases  # only where its batches go: a fault elsewhere would never fire

    def violates(schedule: Schedule) -> bool:
        key = tuple(schedule.specs)
        if key in cache:
            return cache[key]
        if len(found.trials) >= max_trials:
            return False  # out of budget: keep the smallest violation found so far
        scenario = stream.scenario(name, schedule, **(harness or {}))
        report = run(scenario)
        bad = meets(report["verdict"], declared) is False
        found.trials.append({"faults": list(key), "verdict": report["verdict"], "violates": bad})
        cache[key] = bad
        if bad and (found.minimal is None or _simpler(scenario, found.minimal)):
            found.minimal, found.verdict = scenario, report["verdict"]
        return bad

    try:
        minimal = find(
            crash_schedules(stream.batches, max_faults=max_faults, actions=actions, phases=phases),
            violates,
            settings=settings(max_examples=max_trials * 4, deadline=None, database=None,
                              phases=(Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck)),
            random=random.Random(seed),
        )
    except NoSuchExample:
        return found
    found.minimal = stream.scenario(name, minimal, **(harness or {}))
    found.verdict = next(t["verdict"] for t in found.trials if t["faults"] == minimal.specs)
    return found


def _simpler(a: Scenario, b: Scenario) -> bool:
    return (len(a.faults), a.specs) < (len(b.faults), b.specs)


def harness_runner(harness, out_dir: Path, pipeline: Pipeline) -> TrialRunner:
    """Run each scenario of ``pipeline`` on ``harness`` (one cluster for the whole search) and check it."""
    from properties.check import check_run

    counter = iter(range(1_000_000))

    def run(scenario: Scenario) -> dict:
        run_dir = Path(out_dir) / f"trial-{next(counter):03d}"
        harness.trial(scenario, run_dir)
        return check_run(run_dir, pipeline)

    return run


def shrink_schedule(
    faults: list[str],
    violates: Callable[[list[str]], bool],
    *,
    actions: tuple[str, ...] = ACTION_ORDER,
    budget: int = 6,
    phases: tuple[str, ...] = PHASES,
) -> list[str]:
    """Shrink a violating schedule greedily, in Hypothesis' order, each candidate a real trial.

    Campaigns start from a schedule they already saw fail, which ``hypothesis.find`` cannot take as
    a starting point; this pass makes the same moves Hypothesis' shrinker makes on
    ``crash_schedules``: drop a fault, move it to an earlier batch, a simpler action (``ACTION_ORDER``)
    or an earlier phase. The first candidate that still violates is kept and the pass restarts;
    it ends when no move helps or after ``budget`` distinct candidates (deterministic: a campaign
    resumed with its finished trials as a cache walks the same path).
    """
    current = [parse_fault(f).spec for f in faults]
    seen = {tuple(current)}
    calls = 0
    improved = True
    while improved and calls < budget:
        improved = False
        for candidate in _simplifications(current, actions, phases):
            if calls >= budget:
                break
            if tuple(candidate) in seen:
                continue
            seen.add(tuple(candidate))
            calls += 1
            if violates(candidate):
                current, improved = candidate, True
                break
    return current


def _simplifications(faults: list[str], actions: tuple[str, ...], phases: tuple[str, ...] = PHASES):
    """Simpler neighbours of a schedule, most valuable first (fewer faults before smaller values)."""
    parsed = [parse_fault(f) for f in faults]
    for i in range(len(parsed)):
        yield [f.spec for j, f in enumerate(parsed) if j != i]
    for i, f in enumerate(parsed):
        for batch in dict.fromkeys((0, f.batch // 2, f.batch - 1)):
            if 0 <= batch < f.batch:
                yield _replace(parsed, i, Fault(f.action, batch, f.phase, f.args))
    for i, f in enumerate(parsed):
        for action in ALL_ACTIONS[: ALL_ACTIONS.index(f.action)]:
            if action in actions and action.split("-")[0] == f.action.split("-")[0]:
                yield _replace(parsed, i, Fault(action, f.batch, f.phase, ()))
    for i, f in enumerate(parsed):
        if f.action == "damage-checkpoint":  # a simpler damage: DAMAGE_MODES is in shrink order
            for mode in DAMAGE_MODES[: DAMAGE_MODES.index(f.mode)]:
                yield _replace(parsed, i, Fault(f.action, f.batch, f.phase, (mode,)))
    for i, f in enumerate(parsed):
        for phase in PHASES[: PHASES.index(f.phase)]:
            if phase in phases:
                yield _replace(parsed, i, Fault(f.action, f.batch, phase, f.args))


def _replace(parsed: list[Fault], i: int, fault: Fault) -> list[str]:
    """``parsed`` with fault ``i`` replaced; a replacement that lands on another fault's (batch, phase)
    merges into it (that is the drop, already tried first)."""
    try:
        fault = parse_fault(fault.spec)  # the same validation a typed spec gets
    except UserError:
        return [f.spec for j, f in enumerate(parsed) if j != i]
    others = [f for j, f in enumerate(parsed) if j != i]
    if any((f.batch, f.phase) == (fault.batch, fault.phase) for f in others):
        return [f.spec for f in others]
    return [fault.spec if j == i else f.spec for j, f in enumerate(parsed)]
