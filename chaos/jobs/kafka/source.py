"""A job's Kafka source as it wrote it, read through Spark's connector on the trial's broker and topic.

The job's options stand, except those that say where to read and from when (``kafka_options``): those are the
trial's, so the query reads the records the harness produced, batch N the same ones in every replay.
"""

from __future__ import annotations

from chaos.clusters.kafka.login import of as login_of
from chaos.clusters.kafka.login import shown, spark_login_key, spark_options

# Options that name where a Kafka source reads: pointed at the trial's broker and topic.
KAFKA_WHERE = ("subscribe", "subscribePattern", "assign", "startingOffsetsByTimestamp", "startingTimestamp",
               "startingOffsetsByTimestampStrategy")


def kafka_options(options: dict, trial: dict) -> tuple[dict, dict]:
    """The job's Kafka source options on the trial's broker and topic, and what was set (option -> value; None:
    removed; a secret's value shown as ``[hidden]``). The broker, the topic and the login (SASL, TLS) are the
    trial's; a start at ``latest`` (Spark's default) becomes ``earliest``, since the trial's records are in the
    topic before the query starts; without a ``maxOffsetsPerTrigger`` of its own a batch reads the trial's
    ``--events-per-batch``, so batch N is the same records in every replay and a fault at batch N has a batch N to
    fire at. Its consumer group is named under the trial's topic (``groupIdPrefix``, or the job's ``kafka.group.id``
    after it)."""
    opts = {k: str(v) for k, v in options.items()}
    changed: dict[str, str | None] = {}
    for key in list(opts):
        if key in KAFKA_WHERE or spark_login_key(key):  # the trial's broker's login instead
            changed[key] = None
            del opts[key]
    wanted = {"kafka.bootstrap.servers": trial["bootstrap"], "subscribe": trial["topic"],
              **spark_options(login_of(trial))}
    # Spark's consumer groups under the trial's topic too: a cluster's ACLs may give the harness its prefix only.
    if opts.get("kafka.group.id"):
        wanted["kafka.group.id"] = f"{trial['topic']}.{opts['kafka.group.id']}"
    else:
        wanted["groupIdPrefix"] = f"{trial['topic']}.spark"
    if opts.get("startingOffsets", "latest").strip() != "earliest":
        wanted["startingOffsets"] = "earliest"
    if "maxOffsetsPerTrigger" not in opts:
        wanted["maxOffsetsPerTrigger"] = str(trial["max_offsets"])
    for key, value in wanted.items():
        if opts.get(key) != value:
            changed[key] = shown(key, value)
        opts[key] = value
    return opts, changed
