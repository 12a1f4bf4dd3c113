"""A campaign: many trials over catalogue pipelines, stored as one run directory that survives a crash.

The flow is Jepsen's ``test-all`` with Hypothesis' replayable failures::

    campaign.json       the spec and the whole plan (every trial's replayable scenario), written first
    trials/<ID>/        one trial directory each (scenario, events, history, logs, checkpoint, sink,
                        result.json, verdict.json); a trial counts as finished once verdict.json exists
    shrinks/<P>.json    per violating pipeline: the shrink path and the minimal counterexample
    summary.json        per pipeline: declared vs measured, coverage, time; rewritten after each trial
    report.html         the offline consistency report (``reports.html``)

This module is the stored campaign: its plan (made once, at creation), its finished trials and
their summary. chaos/campaign/runner.py is the loop that runs it. Each trial is written as it ends, so a
harness that dies loses at most the trial in flight, which ``resume`` reruns from scratch; finished
trials are never run twice.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from chaos.campaign.shards import harness_version, plan_hash, shares
from chaos.clusters.registry import channels
from chaos.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_VIOLATION, UserError
from chaos.guarantees import GUARANTEES
from chaos.run.admission import missing_here
from chaos.scenario.faults import Fault
from chaos.scenario.names import short_name
from chaos.scenario.random_times import TIMINGS
from chaos.scenario.scenario import EVENTS, EVENTS_PER_BATCH, Scenario
from chaos.store.atomic import write_json
from pipelines_under_test import resolve
from properties.planning import STATE_WINDOW

FORMAT = "streamchaos-campaign"
VERSION = 1
# A trial the campaign adds once its checkpoints showed what its plan could not know (``Runner.run_learned``).
LEARNED_STATE = "-learned-state"
MAX_PLANNED_PER_PIPELINE = 500  # a time-budgeted campaign plans this many and stops when time is up
STREAM_OPTIONS = ("partitions", "keys", "skew", "max_disorder_ms", "late_fraction", "resent_fraction")


@dataclass
class CampaignSpec:
    """What the user asked for (``campaign run`` options); stored so ``resume`` needs nothing else."""

    pipelines: list[str]
    expect: str | None = None  # judge every pipeline against this guarantee instead of its declared one
    kinds: list[str] = field(default_factory=lambda: ["kill"])
    trials: int | None = 3
    time_budget_s: float | None = None
    seed: int = 0
    events: int = EVENTS
    events_per_batch: int = EVENTS_PER_BATCH
    # The stream's shape (``trial``'s stream options; None: the pipeline's default, else the scenario's).
    partitions: int | None = None
    keys: int | None = None
    skew: float | None = None
    max_disorder_ms: int | None = None
    late_fraction: float | None = None
    resent_fraction: float | None = None
    max_faults: int = 2
    recovery_timeout: float = 180.0  # seconds a trial waits without a commit before it is stalled
    shrink: bool = True
    shrink_trials: int = 6
    examples: list[str] = field(default_factory=list)  # schedules tried first, like Hypothesis' @example
    # Per pipeline, the exact schedules to run instead of drawn ones (``streamchaos conformance``).
    schedules: dict[str, list[str]] | None = None
    cluster: str = "standalone"
    workers: int = 2
    brokers: int = 1  # Kafka brokers, each a node of --cluster docker
    # Configuration matrix (``--conf KEY=V1,V2``, chaos/scenario/variants.py): every pipeline runs under every
    # combination, each a variant with its own row (verdict, counterexample) and the same schedules and seeds.
    conf: dict[str, list[str]] | None = None
    # The PySpark every trial runs on (``streamchaos --spark VERSION``; set at creation): a resume on another
    # one would mix two Sparks in one campaign's verdicts.
    spark: str | None = None
    # When faults fire: at their planned (batch, phase), or ``random``: the same faults at uniform wall-clock
    # times over a no-fault trial's duration (chaos/scenario/random_times.py), as time-based chaos tools fire them.
    timing: str = "phase"

    @property
    def stream(self) -> dict:
        """The stream options given (``--late-fraction 0.05``, ...): they override the pipeline's defaults."""
        return {k: getattr(self, k) for k in STREAM_OPTIONS if getattr(self, k) is not None}

    def refused(self, owns_workers: bool | None = None) -> Callable[[str], bool]:
        """The fault actions its cluster refuses (``refused_by``)."""
        return refused_by(self.cluster, owns_workers)


def refused_by(cluster: str, owns_workers: bool | None = None) -> Callable[[str], bool]:
    """Whether the cluster ``cluster`` names refuses a fault action, as its kind says before a trial
    (``chaos.clusters.registry.refusal``): the planner plans what trials accept. ``owns_workers=False``: the
    harness runs on a cluster it was given (the pytest plugin's), whose workers are not its own."""
    from chaos.clusters.registry import refusal

    def refused(action: str) -> bool:
        if owns_workers is False and action.endswith("-worker"):
            return True
        return refusal(Fault(action, 1, "reading"), cluster) is not None

    return refused


def slug(name: str) -> str:
    """A pipeline's name as a trial id's prefix: a user's job by its short name (``account_totals_run``, not its
    path) and a digest of its options."""
    entry, _, options = name.partition("?")
    tail = f"-{hashlib.sha256(options.encode()).hexdigest()[:6]}" if options else ""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", short_name(entry)) + tail


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
    def create(cls, root: Path, spec: CampaignSpec, owns_workers: bool | None = None,
               shard: tuple[int, int] | None = None) -> Campaign:
        """Plan the campaign and store it in ``root``. ``shard`` (I, N): the plan is made as on any machine
        (chaos/campaign/shards.py) and this directory runs its I-th share, if this machine can run it as planned."""
        from chaos.scenario.variants import label as conf_label
        from chaos.scenario.variants import variants
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
        if spec.timing not in TIMINGS:
            raise UserError(f"--timing {spec.timing!r}: use one of {', '.join(TIMINGS)}")
        if spec.timing == "random":
            spec = replace(spec, shrink=False)  # a shrink moves faults between phases; a timed fault has none
        refused = spec.refused(owns_workers)
        if "node" in spec.kinds and refused("kill-node"):
            raise UserError(f"--faults node needs a cluster of nodes or hosts (--cluster docker or ssh:FILE), not "
                            f"{spec.cluster}")
        per_pipeline = spec.trials or MAX_PLANNED_PER_PIPELINE
        conf_variants = variants(spec.conf)
        plans, skipped, windows = {}, [], {}
        prefixes: set[str] = set()
        for name in dict.fromkeys(spec.pipelines):
            pipeline = resolve(name)  # unknown pipeline: one line, exit 2, nothing written
            reason = missing_here(pipeline) if shard is None else None  # a shard's plan is the same everywhere
            if spec.brokers > 1 and not pipeline.kafka:
                reason = f"--brokers {spec.brokers}: it reads no Kafka through the harness's brokers"
            if reason:
                skipped.append({"pipeline": name, "reason": reason})
                continue
            src, sink = channels(pipeline, spec.cluster)
            actions = applicable_actions(spec.kinds, sink_channel=sink, database=pipeline.database, source_channel=src,
                                         refused=refused, kafka=pipeline.kafka, kafka_fed=pipeline.kafka_fed)
            fixed = (spec.schedules or {}).get(name)
            if not actions and not spec.examples and fixed is None:
                skipped.append({"pipeline": name, "reason": f"no fault of kind(s) {','.join(spec.kinds)} applies"})
                continue
            template = Scenario(pipeline=name, events=spec.events, events_per_batch=spec.events_per_batch,
                                cluster=spec.cluster, workers=spec.workers, brokers=spec.brokers,
                                recovery_timeout=spec.recovery_timeout,
                                **{**pipeline.stream_defaults, **spec.stream})
            task_write = "sink-write" in pipeline.executor_phases  # its write tasks report their commit
            if fixed is not None:
                schedules = [s.split() for s in fixed]  # each checked as the scenario parses it
            else:
                schedules = plan_schedules(template.batches, actions, per_pipeline, stable_seed(spec.seed, name),
                                           max_faults=spec.max_faults, examples=spec.examples,
                                           phases=pipeline.phases, state_first=pipeline.state_known,
                                           task_write_first=task_write)
            # The canonical windows this pipeline can take: the summary says which its fired faults opened.
            seeds = trial_seeds(spec.seed, name, len(schedules))
            for j, variant in enumerate(conf_variants):
                row = name if len(conf_variants) == 1 else f"{name} [{conf_label(variant)}]"
                prefix = slug(name) if len(conf_variants) == 1 else f"{slug(name)}-c{j}"
                while prefix in prefixes:  # two jobs of one stem, function and options, in two folders
                    prefix += "_"
                prefixes.add(prefix)
                windows[row] = window_names(canonical_windows(actions, pipeline.phases, spec.max_faults,
                                                              pipeline.state_known, task_write))
                plans[row] = [
                    {"id": f"{prefix}-{k:03d}", "pipeline": name, "row": row,
                     "scenario": replace(template, seed=s, faults=faults, conf=variant).to_dict()}
                    for k, (faults, s) in enumerate(zip(schedules, seeds, strict=True))
                ]
        # Round robin over pipelines: a time budget is shared fairly.
        plan = [entry for group in _round_robin(list(plans.values())) for entry in group]
        from chaos.machine.spark_versions import current_version

        spec = replace(spec, spark=spec.spark or current_version())
        data = {"format": FORMAT, "version": VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
                "spec": asdict(spec), "plan": plan, "skipped": skipped, "windows": windows,
                "harness": harness_version()}
        data["plan_hash"] = plan_hash(data)
        if shard is not None:
            index, count = shard
            data["shard"] = {"index": index, "count": count, "trials": shares(plan, count)[index - 1]}
            if not data["shard"]["trials"]:
                raise UserError(f"shard {index}/{count} holds no trial: the plan has {len(plan)} trial(s); run at "
                                f"most {len(plan)} shards")
            for entry in (e for e in plan if e["id"] in set(data["shard"]["trials"])):
                if reason := missing_here(resolve(entry["pipeline"])):
                    raise UserError(f"shard {index}/{count} runs {entry['pipeline']}, which {reason}: every shard "
                                    "must run its share as planned; run it on a machine that has it")
        write_json(root / "campaign.json", data)
        return cls(root, data)

    @classmethod
    def load(cls, root: Path) -> Campaign:
        root = Path(root)
        if not root.is_dir():
            raise UserError(f"{root} is not a directory: give a campaign directory (the --out of `campaign run`)")
        from chaos.store.records import all_of, dataclass_fields, load_json, require, require_each

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
        shard = data.get("shard")
        if shard is not None and not (isinstance(shard, dict) and all_of([shard.get("index"), shard.get("count")],
                                                                             (int,))
                                      and isinstance(shard.get("trials"), list) and all_of(shard["trials"], (str,))):
            raise UserError(f"{path}: shard is not an index, a count and a list of trial ids: {fix}")
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

    @property
    def share(self) -> list[dict]:
        """The planned trials this directory runs: the whole plan, or a shard's share of it."""
        shard = self.data.get("shard")
        if not shard:
            return self.plan
        ids = set(shard["trials"])
        return [e for e in self.plan if e["id"] in ids]

    def trial_dir(self, trial_id: str) -> Path:
        return self.root / "trials" / trial_id

    def finished(self, trial_id: str) -> bool:
        return (self.trial_dir(trial_id) / "verdict.json").exists()

    def trial_ids(self) -> list[str]:
        """Planned trials, then shrink trials, as stored."""
        ids = [e["id"] for e in self.plan]
        shrink_dir = self.root / "trials"
        if shrink_dir.is_dir():
            stored = sorted(p.name for p in shrink_dir.iterdir())
            ids += [n for n in stored if n.endswith(LEARNED_STATE)] + [n for n in stored if "-shrink-" in n]
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
        from chaos.store.records import load_verdict
        from properties.verdicts import meets

        if not (self.trial_dir(trial_id) / "verdict.json").exists():
            return None
        v = load_verdict(self.trial_dir(trial_id))
        if self.spec.expect:
            v["declared"] = self.spec.expect
            v["meets"] = meets(v["verdict"], self.spec.expect)
        return v

    def require_spark(self) -> None:
        """Refuse to run this campaign's trials on another PySpark than the one it was created on."""
        from chaos.machine.spark_versions import current_version

        if self.spec.spark and self.spec.spark != current_version():
            raise UserError(f"{self.root} runs on PySpark {self.spec.spark}, this is {current_version()}: "
                            f"run it with `streamchaos --spark {self.spec.spark} ...`")

    def facts(self, trial_id: str) -> tuple[bool | None, float] | None:
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
        from chaos.store.records import load_result

        return float(load_result(self.trial_dir(trial_id))["seconds"])

    def mean_seconds(self) -> float:
        seconds = [f[1] for t in self.trial_ids() if (f := self.facts(t)) is not None]
        return sum(seconds) / len(seconds) if seconds else 1.0

    def rows(self) -> dict[str, str]:
        """The summary's rows in plan order (a pipeline, or a pipeline under one configuration variant), each
        with the prefix of its trial ids (its shrink trials and record are named by it too)."""
        if self._rows is None:
            self._rows = {row_of_entry(e): e["id"].rsplit("-", 1)[0] for e in self.plan}
        return self._rows

    def row_of(self, trial_id: str) -> str | None:
        """The row a planned or shrink trial belongs to."""
        if self._row_by_prefix is None:
            self._row_by_prefix = {p: row for row, p in self.rows().items()}
        if trial_id.endswith(LEARNED_STATE):
            prefix = trial_id.removesuffix(LEARNED_STATE)
        else:
            prefix = trial_id.split("-shrink-")[0] if "-shrink-" in trial_id else trial_id.rsplit("-", 1)[0]
        return self._row_by_prefix.get(prefix)

    # -- results ----------------------------------------------------------------------------------
    def learned_windows(self, row: str, windows: list[str], out: dict) -> list[str]:
        """The row's canonical windows, corrected by what its finished trials' checkpoints show: a job whose
        query keeps no state (no ``state/``) cannot take the state store's window; a pipeline that keeps state
        without saying so (``state_store``) has that window, not covered, until it says so (``out["state"]``)."""
        finished = [t for t in self.trial_ids() if self.row_of(t) == row and self.finished(t)]
        if not finished or not any(w.startswith("kill-driver:") for w in windows):
            return windows
        state = any(keeps_state(self.trial_dir(t)) for t in finished)
        out["state"] = state
        if not state:
            return [w for w in windows if w != STATE_WINDOW]
        if STATE_WINDOW not in windows:
            out["state_undeclared"] = True  # its plan has no state-commit fault: name the window, not covered
            return [*windows, STATE_WINDOW]
        return windows

    def summarize(self) -> dict:
        """Per pipeline: declared vs measured (weakest over its trials), coverage, time; the exit code."""
        from chaos.store.records import load_result, load_shrink
        from properties.planning import covered_windows
        from properties.verdicts import aggregate

        reports, rows = [], {}
        coverage: dict[str, dict[str, int]] = {}
        prefixes = self.rows()
        variants = {row_of_entry(e): e["scenario"].get("conf") or {} for e in self.plan}
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
            if trial_id.endswith(LEARNED_STATE):  # one trial more, for a window its checkpoints showed (run_learned)
                row["learned"] = [*row.get("learned", []), trial_id]
            fired = [f for f in result.get("faults", []) if f.get("fired")]
            row["faults_fired"] += len(fired)
            row["faulted_trials"] += bool(fired)  # a trial whose faults did not fire is a no-fault trial
            row["covered"] |= covered_windows(f["spec"] for f in fired)
            if v.get("late_writes"):
                row["late_writes"].append(trial_id)
            if v["verdict"] == "refused":
                row.setdefault("refusal", str(result.get("reason", "")))  # Spark's message, as the driver saw it
            for f in fired:
                if isinstance(f.get("detail"), dict) and f["detail"].get("timed"):  # a time claims no phase
                    continue
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
            row["windows"] = self.learned_windows(name, list(windows.get(name, [])), row)  # canonical, it can take
            row["not_covered"] = [w for w in row["windows"] if w not in covered]
            # "meets" claims no more than the trials exercised: with a canonical window never opened, or no
            # fault fired at all, it is weak evidence.
            row["weak"] = row["meets"] is True and (bool(row["not_covered"]) or not row.get("faulted_trials"))
            shrink = self.root / "shrinks" / f"{prefixes.get(name, slug(name))}.json"
            fix = "delete it and run `streamchaos campaign resume` to shrink again"
            row["counterexample"] = load_shrink(shrink, fix) if shrink.exists() else None
        planned = len(self.share)
        done = sum(1 for e in self.share if self.finished(e["id"]))
        if any(r["meets"] is False for r in pipelines.values()):
            code = EXIT_VIOLATION
        elif any(r["meets"] is None or r["stalled"] for r in pipelines.values()) or not pipelines:
            code = EXIT_INCONCLUSIVE
        else:
            code = EXIT_OK
        out = {"format": FORMAT, "version": VERSION, "spec": asdict(self.spec), "pipelines": pipelines,
               "skipped": self.data.get("skipped", []), "planned": planned, "finished": done,
               "coverage": coverage, "seconds": round(self.elapsed(), 1), "exit_code": code}
        if self.data.get("shard"):  # a share of the plan: its claims cover its share
            out["shard"] = {k: self.data["shard"][k] for k in ("index", "count")}
        lost = self.root / "lost.json"
        if lost.exists():  # trials a lost Ray node took with it (chaos/campaign/on_ray.py)
            out["lost"] = json.loads(lost.read_text())
        if self.data.get("merged_from"):  # shards made one: what no shard finished
            out["merged_from"] = self.data["merged_from"]
            out["missing"] = [e["id"] for e in self.plan if not self.finished(e["id"])]
        return out


def keeps_state(run_dir: Path) -> bool:
    """Whether the trial's query kept a state store: its checkpoint holds ``state/`` with files in it."""
    state = run_dir / "checkpoint" / "state"
    return state.is_dir() and any(p.is_file() for p in state.rglob("*"))


def row_of_entry(entry: dict) -> str:
    """A plan entry's summary row (campaigns stored before configuration variants have none: the pipeline)."""
    return entry.get("row") or entry["pipeline"]


def _round_robin(groups: list[list[dict]]) -> list[list[dict]]:
    out = []
    for k in range(max((len(g) for g in groups), default=0)):
        out.append([g[k] for g in groups if k < len(g)])
    return out


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
