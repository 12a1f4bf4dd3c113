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

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import NoSuchExample

from chaos.scenario import Scenario
from properties.strategies import ACTION_ORDER, Schedule, StreamSpec, crash_schedules
from properties.verdicts import meets

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
                f"{', '.join(self.minimal.faults) or 'no fault'} (minimal after {len(self.trials)} trials)\n"
                f"replay: {self.command}")


def search_violation(
    pipeline: str,
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
    """Find a schedule under which ``pipeline`` does not meet ``declared``, shrunk to a minimal one."""
    found = Search(pipeline, declared)
    cache: dict[tuple[str, ...], bool] = {}

    def violates(schedule: Schedule) -> bool:
        key = tuple(schedule.specs)
        if key in cache:
            return cache[key]
        if len(found.trials) >= max_trials:
            return False  # out of budget: keep the smallest violation found so far
        scenario = stream.scenario(pipeline, schedule, **(harness or {}))
        report = run(scenario)
        bad = meets(report["verdict"], declared) is False
        found.trials.append({"faults": list(key), "verdict": report["verdict"], "violates": bad})
        cache[key] = bad
        if bad and (found.minimal is None or _simpler(scenario, found.minimal)):
            found.minimal, found.verdict = scenario, report["verdict"]
        return bad

    try:
        minimal = find(
            crash_schedules(stream.batches, max_faults=max_faults, actions=actions),
            violates,
            settings=settings(max_examples=max_trials * 4, deadline=None, database=None,
                              phases=(Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck)),
            random=random.Random(seed),
        )
    except NoSuchExample:
        return found
    found.minimal = stream.scenario(pipeline, minimal, **(harness or {}))
    found.verdict = next(t["verdict"] for t in found.trials if t["faults"] == minimal.specs)
    return found


def _simpler(a: Scenario, b: Scenario) -> bool:
    return (len(a.faults), a.faults) < (len(b.faults), b.faults)


def harness_runner(harness, out_dir: Path) -> TrialRunner:
    """Run each scenario on ``harness`` (one cluster for the whole search) and check it."""
    from properties.check import check_run

    counter = iter(range(1_000_000))

    def run(scenario: Scenario) -> dict:
        run_dir = Path(out_dir) / f"trial-{next(counter):03d}"
        harness.trial(scenario, run_dir)
        return check_run(run_dir)

    return run
