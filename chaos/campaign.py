"""A campaign: many trials over catalogue pipelines, stored as one run directory that survives a crash.

The flow is Jepsen's ``test-all`` with Hypothesis' replayable failures::

    campaign.json       the spec and the whole plan (every trial's replayable scenario), written first
    trials/<ID>/        one trial directory each (scenario, events, history, logs, checkpoint, sink,
                        result.json, verdict.json); a trial counts as finished once verdict.json exists
    shrinks/<P>.json    per violating pipeline: the shrink path and the minimal counterexample
    summary.json        per pipeline: declared vs measured, coverage, time; rewritten after each trial
    report.html         the offline consistency report (``reports.html``)

Each trial is written as it ends, so a harness that dies loses at most the trial in flight, which
``resume`` reruns from scratch; finished trials are never run twice. Shrinking is deterministic
and takes its finished candidates from disk, so a resumed shrink walks the same path.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from chaos import interrupt
from chaos.atomic import write_json
from chaos.errors import UserError
from chaos.scenario import Scenario
from chaos.spec import parse_fault
from pipelines_under_test import resolve
from pipelines_under_test.base import GUARANTEES

FORMAT = "streamchaos-campaign"
VERSION = 1
MAX_PLANNED_PER_PIPELINE = 500  # a time-budgeted campaign plans this many and stops when time is up

EXIT_OK, EXIT_VIOLATION, EXIT_INCONCLUSIVE = 0, 1, 3


@dataclass
class CampaignSpec:
    """What the user asked for (``campaign run`` options); stored so ``resume`` needs nothing else."""

    pipelines: list[str]
    expect: str | None = None  # judge every pipeline against this guarantee instead of its declared one
    kinds: list[str] = field(default_factory=lambda: ["kill"])
    trials: int | None = 3
    time_budget_s: float | None = None
    seed: int = 0
    events: int = 2000
    events_per_batch: int = 200
    max_faults: int = 2
    shrink: bool = True
    shrink_trials: int = 6
    examples: list[str] = field(default_factory=list)  # schedules tried first, like Hypothesis' @example
    # Per pipeline, the exact schedules to run instead of drawn ones (``streamchaos conformance``).
    schedules: dict[str, list[str]] | None = None
    cluster: str = "standalone"
    workers: int = 2
    # Configuration matrix (``--conf KEY=V1,V2``, chaos/queryconf.py): every pipeline runs under every combination,
    # each a variant with its own row (verdict, counterexample) and the same schedules and seeds.
    conf: dict[str, list[str]] | None = None
    # The PySpark every trial runs on (``streamchaos --spark VERSION``; set at creation): a resume on another
    # one would mix two Sparks in one campaign's verdicts.
    spark: str | None = None

    @property
    def on_nodes(self) -> bool:
        """The trials run on Docker nodes: node faults apply, worker kills not."""
        from chaos.cluster import on_nodes

        return on_nodes(self.cluster)


def slug(name: str) -> str:
    """A pipeline's name as a trial id's prefix: a user's job by its entry point and a digest of its options."""
    entry, _, options = name.partition("?")
    tail = f"-{hashlib.sha256(options.encode()).hexdigest()[:6]}" if options else ""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", entry) + tail


def parse_time_budget(text: str | None) -> float | None:
    """``30m``, ``90s``, ``1h`` -> seconds."""
    if text is None:
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smh])", text.strip())
    if not match:
        raise UserError(f"--time-budget {text!r}: use a number with a unit, e.g. 90s, 30m or 2h")
    return float(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]


class Campaign:
    """A campaign directory: its plan, its finished trials, and how to continue it."""

    def __init__(self, root: Path, data: dict) -> None:
        self.root = Path(root)
        self.data = data
        self.spec = CampaignSpec(**data["spec"])
        self._memo: dict[str, tuple[bool | None, float]] = {}  # finished trials' (meets, seconds)
        self._rows: dict[str, str] | None = None  # row -> trial id prefix, and back (the plan never changes)
        self._row_by_prefix: dict[str, str] | None = None

    # -- creation and loading ---------------------------------------------------------------------
    @classmethod
    def create(cls, root: Path, spec: CampaignSpec, owns_workers: bool | None = None) -> Campaign:
        from chaos.queryconf import label as conf_label
        from chaos.queryconf import variants
        from properties.planning import (
            applicable_actions,
            canonical_windows,
            plan_schedules,
            stable_seed,
            trial_seeds,
            window_names,
        )

        root = Path(root)
        if (root / "campaign.json").exists():
            raise UserError(f"{root} already holds a campaign: continue it with `streamchaos campaign resume "
                            f"{root}` or choose another --out")
        if root.exists() and any(root.iterdir()):
            raise UserError(f"{root} exists and is not empty: choose another --out")
        if not spec.pipelines:
            raise UserError("no pipeline given: use --pipeline NAME (repeatable); `streamchaos pipelines` lists them")
        if spec.trials is None and spec.time_budget_s is None:
            raise UserError("give --trials N or --time-budget (e.g. 30m)")
        if spec.expect is not None and spec.expect not in GUARANTEES:
            raise UserError(f"--expect {spec.expect!r}: use one of {', '.join(GUARANTEES)}")
        if spec.trials is not None and spec.trials < 1:
            raise UserError(f"--trials must be at least 1, got {spec.trials}")
        if "node" in spec.kinds and not spec.on_nodes:
            raise UserError("--faults node needs --cluster docker (node faults act on containers)")
        if owns_workers is None:
            owns_workers = spec.cluster == "standalone"
        per_pipeline = spec.trials or MAX_PLANNED_PER_PIPELINE
        conf_variants = variants(spec.conf)
        plans, skipped, windows = {}, [], {}
        for name in dict.fromkeys(spec.pipelines):
            pipeline = resolve(name)  # unknown pipeline: one line, exit 2, nothing written
            if pipeline.database and not _postgres_available():
                skipped.append({"pipeline": name, "reason": "needs PostgreSQL server binaries (initdb, pg_ctl): "
                                "install postgresql or set PG_BINDIR"})
                continue
            if reason := pipeline.unavailable():
                skipped.append({"pipeline": name, "reason": reason})
                continue
            actions = applicable_actions(spec.kinds, sink_channel=pipeline.sink_channel,
                                         database=pipeline.database, owns_workers=owns_workers,
                                         source_channel=not pipeline.own_source, nodes=spec.on_nodes)
            fixed = (spec.schedules or {}).get(name)
            if not actions and not spec.examples and fixed is None:
                skipped.append({"pipeline": name, "reason": f"no fault of kind(s) {','.join(spec.kinds)} applies"})
                continue
            template = Scenario(pipeline=name, events=spec.events, events_per_batch=spec.events_per_batch,
                                cluster=spec.cluster, workers=spec.workers, **pipeline.stream_defaults)
            if fixed is not None:
                schedules = [[parse_fault(f).spec for f in s.split()] for s in fixed]
            else:
                schedules = plan_schedules(template.batches, actions, per_pipeline, stable_seed(spec.seed, name),
                                           max_faults=spec.max_faults, examples=spec.examples,
                                           phases=pipeline.phases)
            # The canonical windows this pipeline can take: the summary says which its fired faults opened.
            seeds = trial_seeds(spec.seed, name, len(schedules))
            for j, variant in enumerate(conf_variants):
                row = name if len(conf_variants) == 1 else f"{name} [{conf_label(variant)}]"
                prefix = slug(name) if len(conf_variants) == 1 else f"{slug(name)}-c{j}"
                windows[row] = window_names(canonical_windows(actions, pipeline.phases, spec.max_faults))
                plans[row] = [
                    {"id": f"{prefix}-{k:03d}", "pipeline": name, "row": row,
                     "scenario": asdict(Scenario(**{**asdict(template), "seed": s, "faults": faults,
                                                    "conf": variant}))}
                    for k, (faults, s) in enumerate(zip(schedules, seeds, strict=True))
                ]
        # Round robin over pipelines: a time budget is shared fairly.
        plan = [entry for group in _round_robin(list(plans.values())) for entry in group]
        from chaos.sparkenv import current_version

        spec = replace(spec, spark=spec.spark or current_version())
        data = {"format": FORMAT, "version": VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
                "spec": asdict(spec), "plan": plan, "skipped": skipped, "windows": windows}
        write_json(root / "campaign.json", data)
        return cls(root, data)

    @classmethod
    def load(cls, root: Path) -> Campaign:
        root = Path(root)
        if not root.is_dir():
            raise UserError(f"{root} is not a directory: give a campaign directory (the --out of `campaign run`)")
        from chaos.stored import all_of, dataclass_fields, load_json, require, require_each

        path = root / "campaign.json"
        if not path.exists():
            raise UserError(f"{root} is not a campaign directory (no campaign.json)")
        fix = "it is damaged; re-run the campaign"
        data = require(load_json(path, fix), {}, str(path), fix)
        if data.get("format") != FORMAT:
            raise UserError(f"{root}/campaign.json is not a streamchaos campaign file")
        if data.get("version") != VERSION:
            raise UserError(f"{path} was written by campaign format version {data.get('version')}; this streamchaos "
                            f"reads version {VERSION}: re-run the campaign with this version")
        require(data, {"spec": (dict,), "plan": (list,), "skipped": (list,), "windows": (dict,)}, str(path), fix)
        require_each(data["skipped"], {"pipeline": (str,), "reason": (str,)}, f"{path}: skipped", fix)
        if not all(isinstance(w, list) and all_of(w, (str,)) for w in data["windows"].values()):
            raise UserError(f"{path}: windows holds something other than lists of names: {fix}")
        dataclass_fields(CampaignSpec, data["spec"], f"{path}: spec", fix)
        unknown = set(data["spec"]) - set(CampaignSpec.__dataclass_fields__)
        if unknown:
            raise UserError(f"{path} has an unknown spec field {sorted(unknown)[0]!r}: re-run the campaign")
        require_each(data["plan"], {"id": (str,), "pipeline": (str,), "scenario": (dict,)}, f"{path}: plan", fix)
        for k, entry in enumerate(data["plan"]):
            dataclass_fields(Scenario, entry["scenario"], f"{path}: plan[{k}].scenario", fix)
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", entry["id"]) or entry["id"] in (".", ".."):
                raise UserError(f"{path}: plan id {entry['id'][:60]!r} is not a trial directory name: {fix}")
            if not isinstance(entry.get("row"), str | None):  # absent in older files: the pipeline's row
                raise UserError(f"{path}: plan[{k}].row is not a row name: {fix}")
        return cls(root, data)

    # -- state ------------------------------------------------------------------------------------
    @property
    def plan(self) -> list[dict]:
        return self.data["plan"]

    def trial_dir(self, trial_id: str) -> Path:
        return self.root / "trials" / trial_id

    def finished(self, trial_id: str) -> bool:
        return (self.trial_dir(trial_id) / "verdict.json").exists()

    def trial_ids(self) -> list[str]:
        """Planned trials, then shrink trials, as stored."""
        ids = [e["id"] for e in self.plan]
        shrink_dir = self.root / "trials"
        if shrink_dir.is_dir():
            ids += sorted(p.name for p in shrink_dir.iterdir() if "-shrink-" in p.name)
        return ids

    def elapsed(self) -> float:
        """Trial time spent so far (from stored results: survives a resume)."""
        total = 0.0
        for trial_id in self.trial_ids():
            if (self.trial_dir(trial_id) / "result.json").exists():
                total += self._seconds(trial_id)
        return total

    def verdict_of(self, trial_id: str) -> dict | None:
        """The checker's verdict, judged against the campaign's expectation (``--expect``) when it has one."""
        from chaos.stored import load_verdict
        from properties.verdicts import meets

        if not (self.trial_dir(trial_id) / "verdict.json").exists():
            return None
        v = load_verdict(self.trial_dir(trial_id))
        if self.spec.expect:
            v["declared"] = self.spec.expect
            v["meets"] = meets(v["verdict"], self.spec.expect)
        return v

    # -- running ----------------------------------------------------------------------------------
    def require_spark(self) -> None:
        """Refuse to run this campaign's trials on another PySpark than the one it was created on."""
        from chaos.sparkenv import current_version

        if self.spec.spark and self.spec.spark != current_version():
            raise UserError(f"{self.root} runs on PySpark {self.spec.spark}, this is {current_version()}: "
                            f"run it with `streamchaos --spark {self.spec.spark} ...`")

    def run(self, harness, progress: Progress | None = None) -> dict:
        """Run every unfinished planned trial, then shrink each violation; returns (and stores) the summary."""
        progress = progress or Progress()
        budget = self.spec.time_budget_s
        todo = [e for e in self.plan if not self.finished(e["id"])]
        progress.begin(self, len(self.plan) - len(todo))
        for k, entry in enumerate(todo):
            interrupt.check()
            reserved = self.shrink_reserve()
            if budget is not None and self.elapsed() + reserved >= budget:
                progress.note(f"time budget of {budget:.0f}s spent" + (f" ({reserved:.0f}s of it kept for shrinking)"
                                                                       if reserved else "")
                              + f": {len(todo) - k} planned trial(s) not run")
                break
            last = k == len(todo) - 1 and not self.spec.shrink  # nothing follows: no spare for it
            self.run_trial(harness, entry["id"], Scenario(**entry["scenario"]), progress, last)
        if self.spec.shrink:
            for pipeline in self._pipelines():
                self._shrink(harness, pipeline, progress)
        self.note_late_writes(progress)
        summary = self.summarize()
        write_json(self.root / "summary.json", summary)
        progress.end(summary)
        return summary

    def run_trial(self, harness, trial_id: str, scenario: Scenario, progress: Progress, last: bool = False) -> dict:
        from chaos.stored import load_result
        from pipelines_under_test import for_run
        from properties.check import check_run

        run_dir = self.trial_dir(trial_id)
        if not (run_dir / "result.json").exists():  # in flight when the harness died: start over
            progress.trial_start(trial_id, scenario)
            harness.trial(scenario, run_dir, last=last)
        check_run(run_dir, for_run(run_dir))
        verdict = self.verdict_of(trial_id)
        progress.trial_done(trial_id, scenario, verdict, load_result(run_dir))
        self.note_late_writes(progress, skip=trial_id)
        write_json(self.root / "summary.json", self.summarize())
        return verdict

    def note_late_writes(self, progress: Progress, skip: str | None = None) -> list[str]:
        """Re-check every finished trial whose live sink changed after it was judged (chaos/evidence.py): the
        verdict stays the one of its frozen sink, verdict.json gains ``late_writes``, and the campaign says so."""
        from chaos.evidence import late_writes
        from pipelines_under_test import for_run
        from properties.check import check_run

        found = []
        for trial_id in self.trial_ids():
            run_dir = self.trial_dir(trial_id)
            if trial_id == skip or not self.finished(trial_id):
                continue
            late = late_writes(run_dir)  # a few stat calls; the verdict is read only when something changed
            if late is None or _same_files(late, self.verdict_of(trial_id).get("late_writes")):
                continue
            again = check_run(run_dir, for_run(run_dir))
            found.append(trial_id)
            rows = (again.get("late_writes") or {}).get("rows")
            progress.note(f"{trial_id}: its sink changed after the trial ended ("
                          + (f"{rows:+d} rows" if isinstance(rows, int) else "files changed")
                          + f"); the verdict stays {again['verdict']}, judged from the sink as the trial ended it")
        return found

    def shrink_reserve(self) -> float:
        """Seconds of a ``--time-budget`` kept for shrinking: once a violation is found, room for the shrink's
        trials at the campaign's mean trial time (at most half the budget), so a budget never drops it."""
        budget = self.spec.time_budget_s
        if budget is None or not self.spec.shrink:
            return 0.0
        facts = [f for e in self.plan if (f := self._facts(e["id"])) is not None]
        if not any(meets is False for meets, _ in facts):
            return 0.0
        return min(budget / 2, self.spec.shrink_trials * self._mean_seconds())

    def _facts(self, trial_id: str) -> tuple[bool | None, float] | None:
        """(meets, seconds) of a finished trial, read once (a finished trial's verdict does not change)."""
        memo = self._memo
        if trial_id not in memo:
            v = self.verdict_of(trial_id)
            if v is None:
                return None
            memo[trial_id] = (v["meets"], self._seconds(trial_id))
        return memo[trial_id]

    def _seconds(self, trial_id: str) -> float:
        """A finished trial's wall time (a damaged result.json is one clear line)."""
        from chaos.stored import load_result

        return float(load_result(self.trial_dir(trial_id))["seconds"])

    def _mean_seconds(self) -> float:
        seconds = [f[1] for t in self.trial_ids() if (f := self._facts(t)) is not None]
        return sum(seconds) / len(seconds) if seconds else 1.0

    def rows(self) -> dict[str, str]:
        """The summary's rows in plan order (a pipeline, or a pipeline under one configuration variant), each
        with the prefix of its trial ids (its shrink trials and record are named by it too)."""
        if self._rows is None:
            self._rows = {_row(e): e["id"].rsplit("-", 1)[0] for e in self.plan}
        return self._rows

    def row_of(self, trial_id: str) -> str | None:
        """The row a planned or shrink trial belongs to."""
        if self._row_by_prefix is None:
            self._row_by_prefix = {p: row for row, p in self.rows().items()}
        prefix = trial_id.split("-shrink-")[0] if "-shrink-" in trial_id else trial_id.rsplit("-", 1)[0]
        return self._row_by_prefix.get(prefix)

    def _pipelines(self) -> list[str]:
        return list(self.rows())

    def _shrink(self, harness, row: str, progress: Progress) -> None:
        from properties.planning import applicable_actions
        from properties.shrink import shrink_schedule

        prefix = self.rows()[row]
        record_path = self.root / "shrinks" / f"{prefix}.json"
        if record_path.exists():
            return
        violating = []
        pipeline = next(e["pipeline"] for e in self.plan if _row(e) == row)
        for entry in self.plan:
            v = self.verdict_of(entry["id"]) if _row(entry) == row else None
            if v and v["meets"] is False:
                violating.append((len(entry["scenario"]["faults"]), entry["id"], entry))
        if not violating:
            return
        _, origin_id, origin = min(violating, key=lambda t: (t[0], t[1]))
        base = Scenario(**origin["scenario"])
        # Finished shrink trials of this pipeline are the cache: a resumed shrink reruns none of them.
        cache: dict[tuple[str, ...], tuple[str, dict]] = {}
        for trial_id in self.trial_ids():
            if trial_id.startswith(f"{prefix}-shrink-") and self.finished(trial_id):
                s = Scenario.load(self.trial_dir(trial_id) / "scenario.json")
                cache[tuple(s.faults)] = (trial_id, self.verdict_of(trial_id))
        path: list[dict] = []
        counter = iter(range(len(cache), 10_000))

        def violates(faults: list[str]) -> bool:
            key = tuple(faults)
            if key not in cache:
                trial_id = f"{prefix}-shrink-{next(counter):02d}"
                scenario = Scenario(**{**asdict(base), "faults": list(faults)})
                cache[key] = (trial_id, self.run_trial(harness, trial_id, scenario, progress))
            trial_id, verdict = cache[key]
            bad = verdict["meets"] is False
            path.append({"trial": trial_id, "faults": list(faults), "verdict": verdict["verdict"], "violates": bad})
            return bad

        resolved = resolve(pipeline)
        expected = self.spec.expect or resolved.guarantee
        actions = applicable_actions(self.spec.kinds, sink_channel=resolved.sink_channel,
                                     database=resolved.database, owns_workers=self.spec.cluster == "standalone",
                                     source_channel=not resolved.own_source, nodes=self.spec.on_nodes)
        candidates = self.spec.shrink_trials
        if self.spec.time_budget_s is not None:
            left = self.spec.time_budget_s - self.elapsed()
            candidates = min(candidates, max(0, int(left // max(self._mean_seconds(), 1e-3))))
        if candidates == 0 and not cache:
            write_json(record_path, {
                "pipeline": pipeline, "declared": expected, "from": origin_id, "from_faults": base.faults,
                "minimal": base.faults, "minimal_trial": origin_id, "verdict": self.verdict_of(origin_id)["verdict"],
                "path": [], "command": base.command(), "skipped": "the time budget was spent before the shrink"})
            progress.note(f"shrink of {row} skipped: the time budget is spent; unshrunk counterexample "
                          f"{' '.join(base.faults)} ({origin_id}), replay: {base.command()}")
            return
        progress.note(f"shrinking {origin_id} ({', '.join(base.faults)}) for {row}")
        minimal = shrink_schedule(base.faults, violates, actions=actions, budget=max(candidates, len(cache)),
                                  phases=resolved.phases)
        minimal_trial = origin_id if minimal == base.faults else next(
            p["trial"] for p in path if p["faults"] == minimal and p["violates"])
        verdict = self.verdict_of(minimal_trial)
        scenario = Scenario(**{**asdict(base), "faults": minimal})
        write_json(record_path, {
            "pipeline": pipeline, "declared": expected, "from": origin_id,
            "from_faults": base.faults, "minimal": minimal, "minimal_trial": minimal_trial,
            "verdict": verdict["verdict"], "path": path, "command": scenario.command(),
        })

    # -- results ----------------------------------------------------------------------------------
    def summarize(self) -> dict:
        """Per pipeline: declared vs measured (weakest over its trials), coverage, time; the exit code."""
        from chaos.stored import load_result, load_shrink
        from properties.planning import covered_windows
        from properties.verdicts import aggregate

        reports, rows = [], {}
        coverage: dict[str, dict[str, int]] = {}
        prefixes = self.rows()
        variants = {_row(e): e["scenario"].get("conf") or {} for e in self.plan}
        for trial_id in self.trial_ids():
            v = self.verdict_of(trial_id)
            if v is None:
                continue
            name = self.row_of(trial_id) or v["pipeline"]
            reports.append({**v, "pipeline": name})
            result = load_result(self.trial_dir(trial_id))
            row = rows.setdefault(name, {"pipeline": v["pipeline"], "conf": variants.get(name, {}), "seconds": 0.0,
                                         "faults_fired": 0, "faulted_trials": 0, "covered": set(), "late_writes": []})
            row["seconds"] += result.get("seconds", 0)
            fired = [f for f in result.get("faults", []) if f.get("fired")]
            row["faults_fired"] += len(fired)
            row["faulted_trials"] += bool(fired)  # a trial whose faults did not fire is a no-fault trial
            row["covered"] |= covered_windows(f["spec"] for f in fired)
            if v.get("late_writes"):
                row["late_writes"].append(trial_id)
            if v["verdict"] == "refused":
                row.setdefault("refusal", str(result.get("reason", "")))  # Spark's message, as the driver saw it
            for f in fired:
                action = f["spec"].split("@")[0]
                coverage.setdefault(action, {})
                coverage[action][f["phase"]] = coverage[action].get(f["phase"], 0) + 1
        pipelines = aggregate(reports)
        windows = self.data.get("windows", {})
        for name, row in pipelines.items():
            row.update(rows.get(name, {}))
            row["seconds"] = round(row.get("seconds", 0.0), 1)
            covered = row.pop("covered", set())
            row["covered"] = sorted(covered)  # every (action:phase) pair its fired faults exercised
            row["windows"] = list(windows.get(name, []))  # the canonical ones it can take
            row["not_covered"] = [w for w in row["windows"] if w not in covered]
            # "meets" claims no more than the trials exercised: with a canonical window never opened, or no
            # fault fired at all, it is weak evidence.
            row["weak"] = row["meets"] is True and (bool(row["not_covered"]) or not row.get("faulted_trials"))
            shrink = self.root / "shrinks" / f"{prefixes.get(name, slug(name))}.json"
            fix = "delete it and run `streamchaos campaign resume` to shrink again"
            row["counterexample"] = load_shrink(shrink, fix) if shrink.exists() else None
        planned = len(self.plan)
        done = sum(1 for e in self.plan if self.finished(e["id"]))
        if any(r["meets"] is False for r in pipelines.values()):
            code = EXIT_VIOLATION
        elif any(r["meets"] is None or r["stalled"] for r in pipelines.values()) or not pipelines:
            code = EXIT_INCONCLUSIVE
        else:
            code = EXIT_OK
        return {"format": FORMAT, "version": VERSION, "spec": asdict(self.spec), "pipelines": pipelines,
                "skipped": self.data.get("skipped", []), "planned": planned, "finished": done,
                "coverage": coverage, "seconds": round(self.elapsed(), 1), "exit_code": code}


def _same_files(late: dict, stored: dict | None) -> bool:
    """Late writes already recorded in verdict.json (no re-check needed)."""
    return stored is not None and all(late.get(k) == stored.get(k) for k in ("changed", "added", "removed"))


def _row(entry: dict) -> str:
    """A plan entry's summary row (campaigns stored before configuration variants have none: the pipeline)."""
    return entry.get("row") or entry["pipeline"]


def _round_robin(groups: list[list[dict]]) -> list[list[dict]]:
    out = []
    for k in range(max((len(g) for g in groups), default=0)):
        out.append([g[k] for g in groups if k < len(g)])
    return out


def _postgres_available() -> bool:
    from chaos.postgres import find_bindir

    return find_bindir() is not None


class Progress:
    """Campaign events; the CLI's subclass draws rich progress bars. This one stays silent."""

    def begin(self, campaign: Campaign, already: int) -> None: ...

    def trial_start(self, trial_id: str, scenario: Scenario) -> None: ...

    def trial_done(self, trial_id: str, scenario: Scenario, verdict: dict, result: dict) -> None: ...

    def note(self, text: str) -> None: ...

    def end(self, summary: dict) -> None: ...


def remove_unfinished(campaign: Campaign) -> list[str]:
    """Trial directories a killed harness left half-written (no result.json): removed before a resume."""
    removed = []
    trials = campaign.root / "trials"
    if trials.is_dir():
        for d in trials.iterdir():
            if d.is_dir() and not (d / "result.json").exists():
                shutil.rmtree(d)
                removed.append(d.name)
    return removed
