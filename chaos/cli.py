"""The ``streamchaos`` command line. User mistakes end as one line on stderr and exit 2."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from chaos import interrupt
from chaos.cluster import with_image
from chaos.errors import HarnessError, UserError

if TYPE_CHECKING:
    from chaos.scenario import Scenario
    from chaos.trial import Harness

CLUSTER_HELP = "standalone | docker (Spark on Docker nodes: streamchaos image build) | local-cluster[W,C,M] | spark://HOST:PORT"
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Fault injection and consistency testing for PySpark Structured Streaming.",
                  epilog="\b\nExample: streamchaos demo")
err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)

# Every command that runs trials: pre-warmed drivers unless the user asks for cold restarts.
Standby = Annotated[bool, typer.Option("--standby/--no-standby",
                                       help="pre-warmed drivers: a standby takes over a killed driver and each "
                                            "trial's first driver boots ahead (--no-standby: cold restarts)")]

Image = Annotated[str | None, typer.Option(
    help="with --cluster docker: your node image (Java 17 on its PATH, /bin/sh; this machine's Python and Spark "
         "are mounted in), instead of the one `streamchaos image build` makes")]

# A user's job as written (module:function): what the harness needs beside it (chaos/jobspec.py).
JobSchema = Annotated[str | None, typer.Option(
    "--schema", help="your job: the payload's fields as Spark DDL, e.g. 'customer STRING, amount LONG, ts TIMESTAMP'")]
JobSink = Annotated[str | None, typer.Option(
    "--sink", help="your job: where it writes, postgres:TABLE or sqlite:TABLE (handed DATABASE_URL) or parquet (its "
                   "file sink)")]
JobKey = Annotated[str | None, typer.Option(
    "--key", help="your job: columns of an upsert sink's key, compared as the final row per key")]

EXIT_VIOLATION = 1
EXIT_BAD_INPUT = 2
EXIT_INCONCLUSIVE = 3


@app.callback()
def _options(
    spark: Annotated[str | None, typer.Option(
        "--spark", help="run the command on this PySpark version (added with `streamchaos spark add VERSION`; "
                        "default: the installed one)")] = None,
) -> None:
    """Fault injection and consistency testing for PySpark Structured Streaming."""
    # --spark is taken out of the command line before this runs (main): shown here for --help only.


@app.command(epilog="\b\nExample: streamchaos trial passthrough-append --events 2000 --fault kill-driver@3:sink-done")
def trial(
    pipeline: Annotated[str, typer.Argument(help="catalogue name or module:attribute")],
    events: Annotated[int, typer.Option(help="events in the stream")] = 2000,
    seed: Annotated[int, typer.Option(help="seed of the event stream")] = 0,
    fault: Annotated[list[str] | None, typer.Option(help="ACTION@BATCH:PHASE[/ARG...], repeatable")] = None,
    events_per_batch: Annotated[int, typer.Option(help="events per micro-batch")] = 200,
    partitions: Annotated[int | None, typer.Option(help="partitions of the event log (default: the pipeline's, "
                                                        "else 2)")] = None,
    keys: Annotated[int, typer.Option(help="distinct keys in the stream")] = 20,
    skew: Annotated[float, typer.Option(help="Zipf exponent of the key distribution (0 = uniform)")] = 1.0,
    max_disorder_ms: Annotated[int, typer.Option(help="bound of event-time disorder, ms")] = 2000,
    late_fraction: Annotated[float | None, typer.Option(help="share of events 10 minutes late "
                                                              "(default: the pipeline's, else 0)")] = None,
    resent_fraction: Annotated[float | None, typer.Option(help="share of events re-sent with a new id "
                                                                "(default: the pipeline's, else 0)")] = None,
    cluster: Annotated[str, typer.Option(help=CLUSTER_HELP)] = "standalone",
    workers: Annotated[int, typer.Option(help="workers of the standalone cluster")] = 2,
    downtime: Annotated[float, typer.Option(help="seconds a killed driver stays down")] = 1.0,
    recovery_timeout: Annotated[float, typer.Option(help="seconds without a commit before 'stalled'")] = 180.0,
    keep: Annotated[Path | None, typer.Option(help="run directory to keep (default runs/trial-<time>)")] = None,
    toxiproxy: Annotated[str | None, typer.Option(help="host:port of a real Toxiproxy (default: embedded; "
                                                       "or TOXIPROXY_URL)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as one JSON object")] = False,
    conf: Annotated[list[str] | None, typer.Option(
        help="KEY=VALUE for the pipeline's query (repeatable): a spark.* setting, trigger=processingTime:3s|"
             "availableNow|once, or a writeStream option")] = None,
    standby: Standby = True,
    image: Image = None,
    schema: JobSchema = None,
    sink: JobSink = None,
    key: JobKey = None,
) -> None:
    """Run one trial of PIPELINE (or your job's module:function) under a fault schedule and print what happened."""
    from chaos.trial import Harness

    scenario = trial_scenario(pipeline, events, seed, fault, events_per_batch, partitions, keys, skew,
                              max_disorder_ms, late_fraction, resent_fraction, cluster, workers, downtime,
                              recovery_timeout, conf, image, schema, sink, key)
    run_dir = keep or Path("runs") / time.strftime("trial-%Y%m%d-%H%M%S")
    with Harness(cluster=scenario.cluster, workers=workers, workdir=run_dir.parent, toxiproxy=toxiproxy,
                 standby=standby) as harness:
        if not as_json:
            err.print(f"cluster {harness.cluster.master_url} up in {harness.timings['cluster_start_s']}s")
        result = run_trial(harness, scenario, run_dir, last=True)
    if as_json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print_result(result)
    code = trial_exit_code(result)
    if code:
        raise typer.Exit(code)


def trial_exit_code(result: dict) -> int:
    """How ``streamchaos trial`` exits for a result of ``run_trial``: inconclusive unless drained, a violation
    when the pipeline's guarantee is not met or a committed batch broke the consistent cut, else 0."""
    if result["outcome"] != "drained":
        return EXIT_INCONCLUSIVE
    if result["meets"] is False or (result.get("consistent_cut") or {}).get("ok") is False:
        return EXIT_VIOLATION
    return 0


def trial_scenario(pipeline: str, events: int = 2000, seed: int = 0, fault: list[str] | None = None,
                   events_per_batch: int = 200, partitions: int | None = None, keys: int = 20, skew: float = 1.0,
                   max_disorder_ms: int = 2000, late_fraction: float | None = None,
                   resent_fraction: float | None = None, cluster: str = "standalone", workers: int = 2,
                   downtime: float = 1.0, recovery_timeout: float = 180.0, conf: list[str] | None = None,
                   image: str | None = None, schema: str | None = None, sink: str | None = None,
                   key: str | None = None) -> Scenario:
    """The scenario ``streamchaos trial`` runs for these options (the pipeline's stream defaults under what is
    given), checked before any JVM starts."""
    from chaos.jobspec import job_ref
    from chaos.queryconf import parse_conf
    from chaos.scenario import Scenario
    from chaos.trial import validate_schedule
    from pipelines_under_test import resolve

    cluster = with_image(cluster, image)
    pipeline = job_ref(pipeline, schema, sink, key)
    chosen = resolve(pipeline)
    given = {"partitions": partitions, "late_fraction": late_fraction, "resent_fraction": resent_fraction}
    stream = {**chosen.stream_defaults, **{k: v for k, v in given.items() if v is not None}}
    scenario = Scenario(
        pipeline=pipeline, events=events, seed=seed, events_per_batch=events_per_batch,
        keys=keys, skew=skew, max_disorder_ms=max_disorder_ms, faults=list(fault or []),
        cluster=cluster, workers=workers, driver_downtime=downtime, recovery_timeout=recovery_timeout,
        conf=parse_conf(list(conf or [])), **stream,
    )
    validate_schedule(scenario, chosen)  # unknown pipeline, impossible fault
    return scenario


def run_trial(harness: Harness, scenario: Scenario, run_dir: Path, last: bool) -> dict:
    """One trial on ``harness`` and the checker's verdict of its stored run: what ``trial --json`` prints.
    ``last``: no trial follows on this harness (a shared one keeps its spares for the next)."""
    result = harness.trial(scenario, run_dir, last=last)
    result["timings"] = harness.timings
    result.update(verdict_fields(run_dir))
    return result


@app.command(epilog="\b\nExample: streamchaos init examples/orders_upsert.py:run --schema 'order_id STRING, "
                    "customer STRING, amount LONG, ts TIMESTAMP' --sink postgres:customer_totals --key customer")
def init(
    job: Annotated[str, typer.Argument(help="your job's entry point: module:function or path/to/job.py:function")],
    schema: JobSchema = None,
    sink: JobSink = None,
    key: JobKey = None,
    test_file: Annotated[Path | None, typer.Option("--out", help="the test file (default "
                                                                "tests/test_<job>_consistency.py)")] = None,
) -> None:
    """Write a starter pytest for your job: a consistency check under crashes, ready to run with `pytest`."""
    from chaos.jobspec import job_ref
    from chaos.starter import starter_test

    if ":" not in job:
        raise UserError(f"{job!r}: name your job's entry point as module:function or path/to/job.py:function")
    if not sink:
        raise UserError("--sink is needed: where the job writes, postgres:TABLE, sqlite:TABLE or parquet")
    path = starter_test(job_ref(job, schema, sink, key), test_file)
    out.print(f"wrote {path}: run it with `pytest {path}`", markup=False)


@app.command(epilog="\b\nExample: streamchaos demo --out runs/demo")
def demo(
    out_dir: Annotated[Path, typer.Option("--out", help="the campaign directory (default runs/demo-<time>)")] = None,
    events: Annotated[int, typer.Option(help="events per trial")] = 1000,
) -> None:
    """A short campaign: are the append and the idempotent sinks exactly-once? Ends with its HTML report."""
    from chaos.campaign import Campaign, CampaignSpec

    out_dir = out_dir or Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    spec = CampaignSpec(pipelines=["passthrough-append", "passthrough-idempotent"], expect="exactly-once",
                        kinds=["kill"], trials=2, seed=1, events=events, shrink_trials=2,
                        examples=["kill-driver@2:sink-done"])
    _require_java()
    campaign = Campaign.create(out_dir, spec)
    err.print(f"demo campaign in {out_dir}: {len(campaign.plan)} trials (the driver killed between a sink write and "
              "its commit, then Hypothesis-drawn kills), a violation shrunk; a few minutes")
    summary = _execute(campaign)
    out.print("\nThe same crashes, two sinks: the append sink stores a replayed batch twice (at-least-once), "
              "the idempotent one replaces it (exactly-once).")
    if summary["exit_code"] == EXIT_INCONCLUSIVE:
        raise typer.Exit(EXIT_INCONCLUSIVE)


campaign_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                           epilog="\b\nExample: streamchaos campaign run --pipeline passthrough-append --trials 5",
                           help="Chaos campaigns: many trials, shrunk counterexamples, "
                                "one stored run directory and its HTML report.")
app.add_typer(campaign_app, name="campaign")


@campaign_app.command("run", epilog="\b\nExample: streamchaos campaign run --pipeline passthrough-append --trials 5 "
                                    "--seed 1 --out runs/c1")
def campaign_run(
    pipeline: Annotated[list[str] | None, typer.Option(help="catalogue name or module:attr, repeatable")] = None,
    faults: Annotated[str, typer.Option(
        help="fault kinds: kill,pause,channel,checkpoint,db,node (node: --cluster docker)")] = "kill",
    trials: Annotated[int | None, typer.Option(help="planned trials per pipeline (default 3)")] = None,
    time_budget: Annotated[str | None, typer.Option(help="stop starting trials after this much, e.g. 30m")] = None,
    seed: Annotated[int, typer.Option(help="seed of the plan and the event streams")] = 0,
    events: Annotated[int, typer.Option(help="events per trial")] = 2000,
    events_per_batch: Annotated[int, typer.Option(help="events per micro-batch")] = 200,
    max_faults: Annotated[int, typer.Option(help="faults per trial at most")] = 2,
    expect: Annotated[str | None, typer.Option(help="judge against this guarantee instead of the declared one")] = None,
    example: Annotated[list[str] | None, typer.Option(help="a schedule to try first, e.g. 'kill-driver@3:sink-done'; "
                                                           "repeatable")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="campaign directory (default runs/campaign-<time>)")]
    = None,
    shrink: Annotated[bool, typer.Option("--shrink/--no-shrink", help="shrink each violation")] = True,
    shrink_trials: Annotated[int, typer.Option(help="trials a shrink may spend")] = 6,
    cluster: Annotated[str, typer.Option(help=CLUSTER_HELP)] = "standalone",
    workers: Annotated[int, typer.Option(help="workers of the standalone cluster")] = 2,
    toxiproxy: Annotated[str | None, typer.Option(help="host:port of a real Toxiproxy")] = None,
    conf: Annotated[list[str] | None, typer.Option(
        help="KEY=V1,V2: run every pipeline under each value (repeatable: every combination), e.g. "
             "spark.sql.streaming.stateStore.providerClass=A,B or asyncProgressTrackingEnabled=false,true")] = None,
    standby: Standby = True,
    image: Image = None,
    schema: JobSchema = None,
    sink: JobSink = None,
    key: JobKey = None,
) -> None:
    """Generate scenarios, run them, shrink every violation, store everything, write the HTML report."""
    from chaos.campaign import Campaign, CampaignSpec, parse_time_budget
    from chaos.jobspec import job_ref
    from chaos.queryconf import parse_matrix
    from properties.planning import parse_kinds

    cluster = with_image(cluster, image)
    spec = CampaignSpec(
        pipelines=[job_ref(p, schema, sink, key) for p in pipeline or []], expect=expect,
        kinds=list(parse_kinds(faults)),
        trials=trials if trials is not None or time_budget else 3, time_budget_s=parse_time_budget(time_budget),
        seed=seed, events=events, events_per_batch=events_per_batch, max_faults=max_faults, shrink=shrink,
        shrink_trials=shrink_trials, examples=list(example or []), cluster=cluster, workers=workers,
        conf=parse_matrix(list(conf or [])) or None)
    if max_faults < 1:
        raise UserError(f"--max-faults must be at least 1, got {max_faults}")
    _require_java()
    campaign = Campaign.create(out_dir or Path("runs") / time.strftime("campaign-%Y%m%d-%H%M%S"), spec)
    err.print(f"campaign {campaign.root}: {len(campaign.plan)} planned trials; "
              f"resume with `streamchaos campaign resume {campaign.root}` if interrupted")
    summary = _execute(campaign, toxiproxy, standby=standby)
    if summary["exit_code"]:
        raise typer.Exit(summary["exit_code"])


@campaign_app.command("resume", epilog="\b\nExample: streamchaos campaign resume runs/c1")
def campaign_resume(
    campaign_dir: Annotated[Path, typer.Argument(help="the directory of an interrupted campaign")],
    toxiproxy: Annotated[str | None, typer.Option(help="host:port of a real Toxiproxy")] = None,
    standby: Standby = True,
) -> None:
    """Continue an interrupted campaign: finished trials are kept, the one in flight is rerun."""
    from chaos.campaign import Campaign, remove_unfinished

    campaign = Campaign.load(campaign_dir)
    _require_java()
    removed = remove_unfinished(campaign)
    if removed:
        err.print(f"discarded {len(removed)} trial(s) the interrupted harness left unfinished: {', '.join(removed)}")
    summary = _execute(campaign, toxiproxy, standby=standby)
    if summary["exit_code"]:
        raise typer.Exit(summary["exit_code"])


@app.command(epilog="\b\nExample: streamchaos conformance --trials 3 --only passthrough-append")
def conformance(
    trials: Annotated[int, typer.Option(help="trials per documented row")] = 3,
    seed: Annotated[int, typer.Option(help="seed of the event streams")] = 0,
    events: Annotated[int, typer.Option(help="events per trial")] = 1000,
    only: Annotated[list[str] | None, typer.Option(help="run only this row's pipeline, repeatable")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="directory (default runs/conformance-<time>)")] = None,
    cluster: Annotated[str, typer.Option(help=CLUSTER_HELP)] = "standalone",
    workers: Annotated[int, typer.Option(help="workers of the standalone cluster")] = 2,
    toxiproxy: Annotated[str | None, typer.Option(help="host:port of a real Toxiproxy")] = None,
    standby: Standby = True,
    image: Image = None,
) -> None:
    """Measure Spark's documented guarantees row by row under a standard fault mix; exit 1 on a contradiction."""
    from chaos import conformance as conf
    from chaos.campaign import Campaign, CampaignSpec
    from pipelines_under_test import resolve

    if trials < 1:
        raise UserError(f"--trials must be at least 1, got {trials}")
    cluster = with_image(cluster, image)
    rows = conf.select_rows(list(only or []))
    names = [r.pipeline for r in rows]
    spec = CampaignSpec(pipelines=names, kinds=["kill", "channel"], trials=trials, seed=seed, events=events,
                        shrink=False, cluster=cluster, workers=workers,
                        schedules={n: conf.standard_mix(resolve(n), trials) for n in names})
    _require_java()
    campaign = Campaign.create(out_dir or Path("runs") / time.strftime("conformance-%Y%m%d-%H%M%S"), spec)
    err.print(f"conformance {campaign.root}: {len(rows)} rows, {len(campaign.plan)} trials")
    found: dict = {}

    def finish(summary: dict) -> None:
        verdicts: dict[str, list[dict]] = {}
        for entry in campaign.plan:
            verdicts.setdefault(entry["pipeline"], []).append(campaign.verdict_of(entry["id"]))
        found.update(conf.table(rows, summary, verdicts))
        conf.write(campaign.root, found)

    _execute(campaign, toxiproxy, finish, standby=standby)
    for r in found["rows"]:
        out.print(f"{r['component']:<58} docs: {r['documented']:<14} measured: {r['measured'] or '-':<14} "
                  f"{r['status']} ({r['trials']} trials){'; e.g. ' + r['example'] if r['example'] else ''}")
    if found["contradictions"]:
        raise typer.Exit(1)
    if any(r["agrees"] is None for r in found["rows"]):
        raise typer.Exit(3)


def _require_java() -> None:
    from chaos.java import require_java

    require_java()


def _execute(campaign, toxiproxy: str | None = None, finish=None, standby: bool = True) -> dict:
    """Run a campaign on one harness (cluster, event log, proxies, database reused by every trial).

    ``finish(summary)`` runs before the report is written (conformance adds its table there)."""
    from chaos.progress import RichProgress
    from chaos.trial import Harness
    from reports.html import write_report

    spec = campaign.spec
    campaign.require_spark()
    for s in campaign.data.get("skipped", []):
        err.print(f"skipped {s['pipeline']}: {s['reason']}")
    if not campaign.plan:
        raise UserError("nothing to run: every pipeline was skipped (see above)")
    # Standby and spare drivers change how fast a trial runs, not what it does: not part of the spec.
    with Harness(cluster=spec.cluster, workers=spec.workers, workdir=campaign.root / "harness",
                 toxiproxy=toxiproxy, standby=standby, spare=standby, data_dir=campaign.root) as harness:
        err.print(f"cluster {harness.cluster.master_url} up in {harness.timings['cluster_start_s']}s")
        summary = campaign.run(harness, RichProgress(err))
    if finish is not None:
        finish(summary)
    report = write_report(campaign.root)
    print_summary(summary)
    out.print(f"report: {report}")
    return summary


def print_summary(summary: dict) -> None:
    from rich.markup import escape

    for name, row in summary["pipelines"].items():
        name = escape(name)  # a configuration variant's row name holds brackets: text, not markup
        counts = (f"{row['trials']} trial(s) ({row.get('faulted_trials', 0)} with a fired fault), "
                  f"{row.get('faults_fired', 0)} faults fired, {row.get('stalled', 0)} stalled, "
                  + (f"{row['refused']} refused by Spark, " if row.get("refused") else "") + f"{row.get('seconds')}s")
        if row["meets"] is True:
            out.print(f"[bold]{name}[/]: no violation of {row['declared']} found in {counts}; measured "
                      f"{row['verdict']}" + (" [bold](weak evidence)[/]" if row.get("weak") else ""))
        else:
            meets = {False: "VIOLATES", None: "inconclusive for"}[row["meets"]]
            out.print(f"[bold]{name}[/]: {row['verdict']} ({meets} {row['declared']}) over {counts}")
        if row.get("refusal"):
            out.print(f"  Spark refused the query: {escape(row['refusal'])}")
        elif "not_covered" in row:
            out.print(f"  windows covered: {', '.join(row['covered']) or 'none'}"
                      + (f"; not covered: {', '.join(row['not_covered'])}" if row["not_covered"] else ""))
        if row.get("late_writes"):
            out.print(f"  [bold]late writes[/]: the sink changed after the trial ended in {len(row['late_writes'])} "
                      f"trial(s) ({', '.join(row['late_writes'][:5])}); verdicts are judged from the sink as each "
                      "trial ended it")
        ce = row.get("counterexample")
        if ce and ce.get("skipped"):
            out.print(f"  counterexample, not shrunk ({ce['skipped']}): {' '.join(ce['minimal']) or 'no fault'} -> "
                      f"{ce['verdict']}")
            out.print(f"  replay: {ce['command']}")
        elif ce:
            out.print(f"  minimal counterexample: {' '.join(ce['minimal']) or 'no fault'} -> {ce['verdict']} "
                      f"(shrunk from {' '.join(ce['from_faults'])} in {len(ce['path'])} candidate(s))")
            out.print(f"  replay: {ce['command']}")
    for s in summary.get("skipped", []):
        out.print(f"{s['pipeline']}: skipped ({s['reason']})")
    print_grid(summary)


def print_grid(summary: dict) -> None:
    """Configuration variants (``--conf KEY=V1,V2``): a pipeline x configuration table of verdicts."""
    from chaos.queryconf import grid

    table = grid(summary)
    if table is None:
        return
    columns, cells = table
    out.print("verdicts by configuration (pipeline x --conf variant; * = violates the expected guarantee):")
    for k, column in enumerate(columns):
        out.print(f"  [{k + 1}] {column}", markup=False)
    width = max(len(p) for p in cells)
    out.print(" " * (width + 4) + "".join(f"[{k + 1}]".ljust(16) for k in range(len(columns))), markup=False)
    for pipeline, row in cells.items():
        marks = [(row[c]["verdict"] or "-") + ("*" if row[c]["meets"] is False else "") if c in row else "not run"
                 for c in columns]
        out.print(f"  {pipeline:<{width}}  " + "".join(m.ljust(16) for m in marks), markup=False)


@app.command(epilog="\b\nExample: streamchaos replay runs/c1/trials/passthrough-append-000")
def replay(
    trial_dir: Annotated[Path, typer.Argument(help="a stored trial, e.g. DIR/trials/ID")],
    out_dir: Annotated[Path | None, typer.Option("--out", help="where the rerun goes (default: beside it)")] = None,
    cluster: Annotated[str | None, typer.Option(help="override the stored cluster setting")] = None,
    standby: Standby = True,
) -> None:
    """Rerun one stored trial from its scenario and compare the two verdicts (exit 1 if they differ)."""
    from dataclasses import replace

    from chaos.scenario import Scenario
    from chaos.stored import load_verdict
    from chaos.trial import Harness
    from pipelines_under_test import for_run
    from properties.check import check_run

    if not (trial_dir / "scenario.json").is_file():
        raise UserError(f"{trial_dir} is not a stored trial (no scenario.json): give DIR/trials/ID")
    scenario = Scenario.load(trial_dir / "scenario.json")
    if cluster:
        scenario = replace(scenario, cluster=cluster)
    stored = load_verdict(trial_dir) if (trial_dir / "verdict.json").exists() else None
    if (trial_dir / "result.json").exists():
        from chaos.sparkenv import current_version
        from chaos.stored import load_result

        ran_on = load_result(trial_dir).get("spark")
        if isinstance(ran_on, str) and ran_on != current_version():
            raise UserError(f"{trial_dir} ran on PySpark {ran_on}, this is {current_version()}: replay it with "
                            f"`streamchaos --spark {ran_on} replay {trial_dir}`")
    if out_dir is None:
        base = trial_dir.parent.parent / "replays" if (trial_dir.parent.parent / "campaign.json").exists() \
            else trial_dir.parent
        n = 1
        while (base / f"{trial_dir.name}-replay-{n}").exists():
            n += 1
        out_dir = base / f"{trial_dir.name}-replay-{n}"
    _require_java()
    with Harness(cluster=scenario.cluster, workers=scenario.workers, workdir=out_dir.parent,
                 standby=standby) as harness:
        err.print(f"replaying {trial_dir} ({' '.join(scenario.faults) or 'no fault'}) into {out_dir}")
        result = harness.trial(scenario, out_dir, last=True)
    v = check_run(out_dir, for_run(out_dir))
    result.update(_summary(v))
    print_result(result)
    before = stored["verdict"] if stored else "unknown"
    same = stored is not None and stored["verdict"] == v["verdict"]
    out.print(f"stored verdict {before}, replayed {v['verdict']}: {'the same' if same else 'DIFFERENT'}")
    if result["outcome"] != "drained":
        raise typer.Exit(EXIT_INCONCLUSIVE)
    if not same:
        raise typer.Exit(EXIT_VIOLATION)


@app.command(epilog="\b\nExample: streamchaos analyze runs/c1")
def analyze(campaign_dir: Annotated[Path, typer.Argument(help="a campaign directory")]) -> None:
    """Re-check every stored trial of a campaign without Spark; rewrite its summary and report."""
    from chaos.atomic import write_json
    from chaos.campaign import Campaign
    from pipelines_under_test import for_run
    from properties.check import check_run
    from reports.html import write_report

    campaign = Campaign.load(campaign_dir)
    same, changed, unfinished = 0, [], []
    for trial_id in campaign.trial_ids():
        d = campaign.trial_dir(trial_id)
        if not (d / "result.json").exists():
            unfinished.append(trial_id)
            continue
        before = campaign.verdict_of(trial_id)
        check_run(d, for_run(d))
        after = campaign.verdict_of(trial_id)
        if before and before["verdict"] == after["verdict"] and before["meets"] == after["meets"]:
            same += 1
        else:
            changed.append((trial_id, before["verdict"] if before else None, after["verdict"]))
    for trial_id, before, after in changed:
        out.print(f"  {trial_id}: {before or 'unchecked'} -> [bold]{after}[/]")
    out.print(f"re-checked {same + len(changed)} trial(s): {same} unchanged, {len(changed)} changed"
              + (f", {len(unfinished)} unfinished (resume the campaign)" if unfinished else ""))
    summary = campaign.summarize()
    write_json(campaign.root / "summary.json", summary)
    print_summary(summary)
    out.print(f"report: {write_report(campaign.root)}")
    if summary["exit_code"]:
        raise typer.Exit(summary["exit_code"])


@app.command(epilog="\b\nExample: streamchaos report runs/c1 -o /tmp/c1.html")
def report(
    campaign_dir: Annotated[Path, typer.Argument(help="a campaign directory")],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="the HTML file (default DIR/report.html)")]
    = None,
) -> None:
    """Write the self-contained HTML consistency report of a campaign."""
    from chaos.campaign import Campaign
    from reports.html import write_report

    Campaign.load(campaign_dir)  # one clear line for a directory that is not a campaign
    out.print(f"report: {write_report(campaign_dir, output)}")


@app.command(epilog="\b\nExample: streamchaos pipelines")
def pipelines() -> None:
    """List the catalogue: name, declared guarantee, what it shows."""
    from pipelines_under_test import CATALOGUE

    width = max(len(n) for n in CATALOGUE)
    for name, p in CATALOGUE.items():
        first = (p.description or (p.__doc__ or "")).strip().splitlines()[0] if (p.description or p.__doc__) else ""
        out.print(f"{name:<{width}}  {p.guarantee:<13}  {first}")


@app.command(epilog="\b\nExample: streamchaos doctor --rebuild-archives")
def doctor(
    rebuild_archives: Annotated[bool, typer.Option("--rebuild-archives",
                                                   help="forget failed class-archive builds: the next harness "
                                                        "start builds them again")] = False,
) -> None:
    """Check what trials need (Java, PySpark, PostgreSQL, ports, disk, memory) and say how to fix what is missing."""
    from chaos.doctor import clear_archive_failures, run_checks

    if rebuild_archives:
        cleared = clear_archive_failures()
        out.print(f"cleared {len(cleared)} failed class-archive build(s): the next harness start builds them")
    failed = 0
    for check in run_checks():
        mark = {"ok": "[green]ok[/]  ", "warn": "[yellow]warn[/]", "fail": "[red]FAIL[/]"}[check.status]
        out.print(f"{mark} {check.name}: {check.detail}" + (f" — {check.fix}" if check.fix and check.status != "ok"
                                                              else ""))
        failed += check.status == "fail"
    if failed:
        out.print(f"{failed} check(s) failed: trials cannot run until they are fixed")
        raise typer.Exit(EXIT_VIOLATION)


def verdict_fields(run_dir: Path) -> dict:
    """The checker's view of a stored run (properties/ decides; the runner only recorded)."""
    from pipelines_under_test import for_run
    from properties.check import check_run

    return _summary(check_run(run_dir, for_run(run_dir)))


def _summary(v: dict) -> dict:
    return {
        "verdict": v["verdict"], "meets": v["meets"], "lost": v["lost"], "duplicated": v["duplicated"],
        "unexpected": v["unexpected"], "anomaly_counts": v["effect"]["counts"],
        "multiplicity": v["effect"].get("multiplicity"), "inferred": v.get("inferred", False),
        "keys": v["effect"].get("keys"), "compared": v.get("compared"),
        "redelivered": (v["deliveries"] or {}).get("redelivered"),
        "consistent_cut": v.get("consistent_cut"),
        "late_writes": v.get("late_writes"),
    }


@app.command(epilog="\b\nExample: streamchaos check runs/trial-20261124-075811")
def check(run_dir: Annotated[Path, typer.Argument(help="a stored trial directory")],
          as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Re-check a stored trial without Spark: oracle, classifier, attribution -> verdict.json."""
    from pipelines_under_test import for_run
    from properties.check import check_run

    v = check_run(run_dir, for_run(run_dir))
    if as_json:
        print(json.dumps(v, indent=2, default=str))
    else:
        print_verdict(_summary(v))
    if v["meets"] is None:
        raise typer.Exit(EXIT_INCONCLUSIVE)
    if v["meets"] is False or (v.get("consistent_cut") or {}).get("ok") is False:
        raise typer.Exit(EXIT_VIOLATION)


def print_verdict(v: dict) -> None:
    meets = {True: "meets", False: "VIOLATES", None: "inconclusive for"}[v["meets"]]
    n = v["anomaly_counts"]
    compared = v.get("compared")  # a user's job: rows (or final rows per key) against Spark's answer
    unit = (f"{compared} against Spark's answer" if compared else
            "events inferred from per-key counts" if v.get("inferred") else "ids")
    out.print(f"  verdict: [bold]{v['verdict']}[/] ({meets} its declared guarantee): "
              f"{n['lost']} lost, {n['duplicated']} duplicated, {n['unexpected']} unexpected ({unit})")
    if v.get("multiplicity"):
        m = v["multiplicity"]
        out.print(f"  ids in sink: {m['0']} missing, {m['1']} once, {m['>1']} more than once")
    if v.get("keys") and compared:
        k = v["keys"]
        out.print(f"  {compared} (inferred, no provenance): {k['exact']} exact, {k['over']} over, {k['under']} under, "
                  f"{k.get('optional', 0)} optional (touched by late records)")
    elif v.get("keys"):
        k = v["keys"]
        out.print(f"  keys (inferred, no provenance): {k['exact']} exact, {k['over']} over-counted, "
                  f"{k['under']} under-counted")
    for kind in ("lost", "duplicated"):
        if v.get("inferred"):
            what = "row" if compared == "rows" else "key" if compared else "event(s) of key"
            for a in v[kind][:8]:
                count = f"{abs(a['delta'])} " if not compared else ""
                out.print(f"    {kind} {count}{what} {a['key']}: batches {a['batches'][:6]}, "
                          f"after fault(s) {', '.join(a['faults']) or 'none'}")
            continue
        by_cause: dict[tuple, list[int]] = {}
        for a in v[kind]:
            by_cause.setdefault((a["batch"], a["fault"], a.get("why")), []).append(a["id"])
        for (batch, fault, why), ids in by_cause.items():
            cause = f"fault {fault} ({why})" if fault else (why or "no fault fired")
            out.print(f"    {kind} e.g. ids {ids[:8]}: read by batch {batch}; {cause}")
    late = v.get("late_writes")
    if late:
        rows = late.get("rows")
        out.print("  [bold]late writes[/]: the sink changed after the trial ended ("
                  + (f"{rows:+d} rows, " if isinstance(rows, int) else "")
                  + f"{len(late['changed']) + len(late['added']) + len(late['removed'])} file(s)): the verdict "
                  "is judged from the sink as the trial ended it")
    for u in v["unexpected"][:5]:
        what = f"id {u['id']}" if "id" in u else f"key {u.get('key')!r}"
        out.print(f"    unexpected {what}: {u['why']}")
    for r in v.get("redelivered") or []:
        out.print(f"    batch {r['batch']} delivered {r['times']} times, effective {r['effective']}")
    cut = v.get("consistent_cut")
    if cut is not None:
        if cut["ok"] is None:
            out.print("  consistent cut: no state was dumped (the driver did not stop cleanly)")
        elif cut["ok"]:
            out.print(f"  consistent cut: state matches the oracle at all {len(cut['batches_checked'])} "
                      f"checked batches (of {cut['committed_batches']} committed)")
        else:
            out.print(f"  consistent cut: [bold]BROKEN[/] at {cut['mismatch_count']} (batch, key) pair(s)")
            for m in cut["mismatches"][:5]:
                out.print(f"    batch {m['batch']} key {m['key']!r}: expected {m.get('expected')}, "
                          f"state has {m.get('actual')}")


def print_result(result: dict) -> None:
    out.print(f"[bold]{result['pipeline']}[/] ({result['guarantee']} declared): {result['events']} events, "
              f"{result['batches']} batches committed, {result['restarts']} driver restart(s), "
              f"{result['seconds']}s — {result['outcome']} {result['reason']}")
    for f in result["faults"]:
        state = f"fired at t={f['t']}s" if f["fired"] else "NOT fired"
        extra = ", ".join(f"{k}={v}" for k, v in f["detail"].items() if k not in ("done", "spec"))
        out.print(f"  fault {f['spec']}: {state} (batch {f['batch']}, {f['phase']}) {extra}")
    if "verdict" in result:
        print_verdict(result)
    for rec in result.get("recoveries", []):
        took = (f"{rec['seconds']}s from the kill to the next committed batch" if rec["seconds"] is not None
                else "no batch committed after the kill")
        out.print(f"  recovery after {rec['spec']}: {took}")
    for d in result.get("drivers", []):
        if d["incarnation"] > 0 or d["driver_start"] != "cold":
            out.print(f"  driver {d['incarnation']}: {d['driver_start']}" + (f" ({d['why']})" if d.get("why") else ""))
    out.print(f"  run directory: {result['run_dir']}")


spark_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                        help="Other PySpark versions to run trials on (--spark VERSION).")
app.add_typer(spark_app, name="spark")


@spark_app.command("add", epilog="\b\nExample: streamchaos spark add 4.1.0")
def spark_add(version: Annotated[str, typer.Argument(help="a PySpark release, 4.0.0 or later")]) -> None:
    """Install PySpark VERSION into an environment of its own (once), for `streamchaos --spark VERSION ...`."""
    from chaos.sparkenv import add

    python = add(version, echo=err.print)
    out.print(f"pyspark {version} ready: {python} (run a trial on it: streamchaos --spark {version} trial ...)")


@spark_app.command("list", epilog="\b\nExample: streamchaos spark list")
def spark_list() -> None:
    """The installed PySpark and every added version."""
    from chaos.sparkenv import current_version, installed

    out.print(f"{current_version()}  (installed, the default)")
    for version, python in installed().items():
        out.print(f"{version}  {python}")


@spark_app.command("remove", epilog="\b\nExample: streamchaos spark remove 4.1.0")
def spark_remove(version: Annotated[str, typer.Argument(help="an added PySpark version")]) -> None:
    """Delete an added version's environment."""
    from chaos.sparkenv import remove

    if not remove(version):
        raise UserError(f"pyspark {version} was not added: `streamchaos spark list` shows what was")
    out.print(f"removed pyspark {version}")


image_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                        help="The node image of --cluster docker, built offline from Debian's packages.")
app.add_typer(image_app, name="image")


@image_app.command("build", epilog="\b\nExample: streamchaos image build")
def image_build(force: Annotated[bool, typer.Option("--force", help="build again even if it exists")] = False) -> None:
    """Build the node image (Debian with Java 17, by debootstrap and docker import) unless it exists."""
    from chaos.containers import client
    from chaos.image import build

    docker_client = client()
    try:
        tag = build(docker_client, echo=err.print, force=force)
    finally:
        docker_client.close()
    out.print(tag)


@app.command(epilog="\b\nExample: streamchaos reap")
def reap() -> None:
    """Kill processes left by a harness that was itself killed (every start does this too)."""
    from chaos.containers import reap_containers
    from chaos.procs import reap_orphans

    out.print(f"reaped {reap_orphans()} orphan process(es), {reap_containers()} container(s) and network(s)")


def _switch_spark() -> None:
    """``--spark VERSION``: run this very command on that version's environment (chaos/sparkenv.py)."""
    if not any(a == "--spark" or a.startswith("--spark=") for a in sys.argv[1:]):
        return
    from chaos.sparkenv import current_version, run_on, split_spark_option

    version, rest = split_spark_option(sys.argv[1:])
    if version != current_version():
        run_on(version, rest)  # does not return
    sys.argv[1:] = rest


def main() -> None:
    interrupt.install()
    try:
        _switch_spark()
        # Not standalone: typer then returns exit codes (typer.Exit, and 130 for Ctrl-C) instead of
        # exiting, and raises usage errors, so every way out passes through here.
        rc = app(standalone_mode=False)
        if rc == 130 or interrupt.requested():  # a Ctrl-C that landed where Python ignored it
            raise KeyboardInterrupt
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except HarnessError as exc:
        print(f"harness failure: {exc}", file=sys.stderr)
        sys.exit(EXIT_INCONCLUSIVE)
    except KeyboardInterrupt:
        err.print("interrupted: every process the harness started was stopped")
        sys.exit(130)
    except Exception as exc:
        # Usage errors of the click that typer carries (its module path varies by version).
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            message = exc.format_message()
            if message:  # empty when the help screen was the answer
                print(f"error: {message}", file=sys.stderr)
            sys.exit(EXIT_BAD_INPUT)
        if type(exc).__name__ == "Abort":
            sys.exit(130)
        raise
