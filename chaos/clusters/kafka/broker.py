"""A Kafka broker owned by the harness: Apache Kafka in KRaft mode, one process that is its own controller.

Started like the harness's PostgreSQL (``chaos.clusters.postgres``): on 127.0.0.1 and free ports of its own, its
data and log under the harness's work directory, one process group tagged as the harness's (so it goes with the
harness's other processes, and a SIGKILLed harness's broker is reaped at the next start). Kept for a whole
campaign; each trial has topics of its own (``create_topic``/``delete_topic``).

A kill is SIGKILL of the group and a restart on the same data directory (the broker's own log recovery); a pause
is SIGSTOP/SIGCONT: the broker's faults act on the process users run, not on a model of it.

The harness talks to it with ``confluent_kafka`` (librdkafka, the client most Python services use): an
idempotent producer for the trial's events, an admin client for topics and record deletion, consumers that read
committed or uncommitted records.
"""

from __future__ import annotations

import base64
import shutil
import signal
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from chaos.errors import HarnessError
from chaos.machine.java import require_java
from chaos.machine.processes import Group, Owned, wait_until
from chaos.machine.spark import free_port, log_tail

from .jars import BROKER_VERSION, broker_classpath
from .login import Login, librdkafka

OUTPUT_RECORDS = "output-topic.parquet"  # a trial's output topic, exported into its sink directory at the end
HEAP = "-Xmx512m"  # a test broker's topics are small; Kafka's default 1 GiB would double the budget it adds
START_TIMEOUT_S = 90


class KafkaBroker:
    address = "127.0.0.1"
    login: Login = {}  # how clients log in (a user's cluster: chaos.clusters.kafka.login); the harness's: plaintext
    login_file: str | None = None  # where the drivers read it (chaos.clusters.kafka.login.write)
    topic_prefix = "streamchaos-"  # a trial's topics' names begin with it
    version: str | None = BROKER_VERSION  # the Kafka it runs: a job's client too old to speak it is told so

    def __init__(self, owned: Owned, work_dir: Path) -> None:
        self.owned = owned
        self.home = Path(work_dir) / "kafka"
        self.port = 0
        self.controller_port = 0
        # The job's own connections (Spark's source and sink) reach the broker on listeners of their own, each
        # advertised as the address of a fault proxy in front of it (``start(proxy=...)``): the source and sink
        # channels' faults act on them, never on the harness's own producer, admin and reads.
        self.source_bootstrap = ""
        self.sink_bootstrap = ""
        self._listeners: dict[str, tuple[int, str]] = {}  # SOURCE/SINK: (port, advertised address)
        self.group: Group | None = None
        self.recovery_s: float | None = None
        self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")  # KRaft's, formatted

    name = "kafka"  # as faults and reports name it (a cluster of brokers: kafka-0, kafka-1, ...)

    @property
    def bootstrap(self) -> str:
        """``kafka.bootstrap.servers`` for a client of this broker."""
        return f"{self.address}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.home / "broker.log"

    @property
    def data_dir(self) -> str:
        """``log.dirs``: where the broker keeps its partitions (kept across a kill and restart)."""
        return str(self.home / "data")

    @property
    def pid(self) -> int | None:
        """The broker's process, None while a kill left it down."""
        return self.group.pid if self.group is not None else None

    def alive(self) -> bool:
        return self.group is not None and self.group.alive()

    def start(self, *, say=None, proxy: Callable[[str, str], str] | None = None) -> KafkaBroker:
        """``proxy(name, upstream)``: a fault proxy named ``name`` in front of ``upstream``, its listen address."""
        classpath = broker_classpath(say=say)
        started = time.monotonic()
        shutil.rmtree(self.home, ignore_errors=True)
        (self.home / "data").mkdir(parents=True)
        self.port, self.controller_port = free_port(), free_port()
        self._open_listeners(proxy, {"SOURCE": free_port(), "SINK": free_port()})
        (self.home / "server.properties").write_text(self._properties())
        fmt = self.owned.spawn("kafka-format", [require_java(), *self.format_args(classpath)],
                               log_path=self.home / "format.log", cwd=self.home)
        try:
            rc = fmt.proc.wait(timeout=120)
        finally:
            self.owned.forget(fmt)
        if rc != 0:
            raise HarnessError(f"Kafka's storage format failed (exit {rc}): {log_tail(self.home / 'format.log')}")
        self._launch(classpath)
        self.start_s = round(time.monotonic() - started, 2)
        return self

    def _open_listeners(self, proxy: Callable[[str, str], str] | None, ports: dict[str, int]) -> None:
        """The job's listeners (SOURCE, SINK) on ``ports``, each advertised as its fault proxy's address."""
        self._listeners = {}
        for name, port in ports.items():
            upstream = f"{self.address}:{port}"
            [named] = self.proxies(name.lower())
            self._listeners[name] = (port, proxy(named, upstream) if proxy else upstream)
        self.source_bootstrap, self.sink_bootstrap = (self._listeners[n][1] for n in ("SOURCE", "SINK"))

    def format_args(self, classpath: str) -> list[str]:
        """Java's arguments that format the data directory for a new cluster of this one broker (KRaft)."""
        # One of 64 such ids starts with "-": given as "--cluster-id=ID", never read as an option.
        return ["-cp", classpath, "kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id}",
                "-c", str(self.home / "server.properties"), "--standalone"]

    def java_args(self, classpath: str) -> list[str]:
        """Java's arguments that run the broker."""
        return [HEAP, "-Xms128m", "-XX:+UseSerialGC", "-cp", classpath, "kafka.Kafka",
                str(self.home / "server.properties")]

    def settings(self) -> dict[str, str]:
        """``server.properties``: one broker that is its own controller, on this broker's listeners."""
        own = {name: (f"{self.address}:{port}", advertised) for name, (port, advertised) in self._listeners.items()}
        listeners = ",".join([f"PLAINTEXT://{self.address}:{self.port}", *(f"{n}://{a}" for n, (a, _) in own.items()),
                              f"CONTROLLER://{self.address}:{self.controller_port}"])
        advertised = ",".join([f"PLAINTEXT://{self.address}:{self.port}", *(f"{n}://{a}" for n, (_, a) in own.items())])
        protocols = ",".join(f"{n}:PLAINTEXT" for n in ("PLAINTEXT", "CONTROLLER", *own))
        return {
            "process.roles": "broker,controller", "node.id": "1",
            "controller.quorum.bootstrap.servers": f"{self.address}:{self.controller_port}",
            "listeners": listeners, "advertised.listeners": advertised,
            "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": protocols,
            "log.dirs": self.data_dir,
            "num.partitions": "1", "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4", "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            # Records keep the stream's event times (from 2026-01-01): past the default 7-day retention, a retention
            # check (every 5 minutes) deletes them before a job read them. A trial's topics say so themselves
            # (chaos/run/trial.py); this covers every other topic made on this broker.
            "log.retention.ms": "-1",
            # Records are flushed by the OS page cache: the harness kills processes, never the machine.
            "log.flush.interval.messages": "9223372036854775807",
        }

    def _properties(self) -> str:
        return "".join(f"{key}={value}\n" for key, value in self.settings().items())

    def _launch(self, classpath: str) -> None:
        self.group = self.owned.spawn(
            "kafka-broker", [require_java(), *self.java_args(classpath)], log_path=self.log_path, cwd=self.home)
        self._wait()

    def _wait(self) -> None:
        if not wait_until(self.ready, timeout=START_TIMEOUT_S, interval=0.2):
            alive = self.alive()
            self.kill()
            raise HarnessError(f"the Kafka broker did not {'take connections' if alive else 'start'} within "
                               f"{START_TIMEOUT_S} s; its log ends: {log_tail(self.log_path)}")

    def ready(self) -> bool:
        if not self.alive():
            return False
        try:
            with socket.create_connection((self.address, self.port), timeout=1):
                pass
        except OSError:
            return False
        return self.admin().list_topics(timeout=5).brokers != {}

    def admin(self, bootstrap: str | None = None):
        """An admin client of this broker (``bootstrap``: of some brokers of a cluster only)."""
        from confluent_kafka.admin import AdminClient

        return AdminClient(self.conf(bootstrap, log_level=3))

    def conf(self, bootstrap: str | None = None, **settings) -> dict:
        """A librdkafka client's settings for this broker: its servers, its login, ``settings``."""
        return client_conf(bootstrap or self.bootstrap, self.login, **settings)

    def kill(self) -> int | None:
        """SIGKILL the broker (``kill-broker``)."""
        pid, self.group = self.owned.end(self.group), None
        return pid

    def pause(self) -> None:
        if self.group is not None:
            self.group.signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.group is not None:
            self.group.signal(signal.SIGCONT)

    def restart(self) -> None:
        """Start again on the same data directory and ports: the broker recovers its own log."""
        started = time.monotonic()
        self._launch(broker_classpath())
        self.recovery_s = round(time.monotonic() - started, 2)

    def stop(self) -> None:
        self.resume()  # a paused broker cannot take its SIGTERM
        self.owned.end(self.group, 10)
        self.group = None
        shutil.rmtree(self.home, ignore_errors=True)

    def leader_of(self, topic: str | None) -> KafkaBroker:
        """The broker a broker fault aims at: the leader of ``topic``'s first partition (one broker: itself)."""
        return self

    def proxies(self, channel: str) -> tuple[str, ...]:
        """The fault proxies of the job's ``source`` or ``sink`` connections (one per broker)."""
        return (f"kafka-{channel}",)

    # Topics: one set per trial.
    brokers = 1
    replicas = 1  # each partition's copies: one per broker, up to three

    def create_topic(self, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
        from confluent_kafka.admin import NewTopic

        admin = self.admin()  # held until its futures resolve: a collected client cancels them
        topic = NewTopic(name, partitions, self.replicas, config=dict(config or {}))
        for future in admin.create_topics([topic], request_timeout=30).values():
            future.result(timeout=60)

    def delete_topic(self, name: str) -> None:
        admin = self.admin()
        for future in admin.delete_topics([name], request_timeout=30).values():
            future.result(timeout=60)

    def add_partitions(self, name: str, total: int) -> None:
        from confluent_kafka.admin import NewPartitions

        admin = self.admin()
        for future in admin.create_partitions([NewPartitions(name, total)]).values():
            future.result(timeout=60)

    def delete_records(self, topic: str, before: dict[int, int]) -> dict[int, int]:
        """Every record of ``topic`` below ``before[partition]`` deleted (the log start offset moved there, as
        retention does); the new log start offsets."""
        from confluent_kafka import TopicPartition

        admin = self.admin()  # kept until the answers are in: a dropped client never completes its futures
        futures = admin.delete_records([TopicPartition(topic, p, o) for p, o in sorted(before.items())],
                                       request_timeout=30)
        return {tp.partition: future.result(30).low_watermark for tp, future in futures.items()}

    def end_offsets(self, topic: str) -> dict[str, int]:
        """The next offset of each partition of ``topic`` (its high watermark), as Spark's offsets name them."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(self.conf(**{"group.id": f"{self.topic_prefix}ends-{uuid.uuid4()}", "log_level": 3}))
        try:
            parts = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
            return {str(p): consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in parts}
        finally:
            consumer.close()

    def produce(self, topic: str, records) -> int:
        """``records`` (partition, key bytes or None, value bytes, timestamp ms) into ``topic``, acknowledged by
        the broker (an idempotent producer: a retried send is written once) before this returns."""
        from confluent_kafka import Producer

        errors: list[str] = []

        def delivered(err, _msg) -> None:
            if err is not None:
                errors.append(str(err))

        producer = Producer(self.conf(**{"enable.idempotence": True,
                                         # A broker a fault killed refuses connections until it is back: the
                                         # feed's sends retry, and their errors reach `errors`, not the terminal.
                                         "linger.ms": 5, "acks": "all", "log_level": 2}))
        count = 0
        for partition, key, value, ms in records:
            while True:
                try:
                    producer.produce(topic, value=value, key=key, partition=partition, timestamp=ms,
                                     on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.1)
            count += 1
        left = producer.flush(60)
        if errors or left:
            raise HarnessError(f"the Kafka broker did not take the trial's records into {topic}: "
                               f"{errors[0] if errors else f'{left} unacknowledged'}")
        return count

    def read(self, topic: str, *, committed_only: bool = False) -> list[tuple[int, int, bytes | None, bytes]]:
        """Every record of ``topic`` as (partition, offset, key, value) (``read_topic``)."""
        return read_topic(self.bootstrap, topic, committed_only=committed_only, login=self.login,
                          group_prefix=self.topic_prefix)

    def export(self, topic: str, path: Path) -> int:
        """Every record of ``topic`` into a Parquet file (partition, offset, key, value, and ``committed``: in the
        read-committed view too), written whole or not at all; how many records."""
        import polars as pl

        from chaos.store.atomic import write_parquet

        committed = {(p, o) for p, o, _, _ in self.read(topic, committed_only=True)}
        rows = self.read(topic)
        frame = pl.DataFrame([(p, o, k, v, (p, o) in committed) for p, o, k, v in rows],
                             schema={"partition": pl.Int32, "offset": pl.Int64, "key": pl.Binary,
                                     "value": pl.Binary, "committed": pl.Boolean}, orient="row")
        write_parquet(frame.sort("partition", "offset"), path)
        return frame.height


Record = tuple[int, int, bytes | None, bytes]  # partition, offset, key, value


def client_conf(bootstrap: str, login: Login | None = None, **settings) -> dict:
    """A librdkafka client's settings: ``bootstrap``, the login's (chaos.clusters.kafka.login), ``settings``."""
    return {"bootstrap.servers": bootstrap, **librdkafka(login or {}), **settings}


def read_topic(bootstrap: str, topic: str, *, committed_only: bool = False, login: Login | None = None,
               group_prefix: str = KafkaBroker.topic_prefix) -> list[Record]:
    """Every record of ``topic`` as (partition, offset, key, value); ``committed_only`` leaves out records of
    aborted and open transactions (``isolation.level=read_committed``). Its consumer's group (which commits
    nothing) is named under ``group_prefix``."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(client_conf(bootstrap, login, **{
        "group.id": f"{group_prefix}read-{uuid.uuid4()}", "enable.auto.commit": False,
        "isolation.level": "read_committed" if committed_only else "read_uncommitted"}))
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        parts = sorted(meta.partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in parts}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        rows: list[Record] = []
        done = {p for p in parts if ends[p] == 0}
        deadline = time.monotonic() + 120
        while len(done) < len(parts) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1):
                if msg.error():
                    continue
                rows.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
                if msg.offset() + 1 >= ends[msg.partition()]:
                    done.add(msg.partition())
            for p in parts:  # a partition whose last offsets are transaction markers has no record at its end
                position = consumer.position([TopicPartition(topic, p)])[0].offset
                if position >= ends[p]:
                    done.add(p)
        if len(done) < len(parts):  # evidence cut short would read as loss: say so instead
            raise HarnessError(f"reading topic {topic} from the broker at {bootstrap} did not reach its end "
                               f"offsets {ends} in 120 s")
        return rows
    finally:
        consumer.close()
