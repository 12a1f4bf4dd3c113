"""The ``streamchaos`` command line. User mistakes end as one line on stderr and exit 2."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from chaos.errors import HarnessError, UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Fault injection and consistency testing for PySpark Structured Streaming.")
err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)

EXIT_VIOLATION = 1
EXIT_BAD_INPUT = 2
EXIT_INCONCLUSIVE = 3


def _terminate(signum, frame) -> None:
    raise KeyboardInterrupt


@app.command()
def trial(
    pipeline: Annotated[str, typer.Argument(help="catalogue name or module:attribute")],
    events: Annotated[int, typer.Option(help="events in the stream")] = 2000,
    seed: Annotated[int, typer.Option(help="seed of the event stream")] = 0,
    fault: Annotated[list[str] | None, typer.Option(help="ACTION@BATCH:PHASE[/ARG...], repeatable")] = None,
    events_per_batch: Annotated[int, typer.Option(help="events per micro-batch")] = 200,
    partitions: Annotated[int, typer.Option(help="partitions of the event log")] = 2,
    keys: Annotated[int, typer.Option(help="distinct keys in the stream")] = 20,
    skew: Annotated[float, typer.Option(help="Zipf exponent of the key distribution (0 = uniform)")] = 1.0,
    max_disorder_ms: Annotated[int, typer.Option(help="bound of event-time disorder, ms")] = 2000,
    late_fraction: Annotated[float, typer.Option(help="share of events 10 minutes late")] = 0.0,
    resent_fraction: Annotated[float, typer.Option(help="share of events re-sent with a new id")] = 0.0,
    cluster: Annotated[str, typer.Option(help="standalone | local-cluster[W,C,M] | spark://HOST:PORT")] = "standalone",
    workers: Annotated[int, typer.Option(help="workers of the standalone cluster")] = 2,
    downtime: Annotated[float, typer.Option(help="seconds a killed driver stays down")] = 1.0,
    recovery_timeout: Annotated[float, typer.Option(help="seconds without a commit before 'stalled'")] = 180.0,
    keep: Annotated[Path | None, typer.Option(help="run directory to keep (default runs/trial-<time>)")] = None,
    toxiproxy: Annotated[str | None, typer.Option(help="host:port of a real Toxiproxy (default: embedded; "
                                                       "or TOXIPROXY_URL)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as one JSON object")] = False,
) -> None:
    """Run one trial of PIPELINE under a fault schedule and print what happened."""
    from chaos.scenario import Scenario
    from chaos.trial import Harness
    from pipelines_under_test import resolve

    scenario = Scenario(
        pipeline=pipeline, events=events, seed=seed, events_per_batch=events_per_batch,
        partitions=partitions, keys=keys, skew=skew, max_disorder_ms=max_disorder_ms,
        late_fraction=late_fraction, resent_fraction=resent_fraction, faults=list(fault or []),
        cluster=cluster, workers=workers,
        driver_downtime=downtime, recovery_timeout=recovery_timeout,
    )
    from chaos.trial import validate_schedule

    validate_schedule(scenario, resolve(pipeline))  # unknown pipeline, impossible fault: before any JVM starts
    run_dir = keep or Path("runs") / time.strftime("trial-%Y%m%d-%H%M%S")
    with Harness(cluster=cluster, workers=workers, workdir=run_dir.parent, toxiproxy=toxiproxy) as harness:
        if not as_json:
            err.print(f"cluster {harness.cluster.master_url} up in {harness.timings['cluster_start_s']}s")
        result = harness.trial(scenario, run_dir)
    result["timings"] = harness.timings
    result.update(verdict_fields(run_dir))
    if as_json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print_result(result)
    if result["outcome"] != "drained":
        raise typer.Exit(EXIT_INCONCLUSIVE)
    if result["meets"] is False or (result.get("consistent_cut") or {}).get("ok") is False:
        raise typer.Exit(EXIT_VIOLATION)


@app.command()
def demo(
    out_dir: Annotated[Path, typer.Option("--out", help="where the runs are stored")] = Path("runs/demo"),
    events: Annotated[int, typer.Option(help="events per trial")] = 2000,
) -> None:
    """Kill the driver between sink and commit, on an append sink and an idempotent one, and compare."""
    from chaos.scenario import Scenario
    from chaos.trial import Harness

    fault = "kill-driver@3:sink-done"
    with Harness(cluster="standalone", workdir=out_dir) as harness:
        err.print(f"cluster {harness.cluster.master_url} up in {harness.timings['cluster_start_s']}s; "
                  f"two trials with {fault}, about a minute each")
        results = []
        for name in ("passthrough-append", "passthrough-idempotent"):
            scenario = Scenario(pipeline=name, events=events, seed=0, faults=[fault])
            results.append(harness.trial(scenario, out_dir / name))
            results[-1].update(verdict_fields(out_dir / name))
            print_result(results[-1])
    out.print("\nThe same crash, two sinks: the append sink holds the replayed batch twice, "
              "the idempotent one replaced it.")
    if any(r["outcome"] != "drained" for r in results):
        raise typer.Exit(EXIT_INCONCLUSIVE)


def verdict_fields(run_dir: Path) -> dict:
    """The checker's view of a stored run (properties/ decides; the runner only recorded)."""
    from properties.check import check_run

    return _summary(check_run(run_dir))


def _summary(v: dict) -> dict:
    return {
        "verdict": v["verdict"], "meets": v["meets"], "lost": v["lost"], "duplicated": v["duplicated"],
        "unexpected": v["unexpected"], "anomaly_counts": v["effect"]["counts"],
        "multiplicity": v["effect"].get("multiplicity"), "inferred": v.get("inferred", False),
        "keys": v["effect"].get("keys"),
        "redelivered": (v["deliveries"] or {}).get("redelivered"),
        "consistent_cut": v.get("consistent_cut"),
    }


@app.command()
def check(run_dir: Annotated[Path, typer.Argument(help="a stored trial directory")],
          as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Re-check a stored trial without Spark: oracle, classifier, attribution -> verdict.json."""
    from properties.check import check_run

    v = check_run(run_dir)
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
    unit = "events inferred from per-key counts" if v.get("inferred") else "ids"
    out.print(f"  verdict: [bold]{v['verdict']}[/] ({meets} its declared guarantee): "
              f"{n['lost']} lost, {n['duplicated']} duplicated, {n['unexpected']} unexpected ({unit})")
    if v.get("multiplicity"):
        m = v["multiplicity"]
        out.print(f"  ids in sink: {m['0']} missing, {m['1']} once, {m['>1']} more than once")
    if v.get("keys"):
        k = v["keys"]
        out.print(f"  keys (inferred, no provenance): {k['exact']} exact, {k['over']} over-counted, "
                  f"{k['under']} under-counted")
    for kind in ("lost", "duplicated"):
        if v.get("inferred"):
            for a in v[kind][:8]:
                out.print(f"    {kind} {abs(a['delta'])} event(s) of key {a['key']!r}: batches {a['batches'][:6]}, "
                          f"after fault(s) {', '.join(a['faults']) or 'none'}")
            continue
        by_cause: dict[tuple, list[int]] = {}
        for a in v[kind]:
            by_cause.setdefault((a["batch"], a["fault"]), []).append(a["id"])
        for (batch, fault), ids in by_cause.items():
            out.print(f"    {kind} e.g. ids {ids[:8]}: read by batch {batch}, after fault {fault}")
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
        out.print(f"  recovery after {rec['spec']}: {rec['seconds']}s from the kill to the next committed batch")
    out.print(f"  run directory: {result['run_dir']}")


@app.command()
def reap() -> None:
    """Kill processes left by a harness that was itself killed (every start does this too)."""
    from chaos.procs import reap_orphans

    out.print(f"reaped {reap_orphans()} orphan process(es)")


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    # A shell that starts us in the background sets SIGINT to "ignore"; Ctrl-C must still stop us.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        # Not standalone: typer then returns exit codes (typer.Exit, and 130 for Ctrl-C) instead of
        # exiting, and raises usage errors, so every way out passes through here.
        rc = app(standalone_mode=False)
        if rc == 130:
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
