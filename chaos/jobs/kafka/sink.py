"""A job's Kafka sink is the trial's output topic: Spark's streaming Kafka sink and a foreachBatch's batch writes.

Jobs end in Kafka as often as they start there: ``writeStream.format("kafka").option("topic", "orders-clean")``, or
``batch.write.format("kafka")...save()`` in a foreachBatch. While the job runs, those writes go to the trial's output
topic on the harness's broker (through the sink channel's proxy), whatever servers and topic the job names (a
``topic`` column too: the option overrides it). Spark's answer has no topic of its own: its runs write the same
rows, key and value as text, to Parquet in the answer's folder, batch after batch, as its topic would hold them.

The rows judged are the topic's committed records (what a ``read_committed`` consumer sees: Spark's own producers
are not transactional, so every record; a transactional producer's aborted records are not), a value that is a JSON
object read as its fields, beside the record's key.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from chaos.clusters.kafka.login import of as login_of
from chaos.clusters.kafka.login import spark_login_key, spark_options

OUT_VAR = "STREAMCHAOS_KAFKA_OUT"  # JSON: the trial's {"bootstrap", "topic", "login"}, or {"capture": a folder}
CAPTURED = "kafka"  # the answer's rows, under its folder


def begin(output: dict | None, folder: Path, named: str = "", answer: dict | None = None) -> None:
    """From now on in this run, a Kafka write goes to ``output`` (``{"bootstrap", "topic"}``: the trial's), or, with
    none (Spark's answer), into Parquet under ``folder``, the job's own clients to ``answer``'s topic
    (chaos.jobs.kafka.confluent). ``named``: the topic the job writes (``--sink kafka:TOPIC``; empty: any)."""
    target = output if output else {"capture": str(Path(folder) / CAPTURED), **(answer or {})}
    os.environ[OUT_VAR] = json.dumps({**target, "named": named})


def begin_run(log_options: dict[str, str], folder: Path, named: str) -> None:
    """``begin`` for a run of the job with these options (the trial's ``kafka`` settings, or the answer's
    ``answer_kafka`` topic: chaos.jobs.kafka.answer), and Spark's batch Kafka writes rerouted."""
    trial = json.loads(log_options["kafka"]) if log_options.get("kafka") else None
    begin({"bootstrap": trial.get("sink_bootstrap") or trial["bootstrap"], "topic": trial["output"],
           "login": trial.get("login"), "version": trial.get("version")} if trial else None,
          folder, named, json.loads(log_options.get("answer_kafka") or "null"))
    reroute()


def end() -> None:
    os.environ.pop(OUT_VAR, None)


def target() -> dict | None:
    try:
        return json.loads(os.environ[OUT_VAR])
    except (KeyError, ValueError):
        return None


def stream_options() -> dict[str, str]:
    """The streaming Kafka sink's servers, login and topic: the trial's output topic (the job's other settings
    stand). The security protocol is always given: a job's own (for its cluster) would not reach the trial's
    broker, and the job's other login settings mean nothing to a plaintext client."""
    out = target() or {}
    return {"kafka.bootstrap.servers": out["bootstrap"], "topic": out["topic"],
            "kafka.security.protocol": "PLAINTEXT", **spark_options(login_of(out))}


def job_login(key: str) -> bool:
    """A Kafka login option of the job's own (``kafka.sasl.*``, ``kafka.ssl.*``, ``kafka.security.protocol``) while
    its Kafka writes are rerouted: not passed on (the trial's broker has a login of its own, or none), so nothing of
    the job's cluster's login mixes with the trial's."""
    return target() is not None and spark_login_key(key)


def trial_owned(key: str) -> bool:
    """An option of a job's Kafka write that the trial's replaces: where it writes, and how it logs in there."""
    return key.lower() in ("kafka.bootstrap.servers", "topic") or spark_login_key(key)


def capture(batch_df, batch_id: int | None = None, folder: str | None = None) -> None:
    """Rows a Kafka write would have produced, appended to the answer's Parquet (key and value as text): a
    foreachBatch function in place of the answer's streaming Kafka sink, or its batch write."""
    folder = folder or (target() or {}).get("capture")
    columns = set(batch_df.columns)
    key = "CAST(key AS STRING) AS key" if "key" in columns else "CAST(NULL AS STRING) AS key"
    batch_df.selectExpr(key, "CAST(value AS STRING) AS value").write.mode("append").parquet(folder)


def capturing() -> bool:
    return "capture" in (target() or {})


def reroute() -> None:
    """``batch.write.format("kafka")...save()`` writes the trial's output topic (or the answer's Parquet). Over
    chaos.jobs.delta_tables's writer, which notes the format each writer was given."""
    from pyspark.sql.readwriter import DataFrameWriter

    if getattr(DataFrameWriter, "_streamchaos_kafka", False):
        return
    save, option, options = DataFrameWriter.save, DataFrameWriter.option, DataFrameWriter.options

    def routed_save(self, path=None, format=None, mode=None, partitionBy=None, **opts):  # noqa: A002, N803
        out = target()
        if out is None or (format or self.__dict__.get("_streamchaos_format") or "").lower() != "kafka":
            return save(self, path, format, mode, partitionBy, **opts)
        if "capture" in out:
            return capture(self._df, folder=out["capture"])
        for key in [k for k in opts if trial_owned(k)]:
            opts.pop(key)
        for key, value in stream_options().items():
            option(self, key, value)
        return save(self, path, format, mode, partitionBy, **opts)

    def kept_option(self, key, value):
        return self if job_login(key) else option(self, key, value)

    def kept_options(self, **opts):
        return options(self, **{k: v for k, v in opts.items() if not job_login(k)})

    DataFrameWriter.save = routed_save
    DataFrameWriter.option, DataFrameWriter.options = kept_option, kept_options
    DataFrameWriter._streamchaos_kafka = True


def read_rows(folder: Path):
    """The rows a run's Kafka writes hold: the trial's output topic as exported (``output-topic.parquet``, its
    committed records) or the answer's Parquet; a JSON object value as its fields, beside ``key``."""
    import polars as pl

    from chaos.clusters.kafka.broker import OUTPUT_RECORDS

    folder = Path(folder)
    if (folder / OUTPUT_RECORDS).exists():
        records = pl.read_parquet(folder / OUTPUT_RECORDS).filter(pl.col("committed"))
        keys = [k.decode("utf-8", "replace") if k is not None else None for k in records["key"]]
        values = [v.decode("utf-8", "replace") if v is not None else None for v in records["value"]]
    elif any((folder / CAPTURED).glob("*.parquet")):
        frame = pl.read_parquet(folder / CAPTURED / "*.parquet")
        keys, values = frame["key"].to_list(), frame["value"].to_list()
    else:
        return pl.DataFrame()
    return as_rows(keys, values)


def as_rows(keys: list, values: list):
    """Records as rows (a polars frame): every value a JSON object (the usual ``to_json(struct(...))``) gives its
    fields as columns, else the value is one text column; the key beside them."""
    import polars as pl

    parsed = []
    for value in values:
        try:
            found = json.loads(value) if value is not None else None
        except ValueError:
            found = None
        if not isinstance(found, dict):
            return pl.DataFrame({"key": keys, "value": values}, schema={"key": pl.Utf8, "value": pl.Utf8})
        parsed.append(found)
    if not parsed:
        return pl.DataFrame()
    rows = pl.DataFrame(parsed, infer_schema_length=None)
    return rows.with_columns(pl.Series("key", keys, dtype=pl.Utf8)) if "key" not in rows.columns else rows
