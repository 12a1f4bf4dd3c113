"""The loop that runs a stored campaign (chaos/campaign/stored.py) on a harness: every unfinished planned trial, each
judged and written as it ends, then a shrink of each row's violation, then the summary.

The store decides what runs (its plan) and what a run means (its summary); the runner only runs, so a
campaign can be run by another loop over the same store (a shard of the plan, another machine's
harness) and still be resumed, analysed and reported the same way. Shrinking is deterministic and takes
its finished candidates from disk, so a resumed shrink walks the same path.
"""

from __future__ import annotations

import errno
import json
import shutil
from dataclasses import replace
from typing import TYPE_CHECKING

from chaos.campaign.stored import LEARNED_STATE, Campaign, keeps_state, row_of_entry
from chaos.clusters.registry import channels
from chaos.errors import HarnessError
from chaos.guarantees import BATCH_DEPENDENT
from chaos.machine import interrupt
from chaos.machine.spark_versions import spark_option
from chaos.run.judge import judge
from chaos.scenario.names import short_name
from chaos.scenario.scenario import Scenario
from chaos.store.atomic import write_json
from chaos.store.evidence import late_writes
from chaos.store.records import load_history, load_result
from pipelines_under_test import resolve
from properties.planning import STATE_WINDOW, applicable_actions, covered_windows
from properties.shrink import shrink_schedule

if TYPE_CHECKING:
    from pathlib import Path

    from chaos.run.harness import Harness


class Progress:
    """Campaign events; the CLI's subclass draws rich progress bars. This one stays silent."""

    def begin(self, campaign: Campaign, already: int) -> None: ...

    def trial_start(self, trial_id: str, scenario: Scenario) -> None: ...

    def trial_done(self, trial_id: str, scenario: Scenario, verdict: dict, result: dict) -> None: ...

    def note(self, text: str) -> None: ...

    def end(self, summary: dict) -> None: ...


class Runner:
    """Runs ``campaign``'s unfinished trials on ``harness``, telling ``progress`` as it goes."""

    def __init__(self, campaign: Campaign, harness: Harness | None, progress: Progress | None = None) -> None:
        self.c = campaign
        self.harness = harness  # None: nothing is left to run (a finished campaign's shrinks and summary)
        self.progress = progress or Progress()

    def run(self) -> dict:
        """Run every unfinished planned trial, then shrink each violation; returns (and stores) the summary."""
        todo = [e for e in self.c.share if not self.c.finished(e["id"])]
        self.progress.begin(self.c, len(self.c.share) - len(todo))
        self.run_planned(todo)
        self.run_learned()
        if self.c.spec.shrink:
            for pipeline in list(self.c.rows()):
                self.shrink(pipeline)
        self.note_late_writes()
        summary = self.c.summarize()
        write_json(self.c.root / "summary.json", summary)
        self.progress.end(summary)
        return summary

    def run_planned(self, todo: list[dict]) -> None:
        """The planned trials not yet finished, one after another on this machine's harness."""
        for k, entry in enumerate(todo):
            interrupt.check()
            if self.budget_spent(len(todo) - k):
                break
            last = k == len(todo) - 1 and not self.c.spec.shrink  # nothing follows: no spare for it
            self.run_trial(entry["id"], Scenario(**entry["scenario"]), last)

    def run_learned(self) -> None:
        """One trial more for each row whose checkpoints showed a state store its plan did not open (a job as written
        whose code did not show it): a driver kill at ``state-commit``, the window the planner would have opened
        early had it known (``PREFIX-learned-state``, said as it starts; not on a shard, whose plan is fixed)."""
        if (self.c.data.get("shard") or "kill" not in self.c.spec.kinds or self.c.spec.schedules
                or self.c.spec.timing == "random"):  # a timing comparison keeps both modes' trials alike
            return
        for row, prefix in self.c.rows().items():
            interrupt.check()
            trial_id = f"{prefix}{LEARNED_STATE}"
            base = Scenario(**next(e for e in self.c.plan if row_of_entry(e) == row)["scenario"])
            if self.c.finished(trial_id) or self.harness is None or \
                    "state-commit" not in resolve(base.pipeline).phases or not self.state_unopened(row) \
                    or self.budget_spent(1):
                continue
            fault = f"kill-driver@{max(1, base.batches // 2)}:{STATE_WINDOW.split(':')[1]}"
            self.progress.note(f"{short_name(row)} keeps state (its checkpoints hold state/) and no trial opened "
                               f"{STATE_WINDOW}: one trial more, {fault}")
            self.run_trial(trial_id, replace(base, faults=[fault]))

    def state_unopened(self, row: str) -> bool:
        """Whether the row's finished trials show a state store (``state/`` in a checkpoint) and its plan put no
        fault in the state store's window (a planned one that did not fire is the plan's, not a window it missed)."""
        planned = [f for e in self.c.plan if row_of_entry(e) == row for f in e["scenario"]["faults"]]
        if STATE_WINDOW in covered_windows(planned):
            return False
        finished = [t for t in self.c.trial_ids() if self.c.row_of(t) == row and self.c.finished(t)]
        return any(keeps_state(self.c.trial_dir(t)) for t in finished)

    def budget_spent(self, left: int) -> bool:
        """Whether ``--time-budget`` leaves no room for another planned trial (saying so, with ``left`` not run)."""
        budget = self.c.spec.time_budget_s
        reserved = self.shrink_reserve()
        if budget is None or self.c.elapsed() + reserved < budget:
            return False
        self.progress.note(f"time budget of {budget:.0f}s spent" + (f" ({reserved:.0f}s of it kept for shrinking)"
                                                                    if reserved else "")
                           + f": {left} planned trial(s) not run")
        return True

    def run_trial(self, trial_id: str, scenario: Scenario, last: bool = False) -> dict:
        """One trial of the campaign, run unless its result is stored, then judged: its verdict."""
        run_dir = self.c.trial_dir(trial_id)
        try:
            if not (run_dir / "result.json").exists():  # in flight when the harness died: start over
                if self.c.spec.timing == "random":
                    scenario = self.at_random_times(trial_id, scenario)
                self.progress.trial_start(trial_id, scenario)
                self.harness.trial(scenario, run_dir, last=last)
            elif self.c.spec.timing == "random":
                scenario = Scenario.load(run_dir / "scenario.json")  # the times it was given
            return self.finish_trial(trial_id, scenario)
        except HarnessError as exc:  # the harness's world failed it (Docker nodes: dockerd gone): no verdict
            raise HarnessError(f"{exc}; trial {trial_id} did not finish: `streamchaos campaign resume "
                               f"{self.c.root}` runs it again") from None
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            # Files are written whole or not at all (chaos.store.atomic): what was stored before is intact.
            raise HarnessError(f"no space left on device (ENOSPC) writing {exc.filename or run_dir}: trial "
                               f"{trial_id} did not finish; free space, then `streamchaos campaign resume "
                               f"{self.c.root}` runs it again") from None

    def at_random_times(self, trial_id: str, scenario: Scenario) -> Scenario:
        """``--timing random``: the trial's faults at uniform times over T, the seconds its row's trial with the
        same events and no fault took (run once, kept in ``timing/``)."""
        from chaos.scenario.random_times import at_random_times, timed_seed

        prefix = trial_id.rsplit("-", 1)[0]
        measured = self.c.root / "timing" / f"{prefix}.json"
        if not measured.exists():
            run_dir = self.c.root / "timing" / prefix
            shutil.rmtree(run_dir, ignore_errors=True)  # a measurement the harness did not finish
            self.progress.note(f"{prefix}: a trial with no fault first, to time the random faults over")
            result = self.harness.trial(replace(scenario, faults=[]), run_dir)
            write_json(measured, {"seconds": result["seconds"], "events": scenario.events,
                                  "batches": result.get("batches")})
        seconds = json.loads(measured.read_text())["seconds"]
        return replace(scenario, faults=at_random_times(scenario.faults, seconds, timed_seed(scenario.seed)))

    def finish_trial(self, trial_id: str, scenario: Scenario) -> dict:
        """A trial whose directory is complete: judged, told, and the summary so far stored."""
        run_dir = self.c.trial_dir(trial_id)
        judge(run_dir)
        verdict = self.c.verdict_of(trial_id)
        self.progress.trial_done(trial_id, scenario, verdict, load_result(run_dir))
        self.note_late_writes(skip=trial_id)
        write_json(self.c.root / "summary.json", self.c.summarize())
        return verdict

    def note_late_writes(self, skip: str | None = None) -> list[str]:
        """Re-check every finished trial whose live sink changed after it was judged (chaos/store/evidence.py): the
        verdict stays the one of its frozen sink, verdict.json gains ``late_writes``, and the campaign says so."""
        found = []
        for trial_id in self.c.trial_ids():
            run_dir = self.c.trial_dir(trial_id)
            if trial_id == skip or not self.c.finished(trial_id):
                continue
            late = late_writes(run_dir)  # a few stat calls; the verdict is read only when something changed
            if late is None or _same_files(late, self.c.verdict_of(trial_id).get("late_writes")):
                continue
            again = judge(run_dir)
            found.append(trial_id)
            rows = (again.get("late_writes") or {}).get("rows")
            self.progress.note(f"{trial_id}: its sink changed after the trial ended ("
                               + (f"{rows:+d} rows" if isinstance(rows, int) else "files changed")
                               + f"); the verdict stays {again['verdict']}, judged from the sink as the trial ended it")
        return found

    def shrink_reserve(self) -> float:
        """Seconds of a ``--time-budget`` kept for shrinking: once a violation is found, room for the shrink's
        trials at the campaign's mean trial time (at most half the budget), so a budget never drops it."""
        budget = self.c.spec.time_budget_s
        if budget is None or not self.c.spec.shrink:
            return 0.0
        facts = [f for e in self.c.plan if (f := self.c.facts(e["id"])) is not None]
        if not any(meets is False for meets, _ in facts):
            return 0.0
        return min(budget / 2, self.c.spec.shrink_trials * self.c.mean_seconds())

    def replay(self, scenario: Scenario) -> str:
        """The command that runs ``scenario`` again, ``--spark`` in it where the campaign ran another Spark."""
        return scenario.command(spark_option(self.c.spec.spark))

    def phases_seen(self, row: str, phases: tuple[str, ...]) -> tuple[str, ...]:
        """Of ``phases``, those the row's finished trials reported: a job as written declares every phase it may
        reach (``state-commit`` too, unknown before it runs), and a shrink candidate at a phase its batches never
        reach cannot fire; it would cost a real trial for nothing."""
        seen = set()
        for trial_id in self.c.trial_ids():
            if self.c.row_of(trial_id) == row and self.c.finished(trial_id):
                seen |= {r["phase"] for r in load_history(self.c.trial_dir(trial_id)) if r["kind"] == "phase"}
        return tuple(p for p in phases if p in seen) or phases

    def batch_dependent(self, prefix: str, base: Scenario, cache: dict, record_path: Path, expected: str,
                        origin_id: str) -> bool:
        """Before a job judged against Spark's answer is shrunk: the same stream with no fault (``-control``, kept
        in the shrink's cache as its empty schedule). If that differs from the answer too, the job's output depends
        on how the stream is cut into micro-batches: said once for the job, no fault is blamed, nothing shrunk."""
        trial_id = f"{prefix}-control"
        control = replace(base, faults=[])
        verdict = self.c.verdict_of(trial_id) if self.c.finished(trial_id) else self.run_trial(trial_id, control)
        cache[()] = (trial_id, verdict)
        if verdict["verdict"] != BATCH_DEPENDENT:
            return False
        write_json(record_path, {
            "pipeline": base.pipeline, "declared": expected, "from": origin_id, "from_faults": base.specs,
            "minimal": [], "minimal_trial": trial_id, "verdict": BATCH_DEPENDENT, "path": [],
            "command": self.replay(control), "batch_dependent": True})
        self.progress.note(f"{short_name(base.pipeline)} differs from Spark's one-batch answer without any fault "
                           f"({trial_id}): its output depends on how the stream is cut into micro-batches, so no "
                           "fault is blamed and nothing is shrunk")
        return True

    def shrink(self, row: str) -> None:
        """Shrink the row's smallest violating schedule to a minimal one (shrinks/<prefix>.json)."""
        progress = self.progress
        prefix = self.c.rows()[row]
        record_path = self.c.root / "shrinks" / f"{prefix}.json"
        if record_path.exists():
            return
        violating = []
        pipeline = next(e["pipeline"] for e in self.c.plan if row_of_entry(e) == row)
        for entry in self.c.plan:
            v = self.c.verdict_of(entry["id"]) if row_of_entry(entry) == row else None
            if v and v["meets"] is False:
                violating.append((len(entry["scenario"]["faults"]), entry["id"], entry))
        learned = f"{prefix}{LEARNED_STATE}"
        if self.c.finished(learned) and (self.c.verdict_of(learned) or {}).get("meets") is False:
            violating.append((1, learned, {"scenario": Scenario.load(self.c.trial_dir(learned) /
                                                                     "scenario.json").to_dict()}))
        if not violating:
            return
        _, origin_id, origin = min(violating, key=lambda t: (t[0], t[1]))
        base = Scenario(**origin["scenario"])
        # Finished shrink trials of this pipeline are the cache: a resumed shrink reruns none of them.
        cache: dict[tuple[str, ...], tuple[str, dict]] = {}
        for trial_id in self.c.trial_ids():
            if trial_id.startswith(f"{prefix}-shrink-") and self.c.finished(trial_id):
                s = Scenario.load(self.c.trial_dir(trial_id) / "scenario.json")
                cache[tuple(s.specs)] = (trial_id, self.c.verdict_of(trial_id))
        path: list[dict] = []
        counter = iter(range(len(cache), 10_000))

        def violates(faults: list[str]) -> bool:
            key = tuple(faults)
            if key not in cache:
                trial_id = f"{prefix}-shrink-{next(counter):02d}"
                cache[key] = (trial_id, self.run_trial(trial_id, replace(base, faults=list(faults))))
            trial_id, verdict = cache[key]
            bad = verdict["meets"] is False
            path.append({"trial": trial_id, "faults": list(faults), "verdict": verdict["verdict"], "violates": bad})
            return bad

        resolved = resolve(pipeline)
        expected = self.c.spec.expect or resolved.guarantee
        if resolved.spark_oracle and self.batch_dependent(prefix, base, cache, record_path, expected, origin_id):
            return
        source, sink = channels(resolved, self.c.spec.cluster)
        actions = applicable_actions(self.c.spec.kinds, sink_channel=sink,
                                     database=resolved.database, source_channel=source,
                                     kafka=resolved.kafka, kafka_fed=resolved.kafka_fed,
                                     refused=self.c.spec.refused())
        candidates = self.c.spec.shrink_trials
        if self.c.spec.time_budget_s is not None:
            left = self.c.spec.time_budget_s - self.c.elapsed()
            candidates = min(candidates, max(0, int(left // max(self.c.mean_seconds(), 1e-3))))
        if candidates == 0 and not cache:
            write_json(record_path, {
                "pipeline": pipeline, "declared": expected, "from": origin_id, "from_faults": base.specs,
                "minimal": base.specs, "minimal_trial": origin_id, "verdict": self.c.verdict_of(origin_id)["verdict"],
                "path": [], "command": self.replay(base),
                "skipped": "the time budget was spent before the shrink"})
            progress.note(f"shrink of {short_name(row)} skipped: the time budget is spent; unshrunk counterexample "
                          f"{' '.join(base.specs)} ({origin_id}), replay: {self.replay(base)}")
            return
        progress.note(f"shrinking {origin_id} ({', '.join(base.specs)}) for {short_name(row)}")
        minimal = shrink_schedule(base.specs, violates, actions=actions, budget=max(candidates, len(cache)),
                                  phases=self.phases_seen(row, resolved.phases))
        minimal_trial = origin_id if minimal == base.specs else next(
            p["trial"] for p in path if p["faults"] == minimal and p["violates"])
        verdict = self.c.verdict_of(minimal_trial)
        scenario = replace(base, faults=minimal)
        write_json(record_path, {
            "pipeline": pipeline, "declared": expected, "from": origin_id,
            "from_faults": base.specs, "minimal": minimal, "minimal_trial": minimal_trial,
            "verdict": verdict["verdict"], "path": path, "command": self.replay(scenario),
        })


def _same_files(late: dict, stored: dict | None) -> bool:
    """Late writes already recorded in verdict.json (no re-check needed)."""
    return stored is not None and all(late.get(k) == stored.get(k) for k in ("changed", "added", "removed"))
