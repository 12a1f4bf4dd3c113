"""Campaign progress on the terminal: a rich progress bar plus one line per finished trial.

The bar shows trials done, the current pipeline, faults fired, verdicts so far and time left; the
per-trial lines stay in the scrollback (and in CI logs, where no bar is drawn).
"""

from __future__ import annotations

import time
from collections import Counter

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from chaos.campaign.runner import Progress as CampaignProgress
from chaos.campaign.stored import LEARNED_STATE, Campaign
from chaos.scenario.scenario import Scenario


def trial_faults(scenario: Scenario, result: dict) -> str:
    """A trial's faults as its line prints them: each one that did not fire says so, and a trial none of whose
    faults fired says it counts as a no-fault trial."""
    if not scenario.faults:
        return "no fault"
    fired = {f["spec"] for f in result.get("faults", []) if f.get("fired")}
    text = " ".join(f if f in fired else f"{f} (not fired)" for f in scenario.specs)
    return text + (" = a no-fault trial" if not fired else "")


class RichProgress(CampaignProgress):
    def __init__(self, console: Console) -> None:
        self.console = console
        self.verdicts: Counter[str] = Counter()
        self.fired = 0
        self.bar: Progress | None = None
        self.task = None
        self.started = time.monotonic()
        self.budget: float | None = None

    def begin(self, campaign: Campaign, already: int) -> None:
        self.budget = campaign.spec.time_budget_s
        self.started = time.monotonic() - campaign.elapsed()
        for trial_id in campaign.trial_ids():
            v = campaign.verdict_of(trial_id)
            if v:
                self.verdicts[v["verdict"]] += 1
        self.bar = Progress(TextColumn("[bold]trials"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[status]}"), TimeElapsedColumn(),
                            console=self.console, transient=True)
        self.bar.start()
        self.task = self.bar.add_task("trials", total=len(campaign.share), completed=already, status="")
        if already:
            self.console.print(f"resuming: {already} of {len(campaign.share)} planned trials already finished")

    def _status(self, current: str) -> str:
        verdicts = " ".join(f"{v}:{n}" for v, n in sorted(self.verdicts.items()))
        left = ""
        if self.budget is not None:
            left = f" · {max(0, self.budget - (time.monotonic() - self.started)) / 60:.0f} min left"
        return f"{current} · faults fired {self.fired} · {verdicts or 'no verdict yet'}{left}"

    def trial_start(self, trial_id: str, scenario: Scenario) -> None:
        if self.bar:
            self.bar.update(self.task, status=self._status(f"{trial_id} ({' '.join(scenario.specs) or 'no fault'})"))

    def trial_done(self, trial_id: str, scenario: Scenario, verdict: dict, result: dict) -> None:
        self.verdicts[verdict["verdict"]] += 1
        self.fired += sum(1 for f in result.get("faults", []) if f.get("fired"))
        meets = {True: "meets", False: "VIOLATES", None: "inconclusive"}[verdict["meets"]]
        self.console.print(f"  {trial_id}: {trial_faults(scenario, result)} -> [bold]{verdict['verdict']}"
                           f"[/] ({meets} {verdict['declared']}) {result.get('seconds')}s")
        if self.bar and "-shrink-" not in trial_id and not trial_id.endswith(LEARNED_STATE):
            self.bar.advance(self.task)
            self.bar.update(self.task, status=self._status(trial_id))

    def note(self, text: str) -> None:
        self.console.print(f"  {text}")

    def end(self, summary: dict) -> None:
        if self.bar:
            self.bar.stop()
            self.bar = None
