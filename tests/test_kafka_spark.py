"""The harness's Kafka: a real KRaft broker on loopback, owned and reaped like every process of the harness, and
Spark's real Kafka connector (resolved from Maven) reading it with the job's own options."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import psutil
import pytest

from chaos.clusters.kafka.broker import KafkaBroker
from chaos.clusters.kafka.jars import _refusal, connector, connector_jars
from chaos.errors import UserError
from chaos.machine.maven import resolve
from chaos.machine.processes import OWNER_VAR, Owned, reap_orphans, tagged_processes
from chaos.machine.spark_versions import installed, python_for
from tests.conftest import REPO, cli, left_by, require_java
from tests.test_trials_spark import ids_of_batch

pytestmark = pytest.mark.spark

# The newest Spark whose Kafka connector (and its token provider) the Maven repositories serve.
CONNECTOR_SPARK = "4.2.0"


def added_connector_spark(tmp_path: Path) -> None:
    """The PySpark whose Kafka connector Maven serves, added once per machine (``streamchaos spark add``)."""
    if CONNECTOR_SPARK not in installed():
        assert cli("spark", "add", CONNECTOR_SPARK, cwd=tmp_path).rc == 0


# The connector's Spark runs its own standalone cluster, once for the module (started by that Spark's interpreter,
# which imports this checkout's harness): each trial below pays for its drivers and its broker, not for a cluster.
CLUSTER = """
import sys
from pathlib import Path
from chaos.clusters.standalone import StandaloneCluster
from chaos.machine.processes import Owned
owned = Owned()
cluster = StandaloneCluster(owned, Path(sys.argv[1]), workers=2, worker_cores=2, worker_memory="2g")
try:
    cluster.start()
    print(cluster.master_url, flush=True)
    sys.stdin.read()
finally:
    cluster.stop()
    owned.stop_all()
"""


@pytest.fixture(scope="module")
def connector_cluster(tmp_path_factory):
    require_java()
    work = tmp_path_factory.mktemp("connector-cluster")
    added_connector_spark(work)
    proc = subprocess.Popen([str(python_for(CONNECTOR_SPARK)), "-c", CLUSTER, str(work)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("spark://127.0.0.1:"), f"the {CONNECTOR_SPARK} cluster did not start: {url!r}"
        yield url
    finally:
        proc.stdin.close()
        proc.wait(120)


def fired_at(result: dict) -> dict[str, float]:
    """When each of a trial's faults fired (seconds into the trial), by action."""
    return {f["spec"].split("@")[0]: f["t"] for f in result["faults"]}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    require_java()
    owned = Owned()
    started = KafkaBroker(owned, tmp_path_factory.mktemp("kafka-work")).start()
    yield started
    started.stop()
    owned.stop_all()


def events(count: int, partitions: int):
    for i in range(count):
        yield i % partitions, str(i % 7).encode(), json.dumps({"id": i, "v": i % 7}).encode(), 1_700_000_000_000 + i


def test_sparks_own_kafka_connector_reads_the_broker_and_keeps_kafka_offsets_in_the_checkpoint(broker, tmp_path):
    """A job as users write it: ``readStream.format("kafka")`` with its own options, through the connector at the
    running Spark's version; each batch's end offsets per partition land in ``offsets/N``."""
    added_connector_spark(tmp_path)
    python = python_for(CONNECTOR_SPARK)  # with this environment's packages beside it (py4j), as the harness runs it
    spark_home = subprocess.run([str(python), "-c", "import pyspark, os; print(os.path.dirname(pyspark.__file__))"],
                                capture_output=True, text=True, check=True).stdout.strip()
    jars = connector_jars(CONNECTOR_SPARK, Path(spark_home) / "jars")
    names = {j.name.rsplit("-", 1)[0] for j in jars}
    assert names >= {"spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13"}
    assert not [j for j in jars if j.name.startswith(("spark-sql_", "scala-library", "hadoop-client"))]
    broker.create_topic("orders", 2)
    broker.produce("orders", events(500, 2))
    assert len(broker.read("orders")) == 500  # a consumer of the harness's own sees every record first
    job = textwrap.dedent(f"""
        from pyspark.sql import SparkSession, functions as F
        spark = (SparkSession.builder.master("local[2]").config("spark.jars", {",".join(map(str, jars))!r})
                 .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
                 .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
        orders = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", {broker.bootstrap!r})
                  .option("subscribe", "orders").option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", 100).load()
                  .select(F.from_json(F.col("value").cast("string"), "id INT, v INT").alias("o")).select("o.*"))
        (orders.writeStream.format("parquet").option("path", {str(tmp_path / "out")!r})
         .option("checkpointLocation", {str(tmp_path / "checkpoint")!r}).trigger(availableNow=True).start()
         .awaitTermination())
    """)
    done = subprocess.run([str(python), "-c", job], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    causes = [line for line in done.stderr.splitlines() if "Caused by" in line or "Exception:" in line]
    assert done.returncode == 0, "\n".join(causes[:8]) + "\n" + done.stderr[-3000:]
    assert sorted(pl.read_parquet(tmp_path / "out" / "*.parquet")["id"].to_list()) == list(range(500))
    offsets = tmp_path / "checkpoint" / "offsets"
    batches = sorted(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
    ends = [json.loads((offsets / str(n)).read_text().splitlines()[-1])["orders"] for n in batches]
    assert len(batches) == 5  # 500 records, at most 100 a batch (the job's own maxOffsetsPerTrigger)
    assert ends[-1] == {"0": 250, "1": 250}
    assert [sum(e.values()) for e in ends] == [100, 200, 300, 400, 500]
    broker.delete_topic("orders")


def test_a_killed_broker_restarts_on_its_data_with_every_acknowledged_record(broker):
    assert broker.address == "127.0.0.1" and broker.start_s > 0
    listening = {c.laddr.ip.removeprefix("::ffff:") for c in psutil.Process(broker.group.pid).net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN}
    assert listening == {"127.0.0.1"}, listening
    broker.create_topic("kill-restart", 3)
    assert broker.produce("kill-restart", events(1000, 3)) == 1000
    old = broker.kill()
    assert not psutil.pid_exists(old) or psutil.Process(old).status() == psutil.STATUS_ZOMBIE
    broker.restart()
    rows = broker.read("kill-restart")
    assert sorted(json.loads(value)["id"] for _p, _o, _k, value in rows) == list(range(1000))
    assert {p for p, *_ in rows} == {0, 1, 2}
    broker.delete_topic("kill-restart")


ADMIN_JOB = """
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

admin = AdminClient({"bootstrap.servers": "kafka.prod:9092"})
admin.create_topics([NewTopic("orders-clean", 6, 3)])["orders-clean"].result(30)
topic = admin.describe_topics(TopicCollection(["orders-clean"]))["orders-clean"].result(30)
reader = Consumer({"bootstrap.servers": "kafka.prod:9092", "group.id": "lag-check", "enable.auto.commit": False})
reader.commit(offsets=[TopicPartition("orders-clean", 0, 3)], asynchronous=False)
reader.close()
lag = admin.list_consumer_group_offsets(
    [ConsumerGroupTopicPartitions("lag-check", [TopicPartition("orders-clean", 0)])])["lag-check"].result(30)
latest = {TopicPartition("orders-clean", p): OffsetSpec.latest() for p in (0, 1)}
ends = {tp: f.result(30).offset for tp, f in admin.list_offsets(latest).items()}
listed = admin.list_topics(timeout=30).topics
groups = [g.group_id for g in admin.list_consumer_groups().result(30).valid]
legacy = [g.id for g in admin.list_groups(timeout=30)]
"""


def _holds_the_trials_names(broker, trial: str) -> None:
    """The broker as it is after a job's admin calls: the trial's topic and group (offset 3 kept on partition 0),
    no topic of the job's name; the trial's topic deleted after."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    harness = broker.admin()
    assert "orders-clean" not in harness.list_topics(timeout=30).topics
    kept = harness.list_consumer_group_offsets([ConsumerGroupTopicPartitions(f"{trial}.lag-check",
                                                                             [TopicPartition(trial, 0)])])
    assert [(tp.topic, tp.offset) for tp in kept[f"{trial}.lag-check"].result(30).topic_partitions] == [(trial, 3)]
    broker.delete_topic(trial)


def test_a_jobs_admin_client_asks_the_trials_broker_and_answers_in_the_jobs_names(broker, kafka_rerouted, tmp_path):
    """A job that makes its topic at start and reads its consumer group's lag with confluent_kafka's AdminClient, as
    written for its production broker: it reaches the trial's, its topic is the harness's (its 6 partitions are not
    made), its group is the trial's, and every answer names the job's topic and group."""
    from chaos.jobs.kafka import sink as kafka_sink

    trial = "streamchaos-t7-out"
    broker.create_topic(trial, 2)
    assert broker.produce(trial, events(10, 2)) == 10
    kafka_sink.end()
    kafka_sink.begin({"bootstrap": broker.bootstrap, "topic": trial}, tmp_path, "orders-clean")
    job = {"__name__": "orders_job"}
    exec(ADMIN_JOB, job)  # noqa: S102 - the job module's own code
    assert job["topic"].name == "orders-clean" and len(job["topic"].partitions) == 2
    assert job["lag"].group_id == "lag-check"
    assert [(tp.topic, tp.partition, tp.offset) for tp in job["lag"].topic_partitions] == [("orders-clean", 0, 3)]
    assert {(tp.topic, tp.partition): end for tp, end in job["ends"].items()} == {("orders-clean", 0): 5,
                                                                                 ("orders-clean", 1): 5}
    assert "orders-clean" in job["listed"] and job["groups"] == job["legacy"] == ["lag-check"]
    _holds_the_trials_names(broker, trial)


KAFKA_PYTHON_ADMIN_JOB = """
import time

from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import CoordinatorNotAvailableError
from kafka.structs import OffsetAndMetadata

admin = KafkaAdminClient(bootstrap_servers="kafka.prod:9092", api_version=(0, 10, 1))
admin.create_topics([NewTopic(name="orders-clean", num_partitions=6, replication_factor=3)])
described = admin.describe_topics(["orders-clean"])
retention = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "orders-clean", ["retention.ms"])])
for attempt in range(30):  # a fresh broker makes its offsets topic at the first group's request
    try:
        admin.alter_group_offsets("lag-check", {TopicPartition("orders-clean", 0): OffsetAndMetadata(3, "", -1)})
        break
    except CoordinatorNotAvailableError:
        time.sleep(1)
lag = admin.list_group_offsets(["lag-check"])
groups = [g["group_id"] for g in admin.list_groups()]
admin.close()
"""


def test_a_jobs_kafka_python_admin_asks_the_trials_broker_and_answers_in_the_jobs_names(broker, kafka_rerouted,
                                                                                        tmp_path):
    """The same with kafka-python's KafkaAdminClient: the topic the job names is the harness's (2 partitions, not
    the job's 6), its group's offsets are kept in the trial's group, and the answers name the job's topic and group."""
    from chaos.jobs.kafka import sink as kafka_sink

    trial = "streamchaos-t8-out"
    broker.create_topic(trial, 2)
    assert broker.produce(trial, events(4, 2)) == 4  # its partitions led and written
    kafka_sink.end()
    kafka_sink.begin({"bootstrap": broker.bootstrap, "topic": trial}, tmp_path, "orders-clean")
    job = {"__name__": "orders_job"}
    exec(KAFKA_PYTHON_ADMIN_JOB, job)  # noqa: S102 - the job module's own code
    assert [(d["name"], len(d["partitions"])) for d in job["described"]] == [("orders-clean", 2)]
    assert "orders-clean" in str(job["retention"]) and trial not in str(job["retention"])
    assert {(tp.topic, tp.partition): o.offset for tp, o in job["lag"]["lag-check"].items()} == {("orders-clean", 0): 3}
    assert job["groups"] == ["lag-check"]
    _holds_the_trials_names(broker, trial)


def test_a_broker_of_a_sigkilled_harness_is_reaped_at_the_next_start(tmp_path):
    require_java()
    harness = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from chaos.clusters.kafka.broker import KafkaBroker
        from chaos.machine.processes import Owned
        broker = KafkaBroker(Owned(), Path({str(tmp_path)!r})).start()
        print(broker.group.pid, flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        pid = int(harness.stdout.readline())
        assert psutil.Process(pid).environ()[OWNER_VAR].startswith(f"{harness.pid}:")
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait()
    assert psutil.pid_exists(pid)  # its own session: a SIGKILLed harness leaves it
    assert reap_orphans() >= 1
    assert not [p for p in tagged_processes() if p.pid == pid]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_connector_the_repositories_do_not_serve_is_one_line_naming_the_way_out():
    with pytest.raises(UserError) as refused:
        resolve(connector("4.0.99"), refusal=_refusal)
    message = str(refused.value)
    assert "\n" not in message and "spark-sql-kafka-0-10_2.13:4.0.99 is not served" in message
    assert "streamchaos spark add" in message and "--kafka stand-in" in message


def test_the_broker_says_what_it_fetches_once_and_then_starts_from_the_cache(tmp_path):
    said: list[str] = []
    owned = Owned()
    started = time.monotonic()
    broker = KafkaBroker(owned, tmp_path).start(say=said.append)
    try:
        assert time.monotonic() - started < 120
        assert said == []  # resolved by the module's broker: the cache is reused, nothing fetched twice
    finally:
        broker.stop()
        owned.stop_all()
    assert not (tmp_path / "kafka").exists()


def test_doctor_has_a_kafka_line_ok_where_the_connector_is_served_and_a_way_out_where_not(monkeypatch):
    import pyspark

    from chaos.cli.doctor import check_kafka

    monkeypatch.setattr(pyspark, "__version__", CONNECTOR_SPARK)
    served = check_kafka()
    assert served.status == "ok" and f"connector {CONNECTOR_SPARK} cached" in served.detail
    monkeypatch.setattr(pyspark, "__version__", "4.0.99")
    refused = check_kafka()
    assert refused.status == "warn" and "4.0.99 is not served" in refused.detail
    assert "streamchaos spark add" in refused.fix


ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def test_a_jobs_own_kafka_source_runs_through_sparks_connector_and_a_replayed_batch_is_found(tmp_path,
                                                                                            connector_cluster):
    """examples/orders_append.py as written (its broker localhost:9092, its topic ``orders``, no start or limit
    options) on the real path: the trial's records in a topic of the harness's broker, the job's
    ``readStream.format("kafka")`` through Spark's connector, the batch the killed driver replays found twice and
    attributed from the Kafka offsets Spark wrote to ``offsets/N``; an executor killed as batch 1's tasks start
    reading (the executor plugin's ``reading``) changes nothing."""
    job = f"{REPO}/examples/orders_append.py:run"
    run = cli("--spark", CONNECTOR_SPARK, "trial", job, "--schema", ORDER, "--sink", "postgres:orders",
              "--cluster", connector_cluster,
              "--events", "1200", "--fault", "kill-executor@1:reading", "--fault", "kill-driver@3:sink-done", "--json",
              "--keep", str(tmp_path / "run"), cwd=tmp_path, timeout=900)
    assert run.rc == 1, run.stderr[-3000:]  # at-least-once: it violates the exactly-once a job declares
    r = run.json
    assert r["spark"] == CONNECTOR_SPARK and r["verdict"] == "at-least-once"
    source = r["source"]
    assert source["via"] == "connector" and source["connector"].endswith(f"spark-sql-kafka-0-10_2.13:{CONNECTOR_SPARK}")
    assert source["set"]["subscribe"] == source["topic"] and source["set"]["startingOffsets"] == "earliest"
    assert source["set"]["kafka.bootstrap.servers"] == source["bootstrap"].replace("localhost", "127.0.0.1")
    assert source["set"]["maxOffsetsPerTrigger"] == "200"
    attributed = {(tuple(d["batches"]), tuple(d["faults"])) for d in r["duplicated"]}
    assert attributed == {((3,), ("kill-driver@3:sink-done",))}
    assert {i for d in r["duplicated"] for i in d["ids"]} <= ids_of_batch(r, 3)
    assert all(f["fired"] for f in r["faults"])
    history = [json.loads(line) for line in (tmp_path / "run" / "history.jsonl").read_text().splitlines()]
    produced, = [h["detail"] for h in history if h["kind"] == "kafka" and "ends" in h["detail"]]
    assert sum(produced["ends"].values()) == 1200 and produced["topic"] == source["topic"]
    last = [o for o in r["offsets"] if o["committed"]][-1]["end"]
    assert last == produced["ends"]  # every record read, counted from the offsets Spark wrote
    assert "streamchaos-" in source["topic"]
    assert left_by(run.pid) == []  # the broker went with the harness that started it


def test_kafka_windowed_count_is_exactly_once_through_a_broker_kill_and_a_replayed_batch(tmp_path, connector_cluster):
    """The window state and Kafka's offsets are saved together in the checkpoint, and the upsert by window makes
    a replay overwrite itself: the source channel to the broker cut at batch 1, the topic grown from 2 to 4
    partitions before batch 2's commit (the records keyed to the new ones from batch 3 on produced there), the
    broker killed at batch 3 and the driver killed after batch 4's write change nothing; Spark's source found the
    new partitions and read them whole; the consistent cut holds at every committed batch."""
    run = cli("--spark", CONNECTOR_SPARK, "trial", "kafka-windowed-count", "--cluster", connector_cluster,
              "--events", "1200", "--late-fraction", "0.05", "--fault", "cut-source@1:planned/4s",
              "--fault", "add-partitions@2:sink-done/2", "--fault", "kill-broker@3:planned/2s",
              "--fault", "kill-driver@4:sink-done", "--json", "--keep", str(tmp_path / "run"), cwd=tmp_path,
              timeout=900)
    assert run.rc == 0, run.stderr[-3000:]
    r = run.json
    assert r["verdict"] == "exactly-once" and all(f["fired"] for f in r["faults"]), r["faults"]
    events = pl.read_parquet(tmp_path / "run" / "events.parquet")
    grown = next(f for f in r["faults"] if f["spec"].startswith("add-partitions"))
    assert grown["detail"]["partitions"] == 4 and grown["detail"]["records"] == events.filter(
        pl.col("partition") >= 2).height > 0, grown
    last = [o for o in r["offsets"] if o["committed"]][-1]["end"]
    assert last == {str(p): n for p, n in events.group_by("partition").len().iter_rows()}, last
    at = fired_at(r)
    assert at["kill-broker"] - at["cut-source"] >= 4.0  # the connector waited out the cut (embedded proxy)
    cut = r["consistent_cut"]
    assert cut["ok"] is True and len(cut["batches_checked"]) >= 5, cut
    assert left_by(run.pid) == []


@pytest.mark.long  # the job sink tests below show both in the default run
def test_conformance_of_the_kafka_sinks_agrees_with_what_is_documented(tmp_path, connector_cluster):
    """Spark's Kafka sink is at-least-once as its guide says; a transaction per batch is exactly-once on committed
    reads with the batch id committed inside it (without it, ``kafka-transactional-id``, at-least-once: measured in
    docs/kafka.md). One harness and broker for the two."""
    out = tmp_path / "conf"
    run = cli("--spark", CONNECTOR_SPARK, "conformance", "--cluster", connector_cluster, "--trials", "1",
              "--only", "kafka-passthrough", "--only", "kafka-transactional", "--out", str(out), cwd=tmp_path,
              timeout=1500)
    assert run.rc == 0, run.stderr[-3000:]
    rows = {r["pipeline"]: r for r in json.loads((out / "conformance.json").read_text())["rows"]}
    measured = {name: (row["measured"], row["agrees"]) for name, row in rows.items()}
    assert measured == {"kafka-passthrough": ("at-least-once", True),
                        "kafka-transactional": ("exactly-once", True)}, rows
    verdicts = verdicts_of(out)
    assert verdicts["kafka-transactional"]["sink"]["output_topic"]["not_committed"] > 0  # the aborted batch
    # Spark's Kafka sink, no Python in it: the driver killed after batch 1 reached the output topic, before
    # commits/1 (sink-done from the checkpoint's file manager), has batch 1 written twice, every record of it.
    [passthrough] = out.glob("trials/kafka-passthrough-*")
    result = json.loads((passthrough / "result.json").read_text())
    assert {(d["batch"], d["fault"]) for d in verdicts["kafka-passthrough"]["duplicated"]} == {
        (1, "kill-driver@1:sink-done")}
    output = pl.read_parquet(passthrough / "sink" / "output-topic.parquet")
    assert output.height == result["events"] + len(ids_of_batch(result, 1)) and output["committed"].all()
    assert left_by(run.pid) == []


@pytest.mark.long
def test_the_kafka_sink_in_real_time_mode_is_at_least_once_as_documented(tmp_path, connector_cluster):
    """Real-time mode: the topic fed a batch of records per commit (not read whole by batch 0), every record in the
    output topic, and a repeat only after the kill between the batch's writes and its commit."""
    out = tmp_path / "conf"
    run = cli("--spark", CONNECTOR_SPARK, "conformance", "--cluster", connector_cluster, "--trials", "1",
              "--only", "kafka-real-time", "--out", str(out), cwd=tmp_path, timeout=1500)
    assert run.rc == 0, run.stderr[-3000:]
    rows = {r["pipeline"]: r for r in json.loads((out / "conformance.json").read_text())["rows"]}
    assert (rows["kafka-real-time"]["measured"], rows["kafka-real-time"]["agrees"]) == ("at-least-once", True)
    [real_time] = out.glob("trials/kafka-real-time-*")
    history = [json.loads(line) for line in (real_time / "history.jsonl").read_text().splitlines()]
    assert [r["detail"]["chunk"] for r in history if r["kind"] == "fed"] == [0, 1, 2, 3, 4]
    rt = verdicts_of(out)["kafka-real-time"]
    assert rt["lost"] == [] and {d["fault"] for d in rt["duplicated"]} <= {"kill-driver@2:sink-done"}
    assert left_by(run.pid) == []


@pytest.mark.long
def test_asynchronous_progress_tracking_drains_though_its_last_batch_is_never_checkpointed(tmp_path,
                                                                                        connector_cluster):
    """``asyncProgressTrackingEnabled``: Spark writes offsets/N and commits/N at most once a second, and not for the
    last batches before the input ends, so the checkpoint never shows the input read (the trial once stalled for
    180 s). The driver tells the harness each batch its query finished; the trial drains, at-least-once."""
    run = cli("--spark", CONNECTOR_SPARK, "trial", "kafka-passthrough", "--cluster", connector_cluster,
              "--conf", "asyncProgressTrackingEnabled=true", "--events", "1000", "--fault", "kill-driver@1:sink-done",
              "--json", cwd=tmp_path, timeout=900)
    assert run.rc == 0, run.stderr[-3000:]
    r = run.json
    assert r["outcome"] == "drained" and r["verdict"] == "at-least-once", r
    history = [json.loads(line) for line in (Path(r["run_dir"]) / "history.jsonl").read_text().splitlines()]
    assert any(h["kind"] == "driver" and h["detail"].get("event") == "progress" for h in history)


def verdicts_of(out: Path) -> dict[str, dict]:
    """A conformance run's verdicts by pipeline (one trial each)."""
    return {p.parent.name.rsplit("-", 1)[0]: json.loads(p.read_text()) for p in out.glob("trials/*/verdict.json")}


LOSSY = '''
from pipelines_under_test.kafka import KafkaPassthrough

LOSSY = KafkaPassthrough("kafka-passthrough-lossy", "kafka", "at-least-once", "failOnDataLoss=false")
LOSSY.fail_on_data_loss = False
'''


DELETED = ["--fault", "delete-records@0:planned/200", "--events", "1000", "--json"]


@pytest.mark.long
def test_records_deleted_before_the_query_read_them_fail_it_by_sparks_default(tmp_path, connector_cluster):
    """``delete-records@0:planned/200``: batch 0's records and 200 more leave the topic before any task fetched
    them. Spark's default (failOnDataLoss=true) fails the query with Kafka's message, every restart again: an
    inconclusive trial that says why."""
    strict = cli("--spark", CONNECTOR_SPARK, "trial", "kafka-passthrough", *DELETED, "--cluster", connector_cluster,
                 cwd=tmp_path, timeout=900)
    assert strict.rc == 3, strict.stderr[-3000:]  # inconclusive
    r = strict.json
    assert r["outcome"] == "failed" and "Some data may have been lost" in r["reason"], r["reason"]
    assert left_by(strict.pid) == []


def test_records_deleted_before_the_query_read_them_are_the_sources_loss(tmp_path, connector_cluster):
    """The same deletion with failOnDataLoss=false: the query skips the records, the harness reports them as what
    the source lost and judges the sink on the rest (exactly-once)."""
    (tmp_path / "lossy.py").write_text(LOSSY)
    lossy = cli("--spark", CONNECTOR_SPARK, "trial", "lossy:LOSSY", *DELETED, "--cluster", connector_cluster,
                cwd=tmp_path, timeout=900)
    assert lossy.rc == 0, lossy.stderr[-3000:]
    r = lossy.json
    deleted = r["faults"][0]["detail"]["deleted_before"]
    assert r["verdict"] == "exactly-once" and r["lost"] == []
    # Every record below the new start offsets (batch 0's ~200 and 200 more), none of them in the sink.
    assert r["source_lost"]["ids"] == sum(deleted.values()) >= 390
    assert r["source_lost"]["faults"] == ["delete-records@0:planned/200"]
    assert r["multiplicity"]["1"] == 1000 - r["source_lost"]["ids"]
    assert left_by(lossy.pid) == []


TOXIPROXY = "github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0"


@pytest.fixture(scope="module")
def real_toxiproxy(tmp_path_factory):
    """The real Toxiproxy server, built once per machine with ``go install`` from its Go module (the module proxy
    ``go`` is set up for), on a free loopback port for this module."""
    import shutil

    gobin = Path.home() / ".cache" / "streamchaos" / "go-bin"
    server = gobin / "server"
    if not server.exists():
        if shutil.which("go") is None:
            pytest.fail("the real Toxiproxy builds with Go: install it (apt-get install golang-go)")
        built = subprocess.run(["go", "install", TOXIPROXY], env={**os.environ, "GOBIN": str(gobin)},
                               capture_output=True, text=True, timeout=600)
        assert built.returncode == 0, built.stderr[-2000:]
    from chaos.machine.spark import free_port

    port = free_port()
    proc = subprocess.Popen([str(server), "-host", "127.0.0.1", "-port", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        from chaos.machine.processes import wait_until

        assert wait_until(lambda: _answers(port), 30, 0.2), "Toxiproxy did not start"
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def _answers(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_channel_faults_reach_the_connections_to_the_broker_through_the_real_toxiproxy(tmp_path, real_toxiproxy,
                                                                                       connector_cluster):
    """The job's Kafka source and sink reach the broker through listeners of their own, advertised as the source
    and sink channels' proxies: a cut source channel holds batch 1 for its duration, a reset and a delayed channel
    are ridden out, nothing lost or repeated. With the real Toxiproxy (``--toxiproxy``); the windowed count's
    test above cuts the source channel on the harness's embedded one."""
    run = cli("--spark", CONNECTOR_SPARK, "trial", "kafka-passthrough", "--toxiproxy", real_toxiproxy,
              "--cluster", connector_cluster,
              "--events", "1000", "--fault", "cut-source@1:planned/4s", "--fault", "reset-sink@2:planned/3s",
              "--fault", "delay-source@3:planned/latency=800/3s", "--json", cwd=tmp_path, timeout=900)
    assert run.rc == 0, run.stderr[-3000:]
    r = run.json
    assert r["verdict"] == "exactly-once" and all(f["fired"] for f in r["faults"]), r["faults"]
    at = fired_at(r)
    assert at["reset-sink"] - at["cut-source"] >= 4.0  # batch 1 waited out the cut source channel
    assert left_by(run.pid) == []


@pytest.mark.parametrize("variant", ["run", pytest.param("run_batch", marks=pytest.mark.long)])
def test_a_jobs_kafka_sink_writes_the_trials_output_topic_and_a_replayed_batch_is_found_twice(tmp_path, variant,
                                                                                              connector_cluster):
    """examples/orders_kafka.py as written: Kafka in, Kafka out (its broker localhost:9092, its topic
    orders-clean), through Spark's connector both ways. Its writes land in the trial's output topic; the driver
    killed after batch 2's records reached it (``sink-done``, before ``commits/N``) has them written again: every
    id of batch 2 twice, at-least-once as Spark documents its Kafka sink; Spark's answer, written to Parquet, has
    each once. The foreachBatch variant with Spark's batch writer (``run_batch``, the long tier) does the same."""
    folder = tmp_path / "run"
    run = cli("--spark", CONNECTOR_SPARK, "trial", f"{REPO}/examples/orders_kafka.py:{variant}", "--schema", ORDER,
              "--sink", "kafka:orders-clean", "--cluster", connector_cluster, "--events", "800",
              "--fault", "kill-driver@2:sink-done", "--json", "--keep", str(folder), cwd=tmp_path, timeout=900)
    assert run.rc == 1, run.stderr[-3000:]
    r = run.json
    assert r["verdict"] == "at-least-once", r["verdict"]
    assert {(tuple(d["batches"]), tuple(d["faults"])) for d in r["duplicated"]} == {
        ((2,), ("kill-driver@2:sink-done",))}
    twice, batch = {i for d in r["duplicated"] for i in d["ids"]}, ids_of_batch(r, 2)
    assert twice <= batch  # a sample of the duplicated rows: batch 2's ids, none else
    assert r["anomaly_counts"]["duplicated"] >= 0.9 * len(batch)  # nearly all of it (the job drops amounts <= 0)
    assert (folder / "sink" / "output-topic.parquet").exists() and any((folder / "oracle" / "kafka").iterdir())
    assert left_by(run.pid) == []


@pytest.mark.long  # the encoding and the jar it adds: tests/test_job_shapes.py, tests/test_job_jars.py
def test_a_job_decoding_avro_with_its_own_schema_file_reads_what_the_registry_framing_carries(tmp_path,
                                                                                              connector_cluster):
    """examples/orders_avro.py as written: each value a schema registry's five-byte header and Avro bytes in the
    job's orders.avsc, stripped and decoded by ``from_avro`` (Spark's Avro jar added as spark-submit --packages
    would). Every order reaches the sink with all its fields, once through a replayed batch."""
    folder = tmp_path / "run"
    schema = f"avro-confluent:{REPO}/examples/orders.avsc"
    run = cli("--spark", CONNECTOR_SPARK, "trial", f"{REPO}/examples/orders_avro.py:run", "--schema", ORDER,
              "--sink", "parquet", "--kafka-value", schema, "--cluster", connector_cluster, "--events", "400",
              "--fault", "kill-driver@1:sink-done", "--json", "--keep", str(folder), cwd=tmp_path, timeout=900)
    assert run.rc == 0, run.stderr[-3000:]
    r = run.json
    assert r["verdict"] == "exactly-once" and r["source"]["via"] == "connector" and r["faults"][0]["fired"]
    from pipelines_under_test import resolve

    written = resolve(r["pipeline"]).read_output(folder / "sink")
    assert written.height > 360 and written.null_count().sum_horizontal().item() == 0  # amounts <= 0 dropped
    assert written["order_id"].str.starts_with("order_id-").all() and written["amount"].min() > 0
    assert left_by(run.pid) == []


@pytest.mark.parametrize(("job", "verdict"), [("kafka_txn_marker", "exactly-once"),
                                              pytest.param("kafka_producer", "at-least-once", marks=pytest.mark.long)])
def test_a_jobs_own_transactional_producer_reaches_the_trials_topic_and_skips_a_replayed_batch(tmp_path, job, verdict,
                                                                                             connector_cluster):
    """benchmarks/corpus/kafka_txn_marker.py as written: its foreachBatch makes its own confluent_kafka producer
    (broker kafka:9092, topic orders-clean) and writes each batch in one transaction that commits the batch id as a
    consumer group's offset. Its clients reach the trial's broker and output topic; the driver killed after batch
    2's transaction committed (``sink-done``) has the replay skipped: exactly-once on committed reads. Spark's
    answer ran with a topic of its own, read back into its folder. The same producer without the
    transaction (kafka_producer, the long tier) writes batch 2 twice."""
    folder = tmp_path / "run"
    run = cli("--spark", CONNECTOR_SPARK, "trial", f"{REPO}/benchmarks/corpus/{job}.py:run", "--schema", ORDER,
              "--sink", "kafka:orders-clean", "--cluster", connector_cluster, "--events", "800",
              "--fault", "kill-driver@2:sink-done", "--json", "--keep", str(folder), cwd=tmp_path, timeout=900)
    r = run.json
    assert r["verdict"] == verdict, run.stderr[-3000:]
    records = pl.read_parquet(folder / "sink" / "output-topic.parquet")
    answer = pl.read_parquet(folder / "oracle" / "kafka" / "answer-topic.parquet")
    committed = records.filter(pl.col("committed")).height
    assert answer.height == 800 and (committed == 800 if verdict == "exactly-once" else committed > 800)
    assert all(f["fired"] for f in r["faults"]) and left_by(run.pid) == []


KAFKA_PYTHON_TXN = '''
"""kafka_txn_marker's transaction per batch, written with kafka-python as many jobs are: the batch id committed as a
consumer group's offset in the transaction that produces the batch; a batch already committed is skipped."""

import json

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError
from kafka.structs import OffsetAndMetadata
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
BOOTSTRAP = "kafka:9092"
TOPIC = "orders-clean"
APP = "orders-clean-writer"


def write(batch, batch_id):
    producer = KafkaProducer(bootstrap_servers=BOOTSTRAP, transactional_id=APP, key_serializer=str.encode,
                             value_serializer=str.encode)
    marker = KafkaConsumer(bootstrap_servers=BOOTSTRAP, group_id=APP, enable_auto_commit=False,
                           isolation_level="read_committed")
    try:
        producer.init_transactions()
        done = marker.committed(TopicPartition(TOPIC, 0))
        if done is not None and done > batch_id:  # written by a run that died before Spark's commit
            return
        producer.begin_transaction()
        for row in batch.collect():
            producer.send(TOPIC, key=row["order_id"], value=json.dumps(row.asDict(), default=str))
        producer.send_offsets_to_transaction({TopicPartition(TOPIC, 0): OffsetAndMetadata(batch_id + 1, "", -1)},
                                             APP)
        producer.commit_transaction()
    finally:
        marker.close()
        producer.close()


def run(spark=None):
    admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP, api_version=(0, 10, 1))
    try:
        admin.create_topics([NewTopic(name=TOPIC, num_partitions=1, replication_factor=1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()
    spark = spark or SparkSession.builder.getOrCreate()
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/checkpoints/orders-clean").start()
'''


def test_a_jobs_kafka_python_transactions_reach_the_trials_topic_and_skip_a_replayed_batch(tmp_path,
                                                                                         connector_cluster):
    """The same transaction per batch with kafka-python's producer and consumer (chaos.jobs.kafka.kafka_python),
    the output topic made first by its admin client pinned to an old broker: they reach the trial's broker, output
    topic and group, and the replay after the driver died past batch 2's transaction is skipped: exactly-once on
    committed reads, Spark's answer in a topic of its own."""
    job = tmp_path / "orders_kafka_python.py"
    job.write_text(KAFKA_PYTHON_TXN)
    folder = tmp_path / "run"
    run = cli("--spark", CONNECTOR_SPARK, "trial", f"{job}:run", "--schema", ORDER, "--sink", "kafka:orders-clean",
              "--cluster", connector_cluster, "--events", "800", "--fault", "kill-driver@2:sink-done", "--json",
              "--keep", str(folder), cwd=tmp_path, timeout=900)
    r = run.json
    assert r["verdict"] == "exactly-once", run.stderr[-3000:]
    records = pl.read_parquet(folder / "sink" / "output-topic.parquet")
    answer = pl.read_parquet(folder / "oracle" / "kafka" / "answer-topic.parquet")
    assert answer.height == 800 and records.filter(pl.col("committed")).height == 800
    assert all(f["fired"] for f in r["faults"]) and left_by(run.pid) == []
