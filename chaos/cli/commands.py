"""The ``streamchaos`` command line. User mistakes end as one line on stderr and exit 2."""

from __future__ import annotations

import errno
import json
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from chaos.campaign.shards import SHARD_HELP
from chaos.cli.console import err, out, print_result, print_summary, print_verdict
from chaos.clusters.registry import kind_of, with_image
from chaos.errors import EXIT_BAD_INPUT, EXIT_INCONCLUSIVE, EXIT_VIOLATION, HarnessError, UserError
from chaos.machine import interrupt
from chaos.machine.own_packages import bind
from chaos.scenario.scenario import EVENTS, EVENTS_PER_BATCH, KEYS, MAX_DISORDER_MS

CLUSTER_HELP = ("standalone | docker (Spark on Docker nodes: streamchaos image build) | ssh:FILE (hosts over SSH: "
                "docs/clusters.md) | local-cluster[W,C,M] | spark://HOST:PORT")
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Fault injection and consistency testing for PySpark Structured Streaming.",
                  epilog="\b\nExample: streamchaos demo")

# Every command that runs trials: pre-warmed drivers unless the user asks for cold restarts.
# The options ``trial`` and ``campaign run`` (and the commands like them) share, defined once.
ClusterOpt = Annotated[str, typer.Option("--cluster", help=CLUSTER_HELP)]
Workers = Annotated[int, typer.Option("--workers", help="workers of the standalone cluster")]
Brokers = Annotated[int, typer.Option("--brokers", help="Kafka brokers, each a node of --cluster docker (every "
                                                       "partition on up to three; broker faults hit the leader)")]
Toxiproxy = Annotated[str | None, typer.Option("--toxiproxy", help="host:port of a real Toxiproxy server (default: "
                                                                   "the embedded one; or TOXIPROXY_URL)")]
RecoveryTimeout = Annotated[float, typer.Option("--recovery-timeout", help="seconds a trial waits without a commit "
                                                                           "before it is 'stalled'")]
Partitions = Annotated[int | None, typer.Option("--partitions", help="partitions of the event log (default: the "
                                                                     "pipeline's, else 2)")]
Keys = Annotated[int | None, typer.Option("--keys", help=f"distinct keys in the stream (default {KEYS})")]
Skew = Annotated[float | None, typer.Option("--skew", help="Zipf exponent of the key distribution (0 = uniform; "
                                                           "default 1)")]
MaxDisorder = Annotated[int | None, typer.Option("--max-disorder-ms", help="bound of event-time disorder, ms "
                                                                           f"(default {MAX_DISORDER_MS})")]
LateFraction = Annotated[float | None, typer.Option("--late-fraction", help="share of events 10 minutes late "
                                                                            "(default: the pipeline's, else 0)")]
ResentFraction = Annotated[float | None, typer.Option("--resent-fraction", help="share of events re-sent with a new "
                                                                                "id (default: the pipeline's, else 0)")]

Standby = Annotated[bool, typer.Option("--standby/--no-standby",
                                       help="pre-warmed drivers: a standby takes over a killed driver and each "
                                            "trial's first driver boots ahead (--no-standby: cold restarts)")]

Image = Annotated[str | None, typer.Option(
    help="with --cluster docker: your node image (Java 17 on its PATH, /bin/sh; this machine's Python and Spark "
         "are mounted in), instead of the one `streamchaos image build` makes")]

# A user's job as written (module:function): what the harness needs beside it (chaos/jobs/reference.py).
JobSchema = Annotated[str | None, typer.Option(
    "--schema", help="your job: the payload's fields as Spark DDL, e.g. 'customer STRING, amount LONG, ts TIMESTAMP'")]
JobSink = Annotated[str | None, typer.Option(
    "--sink", help="your job: where it writes, postgres:TABLE or sqlite:TABLE (handed DATABASE_URL), parquet (its "
                   "file sink) or delta[:PATH] (its Delta table); after a table another query of the job writes "
                   "and this one reads: delta:/lake/bronze,delta:/lake/silver")]
JobKey = Annotated[str | None, typer.Option(
    "--key", help="your job: columns of an upsert sink's key, compared as the final row per key")]
JobValues = Annotated[list[str] | None, typer.Option(
    "--values", help="your job: the values a payload field takes (repeatable): FIELD=a,b,c, FIELD=1..100 or "
                     "FIELD=@file.csv (its FIELD column, else its first)")]
JobKafka = Annotated[str | None, typer.Option(
    "--kafka", help="your job's Kafka source: connector (Spark's Kafka connector on the harness's broker), stand-in "
                    "(the harness's own source shaped as Kafka's) or auto (the connector where Maven serves it for "
                    "this Spark; default)")]
JobId = Annotated[str | None, typer.Option(
    "--id", help="your job: the payload field that carries the event id (default: the first named like one, "
                 "id, uuid, *_id, *Id, *ID)")]
JobTime = Annotated[str | None, typer.Option(
    "--time", help="your job: the event-time field and its form, FIELD[:FORM] with FORM timestamp (default), "
                   "epoch-ms, epoch-s or the job's Spark pattern ('ts:yyyy-MM-dd HH:mm:ss'); none if it has none")]
JobKafkaValue = Annotated[str | None, typer.Option(
    "--kafka-value", help="your job: the form of its Kafka records' values, json (default), csv (one line of the "
                          "payload's fields in order, as from_csv reads it), avro:FILE (Avro in the .avsc the job's "
                          "from_avro decodes with) or avro-confluent:FILE (with a schema registry's 5-byte header)")]
SqlInit = Annotated[list[Path] | None, typer.Option(
    "--sql-init", help="your job: a SQL file run in the trial's and the oracle's databases before the job starts "
                       "(the DDL a repository keeps beside its job; repeatable)")]
ScriptArgs = Annotated[list[str] | None, typer.Argument(
    help="your script's own arguments, after -- (trial job.py --sink parquet -- --input x)", show_default=False)]
Ray = Annotated[str | None, typer.Option(
    help="run the trials on a Ray cluster, one harness per node: its address HOST:PORT, or auto (docs/scale.md)")]
Expect = Annotated[str | None, typer.Option(
    help="judge against this guarantee instead of the declared one (exactly-once, at-least-once, at-most-once, "
         "none, incorrect)")]

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
    pipeline: Annotated[str, typer.Argument(help="catalogue name, module:attribute, your job's module:function or "
                                                 "its script path/to/job.py")],
    args: ScriptArgs = None,
    events: Annotated[int, typer.Option(help="events in the stream")] = EVENTS,
    seed: Annotated[int, typer.Option(help="seed of the event stream")] = 0,
    fault: Annotated[list[str] | None, typer.Option(help="ACTION@BATCH:PHASE[/ARG...], or ACTION@SECONDSs[/ARG...] "
                                                         "at a time from the trial's start; repeatable")] = None,
    events_per_batch: Annotated[int, typer.Option(help="events per micro-batch")] = EVENTS_PER_BATCH,
    partitions: Partitions = None,
    keys: Keys = None,
    skew: Skew = None,
    max_disorder_ms: MaxDisorder = None,
    late_fraction: LateFraction = None,
    resent_fraction: ResentFraction = None,
    cluster: ClusterOpt = "standalone",
    workers: Workers = 2,
    brokers: Brokers = 1,
    downtime: Annotated[float, typer.Option(help="seconds a killed driver stays down")] = 1.0,
    recovery_timeout: RecoveryTimeout = 180.0,
    keep: Annotated[Path | None, typer.Option(help="run directory to keep (default runs/trial-<time>)")] = None,
    toxiproxy: Toxiproxy = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as one JSON object")] = False,
    conf: Annotated[list[str] | None, typer.Option(
        help="KEY=VALUE for the pipeline's query (repeatable): a spark.* setting, trigger=processingTime:3s|"
             "availableNow|once, or a writeStream option")] = None,
    standby: Standby = True,
    image: Image = None,
    schema: JobSchema = None,
    sink: JobSink = None,
    key: JobKey = None,
    values: JobValues = None,
    kafka: JobKafka = None,
    id_name: JobId = None,
    time_field: JobTime = None,
    kafka_value: JobKafkaValue = None,
    sql_init: SqlInit = None,
    expect: Expect = None,
) -> None:
    """Run one trial of PIPELINE (or your job's module:function) under a fault schedule and print what happened."""
    from chaos.run.admission import trial_scenario
    from chaos.run.harness import Harness
    from chaos.run.judge import check_expect, run_trial, trial_exit_code

    check_expect(expect)
    scenario = trial_scenario(pipeline, events, seed, fault, events_per_batch, partitions, keys, skew,
                              max_disorder_ms, late_fraction, resent_fraction, cluster, workers, brokers, downtime,
                              recovery_timeout, conf, image, schema, sink, key, values, kafka, args, id_name,
                              [str(p) for p in sql_init or []], time_field, kafka_value)
    run_dir = keep or Path("runs") / time.strftime("trial-%Y%m%d-%H%M%S")
    from pipelines_under_test import resolve

    for note in resolve(scenario.pipeline).notes:  # what the trial does to the job's own settings
        err.print(note, markup=False)
    with Harness(cluster=scenario.cluster, workers=workers, workdir=run_dir.parent, toxiproxy=toxiproxy,
                 standby=standby, echo=err.print) as harness:
        if not as_json:
            err.print(f"cluster {harness.cluster.master_url} up in {harness.timings['cluster_start_s']}s")
        result = run_trial(harness, scenario, run_dir, last=True, expect=expect)
    if as_json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print_result(result)
    code = trial_exit_code(result)
    if code:
        raise typer.Exit(code)


@app.command(epilog="\b\nExample: streamchaos init examples/orders_upsert.py:run --schema 'order_id STRING, "
                    "customer STRING, amount LONG, ts TIMESTAMP' --sink postgres:customer_totals --key customer")
def init(
    job: Annotated[str, typer.Argument(help="your job's entry point: module:function or path/to/job.py:function")],
    schema: JobSchema = None,
    sink: JobSink = None,
    key: JobKey = None,
    values: JobValues = None,
    id_name: JobId = None,
    time_field: JobTime = None,
    kafka_value: JobKafkaValue = None,
    sql_init: SqlInit = None,
    test_file: Annotated[Path | None, typer.Option("--out", help="the test file (default "
                                                                "tests/test_<job>_consistency.py)")] = None,
    args: ScriptArgs = None,
) -> None:
    """Write a starter pytest for your job: a consistency check under crashes, ready to run with `pytest`."""
    from chaos.jobs.reference import job_ref
    from chaos.jobs.starter import starter_test
    from chaos.scenario.names import is_script

    if ":" not in job and not is_script(job):
        raise UserError(f"{job!r}: name your job's entry point as module:function, path/to/job.py:function or a "
                        "script path/to/job.py")
    if not sink:
        raise UserError("--sink is needed: where the job writes, postgres:TABLE, sqlite:TABLE, parquet or delta[:PATH]")
    path = starter_test(job_ref(job, schema, sink, key, values, args=args, id_name=id_name,
                                sql_init=[str(f) for f in sql_init or []], time=time_field,
                                encoding=kafka_value), test_file)
    out.print(f"wrote {path}: run it with `pytest {path}`", markup=False)


@app.command(epilog="\b\nExample: streamchaos demo --out runs/demo")
def demo(
    out_dir: Annotated[Path, typer.Option("--out", help="the campaign directory (default runs/demo-<time>)")] = None,
    events: Annotated[int, typer.Option(help="events per trial")] = 1000,
) -> None:
    """A short campaign: are the append and the idempotent sinks exactly-once? Ends with its HTML report."""
    from chaos.campaign.stored import Campaign, CampaignSpec

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
        help="fault kinds: kill,pause,channel,checkpoint,db,kafka,node,decommission (node: --cluster "
             "docker)")] = "kill",
    trials: Annotated[int | None, typer.Option(
        help="planned trials per pipeline in all: --example schedules first, then the canonical windows, then "
             "drawn schedules (default 3)")] = None,
    time_budget: Annotated[str | None, typer.Option(help="stop starting trials after this much, e.g. 30m")] = None,
    seed: Annotated[int, typer.Option(help="seed of the plan and the event streams")] = 0,
    events: Annotated[int, typer.Option(help="events per trial")] = EVENTS,
    events_per_batch: Annotated[int, typer.Option(help="events per micro-batch")] = EVENTS_PER_BATCH,
    partitions: Partitions = None,
    keys: Keys = None,
    skew: Skew = None,
    max_disorder_ms: MaxDisorder = None,
    late_fraction: LateFraction = None,
    resent_fraction: ResentFraction = None,
    max_faults: Annotated[int, typer.Option(help="faults per trial at most")] = 2,
    recovery_timeout: RecoveryTimeout = 180.0,
    expect: Expect = None,
    example: Annotated[list[str] | None, typer.Option(help="a schedule to try first, e.g. 'kill-driver@3:sink-done'; "
                                                           "repeatable")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="campaign directory (default runs/campaign-<time>)")]
    = None,
    shrink: Annotated[bool, typer.Option("--shrink/--no-shrink", help="shrink each violation")] = True,
    shrink_trials: Annotated[int, typer.Option(help="trials a shrink may spend")] = 6,
    timing: Annotated[str, typer.Option(help="phase: faults at their planned batch and phase; random: the same "
                                             "faults at uniform wall-clock times over a no-fault trial's "
                                             "duration, as time-based chaos tools fire them (no shrink)")]
    = "phase",
    cluster: ClusterOpt = "standalone",
    workers: Workers = 2,
    brokers: Brokers = 1,
    toxiproxy: Toxiproxy = None,
    conf: Annotated[list[str] | None, typer.Option(
        help="KEY=V1,V2: run every pipeline under each value (repeatable: every combination), e.g. "
             "spark.sql.streaming.stateStore.providerClass=A,B or asyncProgressTrackingEnabled=false,true")] = None,
    standby: Standby = True,
    image: Image = None,
    schema: JobSchema = None,
    sink: JobSink = None,
    key: JobKey = None,
    values: JobValues = None,
    kafka: JobKafka = None,
    id_name: JobId = None,
    time_field: JobTime = None,
    kafka_value: JobKafkaValue = None,
    sql_init: SqlInit = None,
    shard: Annotated[str | None, typer.Option(help=SHARD_HELP)] = None,
    ray: Ray = None,
    shards: Annotated[int | None, typer.Option(help="with --shard auto in a Kubernetes Indexed Job: its completions")]
    = None,
    args: ScriptArgs = None,
) -> None:
    """Generate scenarios, run them, shrink every violation, store everything, write the HTML report."""
    from chaos.campaign.shards import parse_shard
    from chaos.campaign.stored import Campaign, CampaignSpec, parse_time_budget
    from chaos.jobs.reference import job_ref
    from chaos.scenario.variants import parse_matrix
    from properties.planning import parse_kinds

    share = parse_shard(shard, shards)

    cluster = with_image(cluster, image)
    spec = CampaignSpec(
        pipelines=[job_ref(p, schema, sink, key, values, kafka, args, id_name=id_name,
                           sql_init=[str(f) for f in sql_init or []], time=time_field, encoding=kafka_value)
                   for p in pipeline or []],
        expect=expect,
        kinds=list(parse_kinds(faults)),
        trials=trials if trials is not None or time_budget else 3, time_budget_s=parse_time_budget(time_budget),
        seed=seed, events=events, events_per_batch=events_per_batch, partitions=partitions, keys=keys, skew=skew,
        max_disorder_ms=max_disorder_ms, late_fraction=late_fraction, resent_fraction=resent_fraction,
        max_faults=max_faults, shrink=shrink, recovery_timeout=recovery_timeout,
        shrink_trials=shrink_trials, examples=list(example or []), cluster=cluster, workers=workers,
        brokers=brokers, conf=parse_matrix(list(conf or [])) or None, timing=timing)
    if max_faults < 1:
        raise UserError(f"--max-faults must be at least 1, got {max_faults}")
    if refused_brokers := kind_of(cluster).brokers_refusal(brokers):
        raise UserError(refused_brokers)
    if recovery_timeout <= 0:
        raise UserError(f"--recovery-timeout must be a positive number of seconds, got {recovery_timeout:g}")
    if ray is not None and timing != "phase":
        raise UserError("--timing random runs on one machine or in shards, not on --ray: drop one of them")
    _require_runner(ray)
    default = time.strftime("campaign-%Y%m%d-%H%M%S") + (f"-shard-{share[0]}-of-{share[1]}" if share else "")
    campaign = Campaign.create(out_dir or Path("runs") / default, spec, shard=share)
    if share:
        err.print(f"campaign {campaign.root}: shard {share[0]}/{share[1]}, {len(campaign.share)} of "
                  f"{len(campaign.plan)} planned trials (plan {campaign.data['plan_hash']}); "
                  + (f"--time-budget {time_budget} applies to this shard; " if time_budget else "")
                  + "merge the shards with `streamchaos campaign merge OUT DIR...`")
    else:
        err.print(f"campaign {campaign.root}: {len(campaign.plan)} planned trials; "
                  f"resume with `streamchaos campaign resume {campaign.root}` if interrupted")
    summary = _execute(campaign, toxiproxy, standby=standby, ray=ray)
    if summary["exit_code"]:
        raise typer.Exit(summary["exit_code"])


@campaign_app.command("merge", epilog="\b\nExample: streamchaos campaign merge runs/all runs/shard-1 runs/shard-2")
def campaign_merge(
    out_dir: Annotated[Path, typer.Argument(help="the merged campaign directory (new or empty)")],
    dirs: Annotated[list[Path], typer.Argument(help="the shards' campaign directories")],
) -> None:
    """Merge the shards of one plan into one campaign directory: summary, shrinks, one HTML report."""
    from chaos.campaign.merge import merge
    from chaos.store.atomic import write_json
    from reports.html import write_report

    merged, seen = merge(out_dir, dirs)
    summary = merged.summarize()
    write_json(merged.root / "summary.json", summary)
    err.print(f"merged {seen['shards']} shard director{'y' if seen['shards'] == 1 else 'ies'} of plan "
              f"{merged.data['plan_hash']} into {merged.root}: {summary['finished']} of {summary['planned']} "
              "planned trials finished")
    if seen["missing"]:
        err.print(f"missing ({len(seen['missing'])}, no shard finished them; the claims cover what ran): "
                  + ", ".join(seen["missing"]))
    for line in seen["conflicts"]:
        err.print(f"the same trial with two verdicts (the first kept): {line}")
    for prefix, others in seen["shrinks"].items():
        for other in others:
            err.print(f"{prefix}: another shard's counterexample, kept beside the smallest: {other}")
    print_summary(summary)
    out.print(f"report: {write_report(merged.root)}")
    if summary["exit_code"]:
        raise typer.Exit(summary["exit_code"])


@campaign_app.command("resume", epilog="\b\nExample: streamchaos campaign resume runs/c1")
def campaign_resume(
    campaign_dir: Annotated[Path, typer.Argument(help="the directory of an interrupted campaign")],
    toxiproxy: Toxiproxy = None,
    standby: Standby = True,
    ray: Ray = None,
) -> None:
    """Continue an interrupted campaign: finished trials are kept, the one in flight is rerun."""
    from chaos.campaign.stored import Campaign, remove_unfinished

    campaign = Campaign.load(campaign_dir)
    if ray is not None and campaign.spec.timing != "phase":
        raise UserError("this campaign fires its faults at random times (--timing random): resume it on one "
                        "machine, without --ray")
    _require_runner(ray)
    removed = remove_unfinished(campaign)
    if removed:
        err.print(f"discarded {len(removed)} trial(s) the interrupted harness left unfinished: {', '.join(removed)}")
    summary = _execute(campaign, toxiproxy, standby=standby, ray=ray)
    if summary["exit_code"]:
        raise typer.Exit(summary["exit_code"])


@app.command(epilog="\b\nExample: streamchaos conformance --trials 3 --only passthrough-append")
def conformance(
    trials: Annotated[int, typer.Option(help="trials per documented row")] = 3,
    seed: Annotated[int, typer.Option(help="seed of the event streams")] = 0,
    events: Annotated[int, typer.Option(help="events per trial")] = 1000,
    only: Annotated[list[str] | None, typer.Option(help="run only this row's pipeline, repeatable")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="directory (default runs/conformance-<time>)")] = None,
    cluster: ClusterOpt = "standalone",
    workers: Workers = 2,
    toxiproxy: Toxiproxy = None,
    standby: Standby = True,
    image: Image = None,
    mix: Annotated[str, typer.Option(help="kill: driver and executor kills; decommission: Spark's graceful "
                                          "decommission of executors and workers (judged by the same rows)")] = "kill",
) -> None:
    """Measure Spark's documented guarantees row by row under a standard fault mix; exit 1 on a contradiction."""
    from chaos.campaign import conformance as conf
    from chaos.campaign.stored import Campaign, CampaignSpec
    from pipelines_under_test import resolve

    if trials < 1:
        raise UserError(f"--trials must be at least 1, got {trials}")
    if mix not in conf.MIXES:
        raise UserError(f"--mix {mix!r}: use one of {', '.join(conf.MIXES)}")
    cluster = with_image(cluster, image)
    rows = conf.select_rows(list(only or []))
    names = [r.pipeline for r in rows]
    kinds = ["decommission"] if mix == "decommission" else ["kill", "channel"]
    spec = CampaignSpec(pipelines=names, kinds=kinds, trials=trials, seed=seed,
                        events=events, shrink=False, cluster=cluster, workers=workers,
                        schedules={n: conf.standard_mix(resolve(n), trials, mix) for n in names})
    _require_java()
    campaign = Campaign.create(out_dir or Path("runs") / time.strftime("conformance-%Y%m%d-%H%M%S"), spec)
    err.print(f"conformance {campaign.root}: {len(rows)} rows, {len(campaign.plan)} trials")
    found: dict = {}

    def finish(summary: dict) -> None:
        verdicts: dict[str, list[dict]] = {}
        for entry in campaign.plan:
            verdicts.setdefault(entry["pipeline"], []).append(campaign.verdict_of(entry["id"]))
        found.update(conf.table(rows, summary, verdicts), mix=mix)
        conf.write(campaign.root, found)

    _execute(campaign, toxiproxy, finish, standby=standby)
    for r in found["rows"]:
        out.print(f"{r['component']:<58} docs: {r['documented']:<14} measured: {r['measured'] or '-':<14} "
                  f"{r['status']} ({r['trials']} trials){'; e.g. ' + r['example'] if r['example'] else ''}")
    if found["contradictions"]:
        raise typer.Exit(1)
    if any(r["agrees"] is None for r in found["rows"]):
        raise typer.Exit(3)


def _require_runner(ray: str | None) -> None:
    """What runs the trials is there: Java here, or a Ray cluster that answers (the head runs no JVM)."""
    if ray is None:
        _require_java()
        return
    from chaos.campaign.on_ray import connect

    connect(ray)


def _require_java() -> None:
    from chaos.machine.java import require_java

    require_java()


def _execute(campaign, toxiproxy: str | None = None, finish=None, standby: bool = True,
             ray: str | None = None) -> dict:
    """Run a campaign on one harness (cluster, event log, proxies, database reused by every trial), or on one
    harness per node of a Ray cluster (``ray``: its address).

    ``finish(summary)`` runs before the report is written (conformance adds its table there)."""
    from chaos.cli.progress import RichProgress
    from reports.html import write_report

    spec = campaign.spec
    for s in campaign.data.get("skipped", []):
        err.print(f"skipped {s['pipeline']}: {s['reason']}")
    if not campaign.plan:
        raise UserError("nothing to run: every pipeline was skipped (see above)")
    # Standby and spare drivers change how fast a trial runs, not what it does: not part of the spec.
    options = {"cluster": spec.cluster, "workers": spec.workers, "toxiproxy": toxiproxy, "standby": standby,
               "spare": standby}
    if ray is not None:
        from chaos.campaign.on_ray import run_on_ray

        summary = run_on_ray(campaign, ray, options, RichProgress(err), echo=err.print)
    else:
        from chaos.campaign.runner import Runner
        from chaos.run.harness import Harness

        campaign.require_spark()
        with Harness(**options, workdir=campaign.root / "harness", data_dir=campaign.root, echo=err.print) as harness:
            err.print(f"cluster {harness.cluster.master_url} up in {harness.timings['cluster_start_s']}s")
            summary = Runner(campaign, harness, RichProgress(err)).run()
    if finish is not None:
        finish(summary)
    report = write_report(campaign.root)
    print_summary(summary)
    out.print(f"report: {report}")
    return summary


@app.command(epilog="\b\nExample: streamchaos replay runs/c1/trials/passthrough-append-000")
def replay(
    trial_dir: Annotated[Path, typer.Argument(help="a stored trial, e.g. DIR/trials/ID")],
    out_dir: Annotated[Path | None, typer.Option("--out", help="where the rerun goes (default: beside it)")] = None,
    cluster: Annotated[str | None, typer.Option(help="override the stored cluster setting")] = None,
    standby: Standby = True,
    expect: Expect = None,
) -> None:
    """Rerun one stored trial from its scenario and compare the two verdicts (exit 1 if they differ, or with
    --expect if the replay does not meet it)."""
    from dataclasses import replace

    from chaos.run.harness import Harness
    from chaos.run.judge import check_expect, expecting, judge, verdict_fields
    from chaos.scenario.scenario import Scenario
    from chaos.store.records import load_verdict

    check_expect(expect)
    if not (trial_dir / "scenario.json").is_file():
        raise UserError(f"{trial_dir} is not a stored trial (no scenario.json): give DIR/trials/ID")
    scenario = Scenario.load(trial_dir / "scenario.json")
    if cluster:
        scenario = replace(scenario, cluster=cluster)
    stored = load_verdict(trial_dir) if (trial_dir / "verdict.json").exists() else None
    if (trial_dir / "result.json").exists():
        from chaos.machine.spark_versions import current_version
        from chaos.store.records import load_result

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
                 standby=standby, echo=err.print) as harness:
        err.print(f"replaying {trial_dir} ({' '.join(scenario.specs) or 'no fault'}) into {out_dir}")
        result = harness.trial(scenario, out_dir, last=True)
    v = judge(out_dir)
    result.update(expecting(verdict_fields(v), expect))
    print_result(result)
    before = stored["verdict"] if stored else "unknown"
    same = stored is not None and stored["verdict"] == v["verdict"]
    out.print(f"stored verdict {before}, replayed {v['verdict']}: {'the same' if same else 'DIFFERENT'}")
    if result["outcome"] != "drained":
        raise typer.Exit(EXIT_INCONCLUSIVE)
    if not same or (expect is not None and result["meets"] is False):
        raise typer.Exit(EXIT_VIOLATION)


@app.command(epilog="\b\nExample: streamchaos analyze runs/c1")
def analyze(campaign_dir: Annotated[Path, typer.Argument(help="a campaign directory")]) -> None:
    """Re-check every stored trial of a campaign without Spark; rewrite its summary and report."""
    from chaos.campaign.stored import Campaign
    from chaos.run.judge import judge
    from chaos.store.atomic import write_json
    from reports.html import write_report

    campaign = Campaign.load(campaign_dir)
    same, changed, unfinished = 0, [], []
    for trial_id in campaign.trial_ids():
        d = campaign.trial_dir(trial_id)
        if not (d / "result.json").exists():
            unfinished.append(trial_id)
            continue
        before = campaign.verdict_of(trial_id)
        judge(d)
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
    from chaos.campaign.stored import Campaign
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
    cluster: Annotated[str | None, typer.Option("--cluster", help="ssh:FILE: check each host of that file over "
                                                                  "SSH instead of this machine")] = None,
) -> None:
    """Check what trials need (Java, PySpark, PostgreSQL, ports, disk, memory) and say how to fix what is missing."""
    from chaos.cli.doctor import clear_archive_failures, run_checks

    if rebuild_archives:
        cleared = clear_archive_failures()
        out.print(f"cleared {len(cleared)} failed class-archive build(s): the next harness start builds them")
    remote = kind_of(cluster).remote_checks(cluster) if cluster is not None else None
    if cluster is not None and remote is None:
        raise UserError(f"doctor --cluster {cluster!r}: that cluster has no machine to check but this one: give "
                        "ssh:FILE (a cluster of hosts), or leave out --cluster to check this machine")
    failed = 0
    for check in remote if remote is not None else run_checks():
        mark = {"ok": "[green]ok[/]  ", "warn": "[yellow]warn[/]", "fail": "[red]FAIL[/]"}[check.status]
        out.print(f"{mark} {check.name}: {check.detail}" + (f" — {check.fix}" if check.fix and check.status != "ok"
                                                              else ""))
        failed += check.status == "fail"
    if failed:
        out.print(f"{failed} check(s) failed: trials cannot run until they are fixed")
        raise typer.Exit(EXIT_VIOLATION)


@app.command(epilog="\b\nExample: streamchaos check runs/trial-20261124-075811")
def check(run_dir: Annotated[Path, typer.Argument(help="a stored trial directory")],
          as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Re-check a stored trial without Spark: oracle, classifier, attribution -> verdict.json."""
    from chaos.run.judge import exit_code, judge, verdict_fields

    v = judge(run_dir)
    if as_json:
        print(json.dumps(v, indent=2, default=str))
    else:
        print_verdict(verdict_fields(v))
    code = exit_code(v)
    if code:
        raise typer.Exit(code)


spark_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                        help="Other PySpark versions to run trials on (--spark VERSION).")
app.add_typer(spark_app, name="spark")


@spark_app.command("add", epilog="\b\nExample: streamchaos spark add 4.1.0")
def spark_add(version: Annotated[str, typer.Argument(help="a PySpark release, 4.0.0 or later")]) -> None:
    """Install PySpark VERSION into an environment of its own (once), for `streamchaos --spark VERSION ...`."""
    from chaos.machine.spark_versions import add

    python = add(version, echo=err.print)
    out.print(f"pyspark {version} ready: {python} (run a trial on it: streamchaos --spark {version} trial ...)")


@spark_app.command("list", epilog="\b\nExample: streamchaos spark list")
def spark_list() -> None:
    """The installed PySpark and every added version."""
    from chaos.machine.spark_versions import current_version, installed

    out.print(f"{current_version()}  (installed, the default)")
    for version, python in installed().items():
        out.print(f"{version}  {python}")


@spark_app.command("remove", epilog="\b\nExample: streamchaos spark remove 4.1.0")
def spark_remove(version: Annotated[str, typer.Argument(help="an added PySpark version")]) -> None:
    """Delete an added version's environment."""
    from chaos.machine.spark_versions import remove

    if not remove(version):
        raise UserError(f"pyspark {version} was not added: `streamchaos spark list` shows what was")
    out.print(f"removed pyspark {version}")


image_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                        help="The node image of --cluster docker, built once with debootstrap from Debian's packages.")
app.add_typer(image_app, name="image")


@image_app.command("build", epilog="\b\nExample: streamchaos image build")
def image_build(force: Annotated[bool, typer.Option("--force", help="build again even if it exists")] = False,
                hosts: Annotated[bool, typer.Option("--hosts", help="the SSH host image instead: sshd, Python and "
                                                                    "this machine's PySpark, nothing mounted "
                                                                    "(hosts of --cluster ssh:FILE to test on)")]
                = False) -> None:
    """Build the node image (Debian with Java 17, by debootstrap and docker import) unless it exists."""
    from chaos.clusters.docker.containers import client
    from chaos.clusters.docker.image import build, host_recipe

    docker_client = client()
    try:
        tag = build(docker_client, host_recipe() if hosts else None, echo=err.print, force=force)
    finally:
        docker_client.close()
    out.print(tag)


@app.command(epilog="\b\nExample: streamchaos reap --cluster ssh:hosts.toml")
def reap(cluster: Annotated[str | None, typer.Option("--cluster", help="ssh:FILE: also reap on each host of that "
                                                                       "file, over SSH")] = None) -> None:
    """Kill processes left by a harness that was itself killed (every start does this too)."""
    from chaos.clusters.registry import reap_every_kind
    from chaos.machine.processes import reap_orphans

    out.print(f"reaped {reap_orphans()} orphan process(es), {reap_every_kind()} container(s) and network(s)")
    if cluster is None:
        return
    lines = kind_of(cluster).reap_remote(cluster)
    if lines is None:
        raise UserError(f"reap --cluster {cluster!r}: that cluster has no machine but this one: give ssh:FILE (a "
                        "cluster of hosts)")
    for line in lines:
        out.print(line)


def _switch_spark() -> None:
    """``--spark VERSION``: run this very command on that version's environment (chaos/machine/spark_versions.py)."""
    if not any(a == "--spark" or a.startswith("--spark=") for a in sys.argv[1:]):
        return
    from chaos.machine.spark_versions import current_version, run_on, split_spark_option

    version, rest = split_spark_option(sys.argv[1:])
    if version != current_version():
        run_on(version, rest)  # does not return
    sys.argv[1:] = rest


def main() -> None:
    interrupt.install()
    # The harness's own packages, not a project's namesakes that come first on the path (PYTHONPATH, the
    # working directory of `python -m chaos`): chaos/machine/own_packages.py.
    bind()
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
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        print(f"harness failure: no space left on device (ENOSPC){' writing ' + exc.filename if exc.filename else ''}"
              ": free space there and run the command again (a campaign: `streamchaos campaign resume DIR`)",
              file=sys.stderr)
        sys.exit(EXIT_INCONCLUSIVE)
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
