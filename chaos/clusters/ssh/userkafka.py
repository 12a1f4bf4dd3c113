"""The user's own Kafka cluster as the trial's broker: ``kafka = "KAFKA_BOOTSTRAP"`` in a hosts file.

A team testing on its staging cluster reads its staging Kafka, which may be a managed service no host of the file
runs. The harness then makes the trial's topics there, as it makes them on a broker of its own, and touches nothing
else of the user's, as with ``DATABASE_URL`` (chaos.clusters.ssh.userdb):

* every topic it makes, and every consumer group and transactional id a job's clients use there, is named under a
  prefix of its own that carries its owner (``streamchaos.<machine>.<pid>-<start>.``): deleted at the trial's end
  and again at the stop, and by the next start of any harness of this machine once their owner is gone (another
  machine's are left alone);
* its login (SASL, TLS: chaos.clusters.kafka.login) reaches the harness's clients, Spark's Kafka source and sink and
  a job's own clients, and no run directory or log;
* the cluster is the user's: faults that kill, pause or cut off a broker are refused in one line, and so are the
  source and sink channels' faults of a job reading or writing it (its clients reach the brokers the cluster
  advertises, past any proxy of the harness). Records deleted (``delete-records``) and partitions added
  (``add-partitions``) act on the trial's own topics only, and stand.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

from chaos.clusters.kafka.broker import KafkaBroker
from chaos.clusters.kafka.login import BOOTSTRAP_VAR, Login, load, read_bootstrap, remove, write
from chaos.clusters.ssh.remote import machine_id
from chaos.errors import HarnessError, UserError
from chaos.machine.processes import my_tag, owner_alive

PREFIX = "streamchaos."


def _machine() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", machine_id())


def owner_prefix(tag: str | None = None) -> str:
    """``streamchaos.<machine>.<pid>-<seconds>-<millis>.``: the names of this harness's topics and groups begin
    with it (a topic name holds letters, digits, '.', '_' and '-' only)."""
    pid, _, created = (tag or my_tag()).partition(":")
    return f"{PREFIX}{_machine()}.{pid}-{created.replace('.', '-')}."


def gone_owner(name: str) -> bool:
    """A topic or group named under the prefix of a harness of this machine that no longer runs."""
    parts = name.split(".")
    if len(parts) < 4 or parts[0] + "." != PREFIX or parts[1] != _machine():
        return False
    pid, _, created = parts[2].partition("-")
    if not pid.isdigit() or not re.fullmatch(r"\d+-\d{3}", created):
        return False  # not a harness's name after all
    return not owner_alive(f"{pid}:{created.replace('-', '.')}")


def _login_errors() -> frozenset[int]:
    from confluent_kafka import KafkaError

    return frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._SSL})


def _reason(error: str) -> str:
    """librdkafka's error without the connection's name before it and its timing after it."""
    error = re.sub(r"^(\S+://)?\S+/(bootstrap|\d+): ", "", error)
    return re.sub(r" \(after \d+ms in state \w+\)$", "", error)


def _done(delete, names: list[str]) -> int:
    """``delete(names)`` (an admin client's deletion of topics or groups), waited for; how many went."""
    from confluent_kafka import KafkaException

    count = 0
    for future in (delete(names, request_timeout=30).values() if names else ()):
        try:
            future.result(timeout=60)
            count += 1
        except KafkaException:
            pass
    return count


class UserKafka(KafkaBroker):
    """The surface of ``chaos.clusters.kafka.broker.KafkaBroker`` over topics of the harness's own in the user's
    cluster."""

    replicas = -1  # the cluster's own default.replication.factor
    version = None  # the user's Kafka, whichever it is

    def __init__(self, servers: str, login: Login, work_dir: Path) -> None:
        super().__init__(None, work_dir)
        self.servers = servers
        self.login = dict(login)
        self.topic_prefix = owner_prefix()
        self.brokers_seen = 0
        self.reached = False  # whether the cluster answered once: a stop reaps only then

    @property
    def bootstrap(self) -> str:
        return self.servers

    @property
    def pid(self) -> int | None:
        return None

    def alive(self) -> bool:
        return True  # not the harness's process: ``ready`` says whether it answers

    def start(self, *, say=None, proxy=None) -> UserKafka:
        """Reach the cluster with the login (one line if not), reap what dead harnesses of this machine left in it."""
        started = time.monotonic()
        self.home.mkdir(parents=True, exist_ok=True)
        self.login_file = write(self.login) if self.login else None
        self.source_bootstrap = self.sink_bootstrap = self.servers
        try:
            self.brokers_seen = len(self._metadata(20).brokers)
        except UserError:  # not reached: its login goes now, whether or not a stop follows
            remove(self.login_file)
            self.login_file = None
            raise
        self.reached = True
        self.reap()
        (self.home / "cluster.txt").write_text(f"{self.servers}: {self.brokers_seen} broker(s), topics under "
                                               f"{self.topic_prefix}\n")
        self.start_s = round(time.monotonic() - started, 2)
        return self

    def _metadata(self, timeout: float):
        """The cluster's metadata, or one line naming why it did not answer (the client's last error)."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        errors: list = []
        admin = AdminClient(self.conf(log_level=0, error_cb=errors.append))
        deadline = time.monotonic() + timeout
        while True:  # asked in short steps: a refused login is said at once, not after the whole timeout
            try:
                return admin.list_topics(timeout=min(2.0, timeout))
            except KafkaException as exc:
                admin.poll(0.5)  # the client's errors reach error_cb here
                refused = [e for e in errors if e.code() in _login_errors()]
                if refused or time.monotonic() >= deadline:
                    last = (refused or errors)[-1].str() if (refused or errors) else str(exc.args[0].str())
                    raise UserError(f"{BOOTSTRAP_VAR}: cannot reach {self.servers} ({_reason(last)}): check the "
                                    "servers, that they admit this machine and the hosts, and the login "
                                    "(kafka_properties, KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD)") from None

    def probe(self) -> str:
        """``doctor``: the cluster answers with the login; what it is."""
        return f"{self.servers}: {len(self._metadata(15).brokers)} broker(s) answer"

    def ready(self) -> bool:
        try:
            self._metadata(5)
        except UserError:
            return False
        return True

    def create_topic(self, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
        """A topic of the trial's; a cluster older than Kafka 3.6 does not know the timestamp bound: left out."""
        from confluent_kafka import KafkaException

        try:
            super().create_topic(name, partitions, config)
        except KafkaException as exc:
            bound = "message.timestamp.after.max.ms"
            if bound not in (config or {}) or bound not in str(exc):
                raise
            super().create_topic(name, partitions, {k: v for k, v in (config or {}).items() if k != bound})

    def kill(self) -> int | None:
        raise HarnessError(f"the Kafka cluster of {BOOTSTRAP_VAR} is the user's: the harness does not kill it")

    def pause(self) -> None:
        raise HarnessError(f"the Kafka cluster of {BOOTSTRAP_VAR} is the user's: the harness does not pause it")

    def resume(self) -> None:
        pass

    def restart(self) -> None:
        """Nothing of the harness's to restart: the user's cluster is back when it answers."""
        if not self.ready():
            raise HarnessError(f"the Kafka cluster of {BOOTSTRAP_VAR} ({self.servers}) does not answer")

    def proxies(self, channel: str) -> tuple[str, ...]:
        return ()  # its clients reach the brokers the cluster advertises: no proxy of the harness is in between

    def reap(self, prefix: str | None = None) -> int:
        """Delete the topics and consumer groups under ``prefix`` (this harness's at the stop), else those of
        harnesses of this machine that are gone; how many."""
        from confluent_kafka import KafkaException

        def doomed(name: str) -> bool:
            return name.startswith(prefix) if prefix else gone_owner(name)

        admin = self.admin()
        # A topic deleted meanwhile, or not ours to delete, is left to the next start; a group still in use empties
        # and expires with the cluster's retention.
        count = _done(admin.delete_topics, [t for t in admin.list_topics(timeout=30).topics if doomed(t)])
        try:
            listed = admin.list_consumer_groups(request_timeout=30).result(timeout=60)
            return count + _done(admin.delete_consumer_groups, [g.group_id for g in listed.valid if doomed(g.group_id)])
        except KafkaException:
            return count  # the login may not describe groups: they expire with offsets.retention.minutes

    def stop(self) -> None:
        if self.reached:
            try:
                self.reap(self.topic_prefix)
            except Exception:  # noqa: BLE001 - the cluster went away: the next start's reaping deletes them
                pass
        remove(self.login_file)
        self.login_file = None
        shutil.rmtree(self.home, ignore_errors=True)


def of_hosts_file(file, work_dir: Path, brokers: int = 1) -> UserKafka:
    """The user's cluster a hosts' file names (``kafka = "KAFKA_BOOTSTRAP"``), with its login; not started."""
    if brokers > 1:
        raise UserError(f"--brokers {brokers} starts brokers of the harness's own: with kafka = \"{file.kafka}\" "
                        "the trial's topics live in your cluster; drop --brokers")
    return UserKafka(read_bootstrap(), load(file.kafka_properties), work_dir)
