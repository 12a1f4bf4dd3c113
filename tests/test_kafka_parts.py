"""The Kafka parts that need no JVM and no network: what the harness resolves from Maven and which connector jars
join a Spark installation; Spark's Kafka offsets in the checkpoint read as records per partition."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from chaos.clusters.kafka.jars import connector, connector_jars
from chaos.machine.maven import artifact_name as _artifact_name
from chaos.machine.maven import folder_of
from chaos.scenario.variants import async_progress
from chaos.store.checkpoint import kafka_offsets, offset_counts, read_offsets_file
from chaos.stream.kafkafeed import KafkaFeed
from tests.conftest import cli


def test_artifact_names_drop_only_the_version():
    assert _artifact_name(Path("kafka-clients-3.9.2.jar")) == "kafka-clients"
    assert _artifact_name(Path("spark-sql-kafka-0-10_2.13-4.2.0.jar")) == "spark-sql-kafka-0-10_2.13"
    assert _artifact_name(Path("scala-library-2.13.16.jar")) == "scala-library"
    assert _artifact_name(Path("commons-pool2-2.13.1.jar")) == "commons-pool2"


def test_the_connector_leaves_sparks_sql_to_the_cluster_and_is_keyed_by_version():
    pom = connector("4.2.0").pom()
    assert "<artifactId>spark-sql-kafka-0-10_2.13</artifactId><version>4.2.0</version>" in pom
    assert "<exclusion><groupId>org.apache.spark</groupId><artifactId>spark-sql_2.13</artifactId></exclusion>" in pom
    assert folder_of(connector("4.2.0")) != folder_of(connector("4.1.1"))


def test_only_jars_spark_does_not_ship_join_its_class_path(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = folder_of(connector("4.2.0"))
    (folder / "jars").mkdir(parents=True)
    for name in ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "kafka-clients-3.9.2.jar", "commons-pool2-2.13.1.jar",
                 "scala-library-2.13.15.jar", "snappy-java-1.1.10.5.jar"):
        (folder / "jars" / name).write_bytes(b"")
    (folder / "ready").write_text("x")
    spark_jars = tmp_path / "spark-jars"
    spark_jars.mkdir()
    for name in ("scala-library-2.13.16.jar", "snappy-java-1.1.10.8.jar", "spark-sql_2.13-4.2.0.jar"):
        (spark_jars / name).write_bytes(b"")
    assert [j.name for j in connector_jars("4.2.0", spark_jars)] == [
        "commons-pool2-2.13.1.jar", "kafka-clients-3.9.2.jar", "spark-sql-kafka-0-10_2.13-4.2.0.jar"]


def test_kafka_offsets_in_the_checkpoint_read_as_records_per_partition(tmp_path):
    conf = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'
    (tmp_path / "4").write_text(f'v1\n{conf}\n{{"orders":{{"0":250,"1":250}}}}')
    assert read_offsets_file(str(tmp_path / "4")) == [{"0": 250, "1": 250}]
    assert kafka_offsets(str(tmp_path / "4")) == {"orders": {"0": 250, "1": 250}}
    (tmp_path / "5").write_text(f'v1\n{conf}\n{{"a":{{"0":3}},"b":{{"0":4}}}}')
    assert read_offsets_file(str(tmp_path / "5")) == [{"a-0": 3, "b-0": 4}]
    rate = f'v1\n{conf}\n{{"0":{{"value":9,"runTimeMs":5}},"1":{{"value":10,"runTimeMs":5}}}}'
    (tmp_path / "6").write_text(rate)  # a rate source's offsets are not Kafka's
    assert read_offsets_file(str(tmp_path / "6")) == [{"0": 5, "1": 5}] and kafka_offsets(str(tmp_path / "6")) is None


def test_a_jobs_kafka_options_stand_but_where_and_from_when_it_reads():
    from chaos.jobs.kafka.source import kafka_options

    trial = {"bootstrap": "127.0.0.1:9", "topic": "streamchaos-t", "max_offsets": 200}
    job = {"kafka.bootstrap.servers": "broker:9092", "subscribePattern": "orders.*", "failOnDataLoss": "false",
           "kafka.security.protocol": "SASL_SSL", "kafka.sasl.jaas.config": "secret", "minPartitions": "4"}
    opts, changed = kafka_options(job, trial)
    assert opts == {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "streamchaos-t", "failOnDataLoss": "false",
                    "minPartitions": "4", "startingOffsets": "earliest", "maxOffsetsPerTrigger": "200",
                    "groupIdPrefix": "streamchaos-t.spark"}
    assert changed["subscribePattern"] is None and changed["kafka.sasl.jaas.config"] is None
    assert "secret" not in str(changed)  # what was removed is named, never its value
    own = kafka_options({"subscribe": "orders", "startingOffsets": "earliest", "maxOffsetsPerTrigger": 50}, trial)
    assert own[0]["maxOffsetsPerTrigger"] == "50" and "maxOffsetsPerTrigger" not in own[1]
    assert "startingOffsets" not in own[1] and own[1] == {"subscribe": "streamchaos-t",
                                                        "kafka.bootstrap.servers": "127.0.0.1:9",
                                                        "groupIdPrefix": "streamchaos-t.spark"}
    grouped = kafka_options({"subscribe": "orders", "kafka.group.id": "orders-app"}, trial)[0]
    assert grouped["kafka.group.id"] == "streamchaos-t.orders-app" and "groupIdPrefix" not in grouped


def test_a_broker_fault_on_a_pipeline_without_kafka_is_one_line(tmp_path):
    run = cli("trial", "passthrough-append", "--fault", "kill-broker@2:planned", cwd=tmp_path)
    assert run.rc == 2 and "Traceback" not in run.stderr
    assert "reads no Kafka through the harness's broker" in run.stderr.strip().splitlines()[-1]


def test_delete_records_takes_a_count_and_only_a_pipeline_that_reads_the_broker():
    import pytest

    from chaos.errors import UserError
    from chaos.run.admission import validate_schedule
    from chaos.scenario.faults import parse_fault
    from chaos.scenario.scenario import Scenario
    from pipelines_under_test import resolve

    fault = parse_fault("delete-records@2:planned/300")
    assert (fault.kind, fault.target, fault.count) == ("delete", "records", 300)
    assert parse_fault("delete-records@0:planned").count is None  # a batch's worth
    assert parse_fault("kill-executor@1:reading/1").count is None
    with pytest.raises(UserError, match="reads no Kafka through the harness's broker"):
        validate_schedule(Scenario(pipeline="passthrough-append", faults=[fault]), resolve("passthrough-append"))
    validate_schedule(Scenario(pipeline="kafka-passthrough", faults=[fault]), resolve("kafka-passthrough"))


def test_a_progress_reports_end_offsets_count_as_the_checkpoints_do():
    """Under asynchronous progress tracking the driver tells the harness each finished batch's end offsets (a
    progress report's ``endOffset``, parsed or as JSON text): they count records per partition like offsets/N."""
    assert offset_counts({"streamchaos-t": {"0": 614, "1": 381}}) == {"0": 614, "1": 381}
    assert offset_counts(json.loads('{"streamchaos-t":{"0":3}}')) == {"0": 3}
    assert offset_counts("not an offset") is None
    assert async_progress({"asyncProgressTrackingEnabled": "TRUE"}) and not async_progress(None)
    assert not async_progress({"asyncProgressTrackingEnabled": "false"})


def test_a_fed_topic_is_cut_into_chunks_in_id_order():
    """Real-time mode's feed: the first chunk goes before the query starts, one more per committed batch; chunks
    follow the ids, so batch N meets about chunk N whatever the partitions."""
    import polars as pl

    events = pl.DataFrame({"id": [4, 0, 3, 1, 2], "partition": [0, 1, 0, 1, 0]})
    feed = KafkaFeed(None, "t", events, 2, lambda frame: frame, None)
    assert [c["id"].to_list() for c in feed.chunks] == [[0, 1], [2, 3], [4]]
    assert feed.allowed == 1 and not feed.done
    feed.advance()
    assert feed.allowed == 2


def test_add_partitions_takes_a_count_at_a_batch_and_refuses_a_fed_topic_or_no_kafka():
    import pytest

    from chaos.errors import UserError
    from chaos.run.admission import validate_schedule
    from chaos.scenario.faults import parse_fault
    from chaos.scenario.scenario import Scenario
    from pipelines_under_test import resolve

    fault = parse_fault("add-partitions@2:committed/3")
    assert (fault.kind, fault.target, fault.count) == ("add", "partitions", 3)
    assert parse_fault("add-partitions@1:planned").count is None  # one partition
    for bad, says in (("add-partitions@1:planned/0", "at least 1"), ("add-partitions@1:planned/3s", "at least 1"),
                      ("add-partitions@4.5s/2", "not a time"), ("add-partitions@5s/3s", "not a time")):
        with pytest.raises(UserError, match=says):
            parse_fault(bad)
    validate_schedule(Scenario(pipeline="kafka-windowed-count", faults=[fault]), resolve("kafka-windowed-count"))
    for pipeline, says in (("passthrough-append", "reads no Kafka"), ("kafka-real-time", "fed its records")):
        with pytest.raises(UserError, match=says):
            validate_schedule(Scenario(pipeline=pipeline, faults=[fault]), resolve(pipeline))


def test_a_grown_topic_places_later_records_by_key_among_all_its_partitions_and_recounts_offsets():
    """After ``add-partitions@2:committed/2`` on 2 partitions of 100-record batches, ids from 300 on are placed by
    key among 4 partitions (the earlier ones keep theirs): each partition's offsets count 0, 1, ... in id order."""
    from chaos.run.topics import grown_layout, grown_partitions
    from chaos.scenario.faults import parse_fault
    from chaos.scenario.scenario import Scenario, generate_events

    scenario = Scenario(pipeline="kafka-passthrough", events=1000, events_per_batch=100, partitions=2, keys=20,
                        faults=[parse_fault("add-partitions@2:committed/2")])
    before = generate_events(scenario)
    after = grown_layout(before, 2, scenario.faults, 100)
    assert grown_partitions(2, scenario.faults) == 4
    assert grown_layout(before, 2, [], 100) is before
    assert after.sort("id").head(300).select("id", "partition", "offset").equals(
        before.sort("id").head(300).select("id", "partition", "offset"))
    late = after.filter(pl.col("id") >= 300)
    assert set(late["partition"].unique()) == {0, 1, 2, 3} and after["partition"].max() == 3
    per_key = late.group_by("key").agg(pl.col("partition").n_unique())
    assert per_key["partition"].max() == 1  # a key's records stay together after the resize
    for _, part in after.sort("id").group_by("partition"):
        assert part["offset"].to_list() == list(range(part.height))
    assert after.height == before.height and set(after["id"]) == set(before["id"])



def test_each_add_partitions_fault_grows_to_its_own_count_and_a_missed_one_is_named_at_a_stall():
    """Two faults out of order: targets in the schedule's order, so the later fault reaches its count though the
    earlier one never fired; records still held then name the harness in a stalled trial's reason."""
    from chaos.run.topics import TrialTopics, grow_targets
    from chaos.scenario.faults import parse_fault

    late, early = parse_fault("add-partitions@4:sink-done/2"), parse_fault("add-partitions@1:committed")
    assert grow_targets(2, [late, early]) == {early.spec: 3, late.spec: 5}
    topics = TrialTopics.__new__(TrialTopics)
    topics.held = pl.DataFrame({"id": [7, 9], "partition": [3, 4]})
    assert "2 records held back" in topics.unsent() and "the harness's, not Spark's" in topics.unsent()
    topics.held = topics.held.clear()
    assert topics.unsent() is None


def test_a_topic_grown_while_a_killed_broker_takes_its_clients_handles_asks_again():
    """kill-broker@3:planned beside add-partitions@3:reading/2 on three brokers: the leader's death destroyed the
    watermark query's connection (_DESTROY_BROKER) and the held records never reached the topic; the wait asks
    again until the partitions show."""
    from confluent_kafka import KafkaError, KafkaException

    from chaos.run.topics import TrialTopics
    from chaos.scenario.faults import parse_fault

    class Broker:
        def __init__(self) -> None:
            self.asked, self.partitions, self.produced = 0, 2, []

        def add_partitions(self, topic: str, total: int) -> None:
            self.partitions = total

        def end_offsets(self, topic: str) -> dict[str, int]:
            self.asked += 1
            if self.asked == 1:
                raise KafkaException(KafkaError(KafkaError._DESTROY_BROKER))
            return {str(p): 0 for p in range(self.partitions)}

        def produce(self, topic: str, records) -> int:
            self.produced.extend(records)
            return len(self.produced)

    grow = parse_fault("add-partitions@3:reading/2")
    topics = TrialTopics.__new__(TrialTopics)
    topics.broker, topics.topic, topics.partitions, topics.targets = Broker(), "t", 2, {grow.spec: 4}
    topics.pipeline = type("P", (), {"kafka_records": staticmethod(lambda frame: frame["id"].to_list())})()
    topics.held = pl.DataFrame({"id": [801, 803], "partition": [2, 3]})
    done = topics.grow(grow)
    assert done == {"topic": "t", "partitions": 4, "records": 2, "first_id": 801} and topics.broker.asked == 2
    assert topics.held.is_empty() and topics.unsent() is None
