"""``streamchaos conformance``: Spark's documented guarantees, measured row by row.

Each row names a component, what Spark's documentation (or our own design, for rows marked
"ours") says it guarantees, and the catalogue pipeline that exercises it. The rows run as one
campaign under a standard fault mix (driver kills at every phase, an executor kill, a sink delay
where the sink has a channel); the measured verdict of a row is the weakest of its trials.

A row *agrees* when the measured verdict is the documented one; it *contradicts* when the
measurement breaks a promise the documentation makes (exit 1); a stronger measurement than
documented is "not reproduced" (the faults did not hit the window): reported, not an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from chaos.errors import UserError
from chaos.store.atomic import write_json
from properties.verdicts import AT_MOST_ONCE, INCORRECT, NONE, STALLED, at_least_as_strong

DOCS = "https://spark.apache.org/docs/latest/streaming/"
DELTA_DOCS = "https://docs.delta.io/latest/"
NOT_FAULT_TOLERANT = "not fault-tolerant"  # documented for the socket source: loss or a failed restart agrees


@dataclass(frozen=True)
class Row:
    component: str
    pipeline: str
    documented: str
    source: str  # where the documented guarantee is stated


ROWS = (
    Row("file sink (parquet), read through _spark_metadata", "passthrough-file", "exactly-once",
        DOCS + "apis-on-dataframes-and-datasets.html#output-sinks"),
    Row("ours: the same file sink read raw (log ignored)", "passthrough-file-raw", "at-least-once",
        "chaos: a reader that ignores _spark_metadata sees the part files of a replayed batch twice"),
    Row("foreach sink (Python ForeachWriter)", "foreach-writer", "at-least-once",
        DOCS + "apis-on-dataframes-and-datasets.html#output-sinks"),
    Row("Kafka sink (Spark's connector), Kafka source", "kafka-passthrough", "at-least-once",
        DOCS + "structured-streaming-kafka-integration.html#writing-data-to-kafka (Kafka only supports at least "
        "once write semantics)"),
    Row("Kafka sink in real-time mode (trigger(realTime=...)), Kafka source", "kafka-real-time", "at-least-once",
        DOCS + "real-time-mode.html (exactly-once processing, at-least-once delivery to the Kafka sink)"),
    Row("ours: foreachBatch, one Kafka transaction per batch with the batch id committed in it, read_committed",
        "kafka-transactional", "exactly-once",
        "docs/pipelines.md, kafka-transactional (a batch whose id the group's offset holds is skipped)"),
    Row("ours: foreachBatch, one Kafka transaction per batch (batch id in the transactional id only)",
        "kafka-transactional-id", "at-least-once",
        "docs/pipelines.md, kafka-transactional-id (a batch committed before the crash is committed again)"),
    Row("Delta Lake sink (writeStream.format('delta'))", "delta-stream", "exactly-once",
        DELTA_DOCS + "delta-streaming.html#delta-table-as-a-sink (the transaction log guarantees exactly-once "
        "processing)"),
    Row("foreachBatch, Delta append without a transaction id", "delta-append", "at-least-once",
        DOCS + "apis-on-dataframes-and-datasets.html#foreachbatch (foreachBatch alone is at-least-once)"),
    Row("foreachBatch, Delta append with txnAppId/txnVersion", "delta-txn", "exactly-once",
        DELTA_DOCS + "delta-streaming.html#idempotent-table-writes-in-foreachbatch"),
    Row("foreachBatch, Delta MERGE INTO by a natural key", "delta-merge", "exactly-once",
        DELTA_DOCS + "delta-update.html#upsert-from-streaming-queries-using-foreachbatch (an idempotent merge)"),
    Row("foreachBatch, plain append", "passthrough-append", "at-least-once",
        DOCS + "apis-on-dataframes-and-datasets.html#foreachbatch"),
    Row("foreachBatch, idempotent by batch id", "passthrough-idempotent", "exactly-once",
        DOCS + "apis-on-dataframes-and-datasets.html#foreachbatch"),
    Row("streaming aggregation, update mode (HDFS state store)", "key-count", "exactly-once",
        DOCS + "getting-started.html#fault-tolerance-semantics"),
    Row("window + watermark, append mode (HDFS state store)", "windowed-count", "exactly-once",
        DOCS + "apis-on-dataframes-and-datasets.html#handling-late-data-and-watermarking"),
    Row("Kafka source, window + watermark, append mode, idempotent foreachBatch", "kafka-windowed-count",
        "exactly-once", DOCS + "getting-started.html#fault-tolerance-semantics (replayable source, idempotent sink)"),
    Row("window + watermark, append mode (RocksDB)", "windowed-count-rocksdb", "exactly-once",
        DOCS + "performance-tips.html#rocksdb-state-store-implementation"),
    Row("window + watermark, append mode (RocksDB changelog)", "windowed-count-changelog", "exactly-once",
        DOCS + "performance-tips.html#rocksdb-state-store-implementation"),
    Row("window + watermark, RocksDB, state checkpoint format v2", "windowed-count-rocksdb-v2", "exactly-once",
        DOCS + "performance-tips.html#rocksdb-state-store-implementation"),
    Row("window + watermark, RocksDB changelog, state checkpoint format v2", "windowed-count-changelog-v2",
        "exactly-once", DOCS + "performance-tips.html#rocksdb-state-store-implementation"),
    Row("dropDuplicatesWithinWatermark", "dedup-within-watermark", "exactly-once",
        DOCS + "apis-on-dataframes-and-datasets.html#streaming-deduplication"),
    Row("chained stateful operators: dropDuplicatesWithinWatermark, then a window", "dedup-window-count",
        "exactly-once", DOCS + "apis-on-dataframes-and-datasets.html (multiple stateful operators, append mode)"),
    Row("stream-stream left outer join with watermarks", "stream-join-outer", "exactly-once",
        DOCS + "apis-on-dataframes-and-datasets.html (outer joins with watermarking)"),
    Row("chained stateful operators: a stream-stream join, then a window", "join-window-count", "exactly-once",
        DOCS + "apis-on-dataframes-and-datasets.html (multiple stateful operators, append mode)"),
    Row("transformWithState, event-time timers (RocksDB)", "keyed-state-timers", "exactly-once",
        DOCS + "structured-streaming-transform-with-state.html"),
    Row("transformWithStateInPandas, ValueState with a TTL (RocksDB)", "keyed-state-ttl", "exactly-once",
        DOCS + "structured-streaming-transform-with-state.html"),
    Row("transformWithState, processing-time timers and a short TTL (RocksDB)", "keyed-state-expiry", "exactly-once",
        DOCS + "structured-streaming-transform-with-state.html"),
    Row("transformWithStateInPandas, ValueState schema evolved at a restart (Avro encoding)", "keyed-state-evolve",
        "exactly-once", DOCS + "structured-streaming-transform-with-state.html"),
    Row("continuous processing (rate source, console sink)", "continuous-map", "at-least-once",
        DOCS + "performance-tips.html#continuous-processing"),
    Row("socket source", "socket-source", NOT_FAULT_TOLERANT,
        DOCS + "apis-on-dataframes-and-datasets.html#input-sources"),
    Row("ours: two-phase Python data source writer (PostgreSQL)", "pg-two-phase", "exactly-once",
        "docs/pipelines.md, pg-two-phase (commit(messages, batchId) publishes staged rows once per batch id)"),
    Row("ours: nondeterministic key before an aggregation", "nondeterministic-key", "incorrect",
        DOCS + "getting-started.html#fault-tolerance-semantics (requires deterministic operations)"),
)


MIXES = ("kill", "decommission")


def standard_mix(pipeline, trials: int, mix: str = "kill") -> list[str]:
    """The fault schedules of a row's trials: every trial kills the driver twice at different phases.

    The first schedule opens each documented window (a kill after the sink wrote and before the
    commit; for the file sink, after the part files and before its log entry), so a single trial
    already reproduces a weaker guarantee. ``mix="decommission"``: Spark's graceful decommission of an
    executor and of a worker instead, at the same windows; a row's documented guarantee stays what it is
    under a kill, since a decommission may be no worse.
    """
    if mix == "decommission":
        return decommission_mix(pipeline, trials)
    if pipeline.conformance_mix:  # a pipeline whose batches the standard phases do not fit (continuous)
        return [pipeline.conformance_mix[k % len(pipeline.conformance_mix)] for k in range(trials)]
    stateful_phase = "state-commit" if "state-commit" in pipeline.phases else "sink-write"
    mix = [
        "kill-driver@1:sink-done kill-driver@3:sink-write",
        f"kill-driver@1:{stateful_phase} kill-executor@2:reading kill-driver@3:committed",
        "kill-driver@1:reading kill-driver@2:planned"
        + (" delay-sink@3:sink-write/latency=1000/3s" if pipeline.sink_channel else ""),
    ]
    return [mix[k % len(mix)] for k in range(trials)]


def decommission_mix(pipeline, trials: int) -> list[str]:
    """Graceful decommissions at the windows a kill opens: an executor while the sink writes and after it
    wrote, a worker (every executor on it) while the batch reads and after the state store wrote."""
    phases = pipeline.phases
    write = "sink-write" if "sink-write" in phases else phases[0]
    read = "reading" if "reading" in phases else write
    state = "state-commit" if "state-commit" in phases else read
    done = "sink-done" if "sink-done" in phases else phases[-1]
    mix = [
        f"decommission-executor@1:{write} decommission-worker@3:{read}",
        f"decommission-worker@1:{state} decommission-executor@3:{done}",
    ]
    return [mix[k % len(mix)] for k in range(trials)]


def select_rows(only: list[str] | None) -> list[Row]:
    if not only:
        return list(ROWS)
    known = {r.pipeline: r for r in ROWS}
    unknown = [p for p in only if p not in known]
    if unknown:
        raise UserError(f"no conformance row for {', '.join(unknown)}: use one of {', '.join(known)}")
    return [known[p] for p in only]


def table(rows: list[Row], summary: dict, verdicts: dict[str, list[dict]]) -> dict:
    """The conformance table from a finished campaign: ``rows`` for conformance.json and the report."""
    skipped = {s["pipeline"]: s["reason"] for s in summary.get("skipped", [])}
    out = []
    for row in rows:
        trials = [v for v in verdicts.get(row.pipeline, []) if v]
        measured = summary.get("pipelines", {}).get(row.pipeline, {}).get("verdict") if trials else None
        if row.documented == NOT_FAULT_TOLERANT and trials:
            broken = [v for v in trials if v["verdict"] in (STALLED, AT_MOST_ONCE, NONE, INCORRECT)]
            measured = broken[0]["verdict"] if broken else measured
            status, agrees = (("agrees: " + _why(broken[0])), True) if broken else (
                "not reproduced (survived every fault)", True)
        elif measured is None or measured == STALLED:
            status, agrees = ("skipped: " + skipped[row.pipeline]) if row.pipeline in skipped else "not measured", None
        elif measured == row.documented:
            status, agrees = "agrees", True
        elif at_least_as_strong(measured, row.documented):
            status, agrees = "not reproduced (stronger than documented)", True
        else:
            status, agrees = "contradicts the documentation", False
        out.append({"component": row.component, "pipeline": row.pipeline, "documented": row.documented,
                    "measured": measured, "agrees": agrees, "status": status, "trials": len(trials),
                    "example": _example(trials), "source": row.source})
    return {"rows": out, "contradictions": sum(1 for r in out if r["agrees"] is False)}


def _why(verdict: dict) -> str:
    if verdict["verdict"] == STALLED:
        return (verdict.get("effect") or {}).get("note") or "no recovery"
    counts = (verdict.get("effect") or {}).get("counts") or {}
    return f"{counts.get('lost', 0)} events lost"


def _example(trials: list[dict]) -> str | None:
    """One anomaly of the row, named by event id (or key) and the fault that preceded it; wrong values
    first (they decide an ``incorrect`` verdict), then duplicates, then losses."""
    for v in trials:
        for u in v.get("unexpected") or []:
            return f"{'id ' + str(u['id']) if 'id' in u else 'key ' + str(u.get('key'))}: {u.get('why')}"
    for v in trials:
        for kind in ("duplicated", "lost"):
            for a in v.get(kind) or []:
                what = f"id {a['id']}" if "id" in a else f"key {a.get('key')}"
                faults = a.get("faults") or ([a["fault"]] if a.get("fault") else [])
                return f"{what} {kind}" + (f" after {', '.join(faults)}" if faults else "")
    return None


def write(root: Path, conformance: dict) -> None:
    write_json(Path(root) / "conformance.json", conformance)
