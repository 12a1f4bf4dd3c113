"""Check a stored run directory: oracle + classifier + attribution -> verdict.json. No Spark, no process.

This is the only way a verdict is made, so re-checking an old run after an oracle or classifier
change gives the same answer a fresh trial would.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from chaos.errors import HarnessError, UserError
from chaos.jobs.named_checkpoints import named_checkpoints
from chaos.scenario.scenario import Scenario
from chaos.store.atomic import write_json
from chaos.store.evidence import judged_sink, late_writes
from chaos.store.records import load_history, load_result
from properties.attribution import attribute, batch_of_events, fault_before_commit, fault_for_loss, fired_faults
from properties.classifier import Classification, classify
from properties.consistent_cut import check_cut
from properties.held import held_note, held_view
from properties.inference import Inference, infer_from_counts
from properties.rows import BatchAnswer, infer_from_rows
from properties.verdicts import BATCH_DEPENDENT, EXACTLY_ONCE, REFUSED, STALLED, from_anomalies, meets
from properties.watermark import batches_ran

if TYPE_CHECKING:
    from pipelines_under_test import Pipeline

SAMPLE = 20


def _read_events(path: Path) -> pl.DataFrame:
    try:
        events = pl.read_parquet(path)
    except FileNotFoundError:
        raise UserError(f"{path} is missing: is this a streamchaos run directory?") from None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 (polars raises several kinds, even a Rust panic, for a damaged file)
        raise UserError(f"{path} is unreadable ({_first_line(exc)}): re-run the trial") from None
    missing = [c for c in ("id", "key", "offset", "partition") if c not in events.columns]
    if missing or events["id"].dtype != pl.Int64:
        raise UserError(f"{path} is not the trial's event stream (columns {events.columns}): re-run the trial")
    return events


def read_sink(pipeline: Pipeline, sink: Path, findings: bool = False):
    """What the sink holds (``findings``: what the pipeline notes about its files), or one line when its files
    are damaged (a truncated parquet, a broken SQLite, a file sink's log that is not text)."""
    try:
        return pipeline.sink_findings(sink) if findings else pipeline.read_output(sink)
    except (UserError, KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 (SQLite, polars (a Rust panic too), OS errors: the evidence is damaged)
        raise UserError(f"the sink in {sink} is unreadable ({type(exc).__name__}: {_first_line(exc)}): its files "
                        "are damaged; re-run the trial") from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]


def judge(pipeline: Pipeline, events: pl.DataFrame, output: pl.DataFrame,
          expected: BatchAnswer | None = None) -> Classification | Inference:
    """The effect view: the classifier on provenance, per-key inference for plain counts, or rows against what
    Spark wrote as the oracle (``expected``, pipelines with ``spark_oracle``)."""
    if pipeline.spark_oracle:
        return infer_from_rows(expected if expected is not None else pl.DataFrame(), output, pipeline.compare_key,
                               pipeline.row_event)
    if pipeline.provenance:
        effects = pipeline.effect_ids(output, events)
        return classify(pipeline.oracle(events), effects, pipeline.unexplained(output, events))
    return infer_from_counts(pipeline.expected_counts(events), pipeline.observed_counts(output))


def check_run(run_dir: Path, pipeline: Pipeline) -> dict:
    """Judge the run in ``run_dir`` as a run of ``pipeline`` (its scenario's; the caller resolves the name,
    e.g. ``pipelines_under_test.for_run``) and write its verdict.json."""
    run_dir = Path(run_dir)
    scenario = Scenario.load(run_dir / "scenario.json")
    result = load_result(run_dir)
    events = _read_events(run_dir / "events.parquet")
    sink = judged_sink(run_dir)  # the snapshot of the trial's end: later writes do not change the verdict
    output = read_sink(pipeline, sink)
    history = load_history(run_dir)
    offsets = result.get("offsets", [])
    id_batches = batch_of_events(events, offsets)
    # Event-time oracles need the batch each event was read in (the watermark moves per batch).
    events = events.join(id_batches, on="id", how="left").with_columns(pl.col("batch").fill_null(-1))

    expected = pipeline.expected_output(run_dir) if pipeline.spark_oracle else None
    if pipeline.spark_oracle and expected is None and result.get("outcome") == "drained":
        raise HarnessError(f"{run_dir} has no oracle/ (the job's answer over every record, written by the trial's "
                           "last driver): the harness did not finish it; see its last driver log, re-run the trial")
    events, source_lost = split_source_loss(pipeline, events, output, history)
    committed = [o["batch"] for o in offsets if o.get("committed")]  # empty ones too: they move watermarks
    with batches_ran(committed):
        judged = judge(pipeline, events, output, expected)
    held = None
    # Held windows are a restart's signature (finding 004), and only where every record was read: a record the
    # source lost or never gave could make the same gap in the watermark.
    read_all = not source_lost and events.filter(pl.col("batch") < 0).is_empty()
    if (isinstance(judged, Inference) and pipeline.spark_oracle and judged.lost and result.get("outcome") == "drained"
            and result.get("restarts") and read_all and expected is not None):
        answer = expected.rows if isinstance(expected, BatchAnswer) else expected
        held, still_lost = held_view(run_dir, judged.lost, answer, output)
        if held:
            judged = replace(judged, lost=still_lost, verdict=from_anomalies(
                bool(still_lost), bool(judged.duplicated), bool(judged.unexpected)))
    if isinstance(judged, Classification):
        c = judged
        effect = c.to_dict(sample=SAMPLE)
        lost = _with_keys(attribute(c.lost[:SAMPLE], id_batches, history, lost=True), events)
        duplicated = _with_keys(attribute(c.duplicated[:SAMPLE], id_batches, history), events)
        measured = c.verdict
        dup_batches = set(id_batches.filter(pl.col("id").is_in(c.duplicated))["batch"].drop_nulls().to_list())
    else:
        inf = judged
        effect = inf.to_dict(sample=SAMPLE)
        redelivered = {b for b, n in _delivery_counts(result.get("deliveries")).items() if n > 1}
        lost = attribute_keys(inf.lost[:SAMPLE], events, id_batches, history, lost=True)
        duplicated = attribute_keys(inf.duplicated[:SAMPLE], events, id_batches, history, redelivered)
        measured = inf.verdict
        dup_batches = {b for d in duplicated for b in d["batches"]}
    outcome = result.get("outcome")
    verdict = measured if outcome == "drained" else REFUSED if outcome == "refused" else STALLED
    # Differs from Spark's one-batch answer with no fault fired and no restart: the job's output depends on how
    # the stream is cut into micro-batches; no fault is to blame (docs/verdicts.md).
    unfaulted = not any(f.get("fired") for f in result.get("faults") or []) and not result.get("restarts")
    batch_dependent = pipeline.spark_oracle and outcome == "drained" and measured != EXACTLY_ONCE and unfaulted
    verdict = BATCH_DEPENDENT if batch_dependent else verdict
    if held and verdict == EXACTLY_ONCE:  # every row Spark's answer has is written or waits: liveness, not loss
        verdict = STALLED
    report = {
        "pipeline": scenario.pipeline,
        "declared": pipeline.guarantee,
        "verdict": verdict,
        "meets": meets(verdict, pipeline.guarantee),
        "inferred": not pipeline.provenance,
        # What the sink was compared with: Spark's answer, row by row or by key (a user's job), or the oracle.
        "compared": ("keys" if pipeline.compare_key else "rows") if pipeline.spark_oracle else None,
        # Columns two runs of Spark's answer disagree on (current_timestamp(), uuid()): compared without them.
        "left_out": list(getattr(expected, "left_out", ())),
        # Columns the sink's database fills itself (identity, serial, now() defaults): compared without them.
        "filled_by_database": list(getattr(expected, "filled", ())),
        "effect": effect,
        "lost": lost,
        "source_lost": source_lost,
        "held": held,
        "duplicated": duplicated,
        "unexpected": effect["unexpected"],
        "deliveries": deliveries_view(result.get("deliveries"), dup_batches),
        "sink": read_sink(pipeline, sink, findings=True),
        # The checkpoint locations the job named at each start, and the one its answer's run named.
        "named_checkpoints": named_checkpoints(run_dir),
        "consistent_cut": (_cut(run_dir, events, offsets, committed, pipeline) if pipeline.state else None),
    }
    report["late_writes"] = _late_writes(pipeline, run_dir, output)
    if verdict == STALLED and held:
        report["effect"]["note"] = held_note(held)
    elif verdict == STALLED:
        report["effect"]["note"] = f"not drained ({result.get('reason', '')}): consistency not judged"
    elif verdict == BATCH_DEPENDENT:
        report["effect"]["note"] = ("differs without any fault: the output depends on how the stream is cut into "
                                    "micro-batches (the rows below), so no fault trial of this job can be judged "
                                    "against Spark's one-batch answer (docs/verdicts.md)")
    elif verdict == REFUSED:
        report["effect"]["note"] = f"Spark refused the query as configured: {result.get('reason', '')}"
    write_json(run_dir / "verdict.json", report)
    return report


def _cut(run_dir: Path, events: pl.DataFrame, offsets: list[dict], committed: list[int], pipeline: Pipeline) -> dict:
    with batches_ran(committed):
        return check_cut(run_dir / "state", events, offsets, pipeline.expected_state)


def split_source_loss(pipeline: Pipeline, events: pl.DataFrame, output: pl.DataFrame,
                      history: list[dict]) -> tuple[pl.DataFrame, dict | None]:
    """Records a ``delete-records`` fault took from the topic before the query read them never reached Spark: data
    the source lost, not the sink. They leave the events the sink is judged on and are reported apart (ids in
    the sink stay: a deleted record the query had read counts like any other)."""
    deleted = [h["detail"] for h in history if h.get("kind") == "fault"
               and str(h.get("detail", {}).get("spec", "")).startswith("delete-records@") and h["detail"].get("done")]
    if not deleted or not pipeline.provenance:
        return events, None
    bounds: dict[int, int] = {}
    for d in deleted:
        for part, offset in d.get("deleted_before", {}).items():
            bounds[int(part)] = max(bounds.get(int(part), 0), int(offset))
    gone = pl.lit(False)
    for part, offset in bounds.items():
        gone = gone | ((pl.col("partition") == part) & (pl.col("offset") < offset))
    seen = set(pipeline.observed_ids(output).drop_nulls().to_list()) if output.height else set()
    lost = events.filter(gone & ~pl.col("id").is_in(list(seen)))
    report = {"ids": lost.height, "sample": sorted(lost["id"].to_list())[:SAMPLE],
              "faults": [d["spec"] for d in deleted], "deleted_before": {str(p): o for p, o in sorted(bounds.items())}}
    return events.filter(~pl.col("id").is_in(lost["id"].to_list())), report


def _late_writes(pipeline: Pipeline, run_dir: Path, judged: pl.DataFrame) -> dict | None:
    """Writes that reached the sink after its trial ended (a finding; the verdict stays the snapshot's)."""
    late = late_writes(run_dir)
    if late is None:
        return None
    try:
        late["rows"] = pipeline.read_output(run_dir / "sink").height - judged.height
    except Exception:  # noqa: BLE001 (a sink still being written may not read; the files say enough)
        late["rows"] = None
    late["note"] = "rows written after the trial ended: not part of the verdict"
    return late


def _with_keys(records: list[dict], events: pl.DataFrame) -> list[dict]:
    """Name each anomaly's key too (reports group by it)."""
    if not records or "key" not in events.columns:
        return records
    keys = dict(events.filter(pl.col("id").is_in([r["id"] for r in records])).select("id", "key").iter_rows())
    return [{**r, "key": keys.get(r["id"])} for r in records]


def _delivery_counts(deliveries: list[dict] | None) -> dict[int, int]:
    counts: dict[int, int] = {}
    for d in deliveries or []:
        counts[d["batch_id"]] = counts.get(d["batch_id"], 0) + 1
    return counts


def attribute_keys(deltas: list[dict], events: pl.DataFrame, id_batches: pl.DataFrame,
                   history: list[dict], suspects: set[int] | None = None, lost: bool = False) -> list[dict]:
    """Inferred anomalies name a key, not ids: the batches that read the key (narrowed to ``suspects``,
    e.g. batches the sink received twice, when there are any) and the faults before their commits
    (``lost``: the faults that explain a loss, ``fault_for_loss``)."""
    out = []
    for d in deltas:
        # Rows of a user's job that keep its id field name their event (``Pipeline.row_event``), else the key's.
        ids = (pl.Series("id", d["ids"], dtype=pl.Int64) if d.get("ids")
               else events.filter(pl.col("key") == d["key"])["id"])
        if ids.is_empty():  # a job's row (``--key`` columns of its own) names no event: what explains it instead
            out.append({**d, **unattributed(history, suspects, lost)})
            continue
        batches = sorted(id_batches.filter(pl.col("id").is_in(ids.implode()))["batch"].unique().drop_nulls().to_list())
        if suspects and set(batches) & suspects:
            batches = sorted(set(batches) & suspects)
        faults = sorted({f for b in batches if (f := explain(history, b, lost))})
        out.append({**d, "batches": batches, "faults": faults})
    return out


def unattributed(history: list[dict], suspects: set[int] | None, lost: bool) -> dict:
    """For a row that carries no event id: the batches a restarted driver ran again (a batch with phases in two
    driver incarnations: its ``offsets/N`` was written, its ``commits/N`` not, when the old one died), narrowed to
    those the sink received twice when known, and the faults that fired. Marked ``no_ids``: a cause, not a proof."""
    runs: dict[int, set[int]] = {}
    for r in history:
        if r["kind"] == "phase" and r.get("batch") is not None:
            runs.setdefault(r["batch"], set()).add(r["detail"].get("incarnation", 0))
    replayed = sorted(b for b, incarnations in runs.items() if len(incarnations) > 1)
    if suspects and set(replayed) & suspects:
        replayed = sorted(set(replayed) & suspects)
    faults = sorted({f for b in replayed if (f := explain(history, b, lost))}) or \
        sorted({r["detail"]["spec"] for r in fired_faults(history)})
    return {"batches": replayed, "faults": faults, "no_ids": True}


def explain(history: list[dict], batch: int, lost: bool) -> str | None:
    """The fault an anomaly of ``batch`` follows: for a loss, the one that explains it (``fault_for_loss``), for a
    duplicate the nearest before the batch's commit."""
    return fault_for_loss(history, batch)[0] if lost else fault_before_commit(history, batch)


def deliveries_view(deliveries: list[dict] | None, dup_batches: set[int]) -> dict | None:
    """Batches the sink received more than once, and whether that shows in the final contents."""
    if deliveries is None:
        return None
    return {
        "redelivered": [
            {"batch": b, "times": n, "effective": "more than once" if b in dup_batches else "once"}
            for b, n in sorted(_delivery_counts(deliveries).items()) if n > 1
        ],
    }
