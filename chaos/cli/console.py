"""What the commands print on the terminal: a trial's result and verdict, a campaign's summary and its
configuration grid. Data in (the dicts the trial, the checker and the campaign store), text out."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from chaos.guarantees import BATCH_DEPENDENT
from chaos.scenario.names import display_names, short_name

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


def print_summary(summary: dict) -> None:
    shown = display_names(summary["pipelines"])
    for name, row in summary["pipelines"].items():
        name = escape(shown[name])  # a configuration variant's row name holds brackets: text, not markup
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
        if row.get("learned"):
            out.print(f"  {len(row['learned'])} trial(s) more ({', '.join(row['learned'])}): its checkpoints showed a "
                      "state store, and no planned trial had opened kill-driver:state-commit", markup=False)
        if row.get("state_undeclared"):
            out.print("  its checkpoints hold state/ but the pipeline does not say it keeps state: set state_store = "
                      "True on it to plan kill-driver:state-commit")
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
        out.print(f"{short_name(s['pipeline'])}: skipped ({s['reason']})", markup=False)
    print_grid(summary)


def print_grid(summary: dict) -> None:
    """Configuration variants (``--conf KEY=V1,V2``): a pipeline x configuration table of verdicts."""
    from chaos.scenario.variants import grid

    table = grid(summary)
    if table is None:
        return
    columns, cells = table
    out.print("verdicts by configuration (pipeline x --conf variant; * = violates the expected guarantee):")
    for k, column in enumerate(columns):
        out.print(f"  [{k + 1}] {column}", markup=False)
    shown = display_names(cells)
    width = max(len(p) for p in shown.values())
    out.print(" " * (width + 4) + "".join(f"[{k + 1}]".ljust(16) for k in range(len(columns))), markup=False)
    for pipeline, row in cells.items():
        marks = [(row[c]["verdict"] or "-") + ("*" if row[c]["meets"] is False else "") if c in row else "not run"
                 for c in columns]
        out.print(f"  {shown[pipeline]:<{width}}  " + "".join(m.ljust(16) for m in marks), markup=False)


def print_verdict(v: dict) -> None:
    meets = {True: "meets", False: "VIOLATES", None: "inconclusive for"}[v["meets"]]
    n = v["anomaly_counts"]
    compared = v.get("compared")  # a user's job: rows (or final rows per key) against Spark's answer
    unit = (f"{compared} against Spark's answer" if compared else
            "events inferred from per-key counts" if v.get("inferred") else "ids")
    what = f"the expected {v['expected']}" if v.get("expected") else "its declared guarantee"
    out.print(f"  verdict: [bold]{v['verdict']}[/] ({meets} {what}): "
              f"{n['lost']} lost, {n['duplicated']} duplicated, {n['unexpected']} unexpected ({unit})")
    if v["verdict"] == BATCH_DEPENDENT and v.get("note"):
        out.print(f"  {v['note']}", markup=False)
    if v.get("multiplicity"):
        m = v["multiplicity"]
        out.print(f"  ids in sink: {m['0']} missing, {m['1']} once, {m['>1']} more than once")
    if lost := v.get("source_lost"):
        out.print(f"  source lost: {lost['ids']} ids the topic no longer held when the query came to read them "
                  f"({', '.join(lost['faults'])}); not the sink's, judged without them", markup=False)
    if v.get("keys") and compared:
        k = v["keys"]
        out.print(f"  {compared} (inferred, no provenance): {k['exact']} exact, {k['over']} over, {k['under']} under, "
                  f"{k.get('optional', 0)} optional (touched by late records)")
    if v.get("left_out"):
        out.print(f"  compared without column(s) {', '.join(v['left_out'])}: two runs of Spark's answer over the same "
                  "records differ in them (a timestamp, a random id)", markup=False)
    if v.get("filled_by_database"):
        out.print(f"  compared without column(s) {', '.join(v['filled_by_database'])}: filled by the database",
                  markup=False)
    named = v.get("named_checkpoints")
    if named and named["per_start"]:
        shown_names = ", ".join(dict.fromkeys(n for n in (*named["starts"], named["answer"]) if n))
        out.print(f"  the job names a new checkpoint location at each start ({shown_names[:160]}): a restart does not "
                  "resume, it reads its source from the beginning again"
                  + (f" ({named['started_over']} restart(s) here started over)" if named["started_over"] else ""),
                  markup=False)
    if v.get("keys") and not compared:
        k = v["keys"]
        out.print(f"  keys (inferred, no provenance): {k['exact']} exact, {k['over']} over-counted, "
                  f"{k['under']} under-counted")
    for kind in ("lost", "duplicated"):
        if v.get("inferred"):
            what = "row" if compared == "rows" else "key" if compared else "event(s) of key"
            for a in v[kind][:8]:
                count = f"{abs(a['delta'])} " if not compared else ""
                faults = ", ".join(a["faults"]) or "none"
                if a.get("no_ids"):  # the job's rows keep no event id: the replays and faults that explain it
                    out.print(f"    {kind} {count}{what} {a['key']}: its rows carry no event id; batch(es) replayed "
                              f"after a restart {a['batches'][:6] or 'none'}, fault(s) fired {faults}", markup=False)
                else:
                    out.print(f"    {kind} {count}{what} {a['key']}: batches {a['batches'][:6]}, "
                              f"after fault(s) {faults}", markup=False)
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
    declared = (f"{result['expected']} expected, {result['guarantee']} declared" if result.get("expected")
                else f"{result['guarantee']} declared")
    out.print(f"[bold]{escape(short_name(result['pipeline']))}[/] ({declared}): {result['events']} events, "
              f"{result['batches']} batches committed, {result['restarts']} driver restart(s), "
              f"{result['seconds']}s — " + f"{result['outcome']} {result['reason']}".rstrip())
    for f in result["faults"]:
        state = f"fired at t={f['t']}s" if f["fired"] else "NOT fired"
        extra = ", ".join(f"{k}={v}" for k, v in f["detail"].items() if k not in ("done", "spec", "timed"))
        where = (f"batch {f['batch']}, {f['phase']}" if not f["detail"].get("timed") else
                 f"landed at batch {f['batch']}, {f['phase']}" if f["batch"] is not None else "before any batch")
        out.print(f"  fault {f['spec']}: {state} ({where}) {extra}")
    if "verdict" in result:
        print_verdict(result)
    for rec in result.get("recoveries", []):
        took = (f"{rec['seconds']}s from the kill to the next committed batch" if rec["seconds"] is not None
                else "no batch committed after the kill")
        out.print(f"  recovery after {rec['spec']}: {took}")
    for d in result.get("drivers", []):
        if d["incarnation"] > 0 or d["driver_start"] != "cold":
            out.print(f"  driver {d['incarnation']}: {d['driver_start']}" + (f" ({d['why']})" if d.get("why") else ""))
    source = result.get("source")
    if source and source.get("via") == "connector":
        set_ = ", ".join(f"{k}={v}" if v is not None else f"{k} removed" for k, v in source.get("set", {}).items())
        out.print(f"  source: Kafka through Spark's connector ({source.get('connector')}), topic {source.get('topic')}"
                  + (f"; set by streamchaos: {set_}" if set_ else ""))
    elif source:
        out.print("  source: the harness's stand-in for Kafka (--kafka stand-in, or no connector for this Spark)")
    out.print(f"  run directory: {shown_path(result['run_dir'])}")


def shown_path(path: str | Path) -> str:
    """A path as a person at this prompt types it: relative to the working directory when inside it."""
    try:
        return os.path.relpath(path) if Path(path).resolve().is_relative_to(Path.cwd()) else str(path)
    except (OSError, ValueError):
        return str(path)
