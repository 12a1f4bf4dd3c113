"""Spark's answer has no output topic: each of its runs gets one of its own on the trial's broker.

The topic (``begin_answer``) is made before the run starts with the output topic's partitions, read back after it
(committed records, as the trial's are judged) into the answer's folder beside the rows of Spark's own Kafka writes
(chaos.jobs.kafka.sink), then deleted (``finish_answer``). The job's own clients write it while the run lasts
(chaos.jobs.kafka.confluent and its siblings reroute them there).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from chaos.clusters.kafka.login import Login
from chaos.clusters.kafka.login import of as login_of
from chaos.jobs.kafka import sink

ANSWER_RECORDS = "answer-topic.parquet"  # beside the rows of Spark's own Kafka writes (sink.CAPTURED)


def answer_topic(output: str, folder: Path) -> str:
    return f"{output}.answer.{Path(folder).name}"


def begin_answer(bootstrap: str, output: str, folder: Path, login: Login | None = None) -> str:
    """A topic for the answer run writing into ``folder``, with the output topic's partitions; its name."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from chaos.clusters.kafka.broker import client_conf

    name = answer_topic(output, folder)
    admin = AdminClient(client_conf(bootstrap, login, log_level=3))
    topics = admin.list_topics(timeout=30).topics
    if name in topics:  # an earlier attempt's, which died before deleting it
        _delete(admin, name)
    partitions = len(topics[output].partitions) or 1
    # The cluster's default replication: 1 on the harness's broker, the user's own choice on theirs.
    for future in admin.create_topics([NewTopic(name, partitions)], request_timeout=30).values():
        future.result(timeout=60)
    return name


def _delete(admin, topic: str) -> None:
    for future in admin.delete_topics([topic], request_timeout=30).values():
        future.result(timeout=60)


def finish_answer(bootstrap: str, topic: str, folder: Path, login: Login | None = None) -> int:
    """The answer topic's committed records into ``folder``'s captured rows (key and value as text), the topic
    deleted; how many records."""
    import polars as pl
    from confluent_kafka.admin import AdminClient

    from chaos.clusters.kafka.broker import client_conf, read_topic
    from chaos.store.atomic import write_parquet

    try:
        rows = read_topic(bootstrap, topic, committed_only=True, login=login, group_prefix=f"{topic}.")
        if rows:
            text = [(k.decode("utf-8", "replace") if k is not None else None,
                     v.decode("utf-8", "replace") if v is not None else None) for _, _, k, v in rows]
            captured = Path(folder) / sink.CAPTURED
            captured.mkdir(parents=True, exist_ok=True)
            write_parquet(pl.DataFrame(text, schema={"key": pl.Utf8, "value": pl.Utf8}, orient="row"),
                          captured / ANSWER_RECORDS)
        return len(rows)
    finally:
        _delete(AdminClient(client_conf(bootstrap, login, log_level=3)), topic)


@contextmanager
def answering(kafka: dict | None, folder: Path) -> Iterator[dict[str, str]]:
    """The options of an answer run writing into ``folder`` on the trial's broker (``kafka``, the trial's
    settings; None: no Kafka sink): its own topic while the run lasts, read back and deleted after it."""
    if not kafka:
        yield {}
        return
    bootstrap, login = kafka.get("sink_bootstrap") or kafka["bootstrap"], login_of(kafka)
    topic = begin_answer(bootstrap, kafka["output"], folder, login)
    try:
        yield {"answer_kafka": json.dumps({"bootstrap": bootstrap, "topic": topic, "login": kafka.get("login")})}
    except BaseException:  # the run's own error is the one to see; the topic goes if it can
        with suppress(Exception):
            finish_answer(bootstrap, topic, folder, login)
        raise
    finish_answer(bootstrap, topic, folder, login)
