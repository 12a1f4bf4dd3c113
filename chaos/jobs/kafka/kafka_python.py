"""A job's own kafka-python clients reach the trial's broker, as its confluent_kafka ones do (``confluent``).

Many PySpark jobs write Kafka from a ``foreachBatch`` with kafka-python's ``KafkaProducer`` (an alert per row, a
batch sent and flushed, a transaction per batch with ``send_offsets_to_transaction``), or read a topic back with its
``KafkaConsumer``. Run as written they would reach the servers the job names. Here they reach the trial's: the
settings get the trial's ``bootstrap_servers`` (through the sink channel's proxy) and its login in kafka-python's
names (an ``api_version`` pinned for the job's broker is dropped: the client probes the trial's), the topic the job
names in ``--sink kafka:TOPIC`` (every topic, with none named) is the trial's output topic, and a
``transactional_id`` or ``group_id`` gets the trial's topic before it, so trials sharing the broker never fence or
read each other's. What the clients hand back names the job's topic again (``TopicPartition``s and records of
``poll`` and iteration, ``assignment``, ``committed``, the offsets maps, ``subscription``, ``topics``, a rebalance
listener's partitions, a producer's ``RecordMetadata``); a ``pattern`` that matches the named topic subscribes the
trial's alone. The classes are replaced in
``kafka`` (and ``kafka.producer``, ``kafka.consumer``) before the job's module is imported, so ``from kafka import
KafkaProducer`` binds the rerouted one. A ``KafkaAdminClient`` reaches the trial's broker too
(``kafka_python_admin``). A kafka-python too old to speak the trial's broker is
one line before the client is made (``require_speaks``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

from chaos.clusters.kafka.login import librdkafka
from chaos.clusters.kafka.login import of as login_of
from chaos.errors import UserError
from chaos.jobs.callers import from_the_job
from chaos.jobs.kafka import sink
from chaos.jobs.kafka.naming import (
    on_trial_broker,
    trial_id,
    trial_topic,
)

OWN = ("kafka.", "chaos.jobs.kafka.kafka_python")
# librdkafka's login settings (chaos.clusters.kafka.login.librdkafka) in kafka-python's names.
LOGIN_NAMES = {"security.protocol": "security_protocol", "sasl.mechanisms": "sasl_mechanism",
               "sasl.username": "sasl_plain_username", "sasl.password": "sasl_plain_password",
               "ssl.ca.location": "ssl_cafile", "ssl.certificate.location": "ssl_certfile",
               "ssl.key.location": "ssl_keyfile", "ssl.key.password": "ssl_password"}
LOGIN_KEYS = ("security_protocol", "sasl_", "ssl_")
STRING_TOPICS = {"send": 0, "partitions_for": 0, "partitions_for_topic": 0}  # methods whose argument N is a topic


def _route() -> dict | None:
    out = sink.target()
    if not out or not out.get("bootstrap") or not from_the_job(OWN):
        return None
    return out


def login_configs(login: dict | None) -> dict[str, Any]:
    """The trial's login as kafka-python settings (PEM files only: it takes no inline certificate)."""
    conf: dict[str, Any] = {}
    for key, value in librdkafka(login or {}).items():
        if key not in LOGIN_NAMES:
            raise UserError(f"a kafka-python client of the job cannot log in with {key}: give the broker's TLS "
                            "certificates as PEM files (ssl.truststore.location, ssl.keystore.location with type PEM)")
        conf[LOGIN_NAMES[key]] = value
    return conf


def configs(route: dict | None, configs: dict[str, Any]) -> dict[str, Any]:
    """A client's settings, on the trial's broker with the trial's login, ids and groups."""
    if route is None:
        return configs
    # The job's broker's settings give way: its login, and the protocol version it pins for that broker (public
    # jobs pin api_version=(0, 10) and the like, which the trial's broker no longer speaks): probed instead.
    return on_trial_broker(route, configs, job_login=lambda k: k.startswith(LOGIN_KEYS) or k == "api_version",
                           login=login_configs(login_of(route)), bootstrap="bootstrap_servers",
                           ids=("transactional_id", "group_id", "group_instance_id"))


PLAIN = (list, set, frozenset, tuple, dict)  # containers walked: a Row (a tuple) or a dict of the job's is a value


def moved(route: dict, names: dict[str, str], value: Any) -> Any:
    """``TopicPartition``s (alone, in a plain list, set or tuple, or keys of a plain map) on the trial's topic; a
    ``ConsumerGroupMetadata`` the job made itself in the trial's group."""
    from kafka.structs import TopicPartition

    try:
        from kafka.structs import ConsumerGroupMetadata
    except ImportError:  # kafka-python before 2.1 has no transactions: no group metadata to move
        ConsumerGroupMetadata = ()  # noqa: N806
    if isinstance(value, TopicPartition):
        return value._replace(topic=trial_topic(route, value.topic, names))
    if isinstance(value, ConsumerGroupMetadata):  # one from a rerouted consumer is in the trial's group already
        ours = value.group_id.startswith(trial_id(route, ""))
        return value if ours else value._replace(group_id=trial_id(route, value.group_id))
    if type(value) is dict:
        return {moved(route, names, k): v for k, v in value.items()}
    if type(value) in PLAIN:
        return type(value)(moved(route, names, v) for v in value)
    return value


def back(names: dict[str, str], value: Any) -> Any:
    """What a client hands back, naming the job's topic where it names the trial's."""
    from kafka.consumer.fetcher import ConsumerRecord
    from kafka.structs import TopicPartition

    if not names:
        return value
    if isinstance(value, TopicPartition | ConsumerRecord):
        return value._replace(topic=names[value.topic]) if value.topic in names else value
    if type(value) is dict:
        return {back(names, k): back(names, v) for k, v in value.items()}
    if type(value) in PLAIN:
        return type(value)(back(names, v) for v in value)
    if isinstance(value, str):  # subscription(), topics()
        return names.get(value, value)
    return value


def _listener(names: dict[str, str], inner: Any) -> Any:
    """A rebalance listener of the job's, handed its own topic's partitions; of kafka-python's listener classes, as
    ``subscribe`` requires (an asynchronous one stays asynchronous: kafka-python awaits its coroutines)."""
    from kafka import ConsumerRebalanceListener

    try:
        from kafka import AsyncConsumerRebalanceListener
    except ImportError:  # kafka-python before 3.0: listeners are plain
        AsyncConsumerRebalanceListener = ()  # noqa: N806

    lost = getattr(inner, "on_partitions_lost", None) or inner.on_partitions_revoked
    if isinstance(inner, AsyncConsumerRebalanceListener):
        class Async(AsyncConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                return await inner.on_partitions_revoked(back(names, revoked))

            async def on_partitions_assigned(self, assigned):
                return await inner.on_partitions_assigned(back(names, assigned))

            async def on_partitions_lost(self, gone):
                return await lost(back(names, gone))

        return Async()

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            return inner.on_partitions_revoked(back(names, revoked))

        def on_partitions_assigned(self, assigned):
            return inner.on_partitions_assigned(back(names, assigned))

        def on_partitions_lost(self, gone):
            return lost(back(names, gone))

    return Listener()


def _subscribed(route: dict, names: dict[str, str], args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``subscribe``'s topics on the trial's; a pattern that matches the named topic (any, with none named) becomes
    the trial's topic alone; its listener handed the job's names."""
    topics, pattern, listener = (*args, None, None, None)[:3]
    topics = kwargs.pop("topics", topics) or ()
    pattern = kwargs.pop("pattern", pattern)
    listener = kwargs.pop("listener", listener)
    if pattern is not None and (not route.get("named") or re.match(pattern, route["named"])):
        names[route["topic"]] = route.get("named") or route["topic"]
        topics, pattern = [route["topic"]], None
    elif topics:
        topics = [trial_topic(route, t, names) for t in ([topics] if isinstance(topics, str) else topics)]
    return (), {"topics": topics, "pattern": pattern,
                "listener": _listener(names, listener) if listener is not None else None, **kwargs}


def _method(name: str, orig: Callable) -> Callable:
    """``name`` with its topics and partitions moved to the trial's and what it returns naming the job's. A call
    from kafka-python itself (its record iterator polls, its constructor subscribes) reaches ``orig`` as it is."""
    def method(self, *args, **kwargs):
        route, names = self.__dict__["_streamchaos_route"], self.__dict__["_streamchaos_names"]
        if sys._getframe(1).f_globals.get("__name__", "").startswith("kafka."):
            return orig(self, *args, **kwargs)
        if route is not None:
            at = STRING_TOPICS.get(name)
            if at is not None:  # send(topic, value, key...): only the topic moves, the values are the job's
                if len(args) > at:
                    args = (*args[:at], trial_topic(route, args[at], names), *args[at + 1:])
                elif "topic" in kwargs:
                    kwargs["topic"] = trial_topic(route, kwargs["topic"], names)
            elif name == "subscribe":
                args, kwargs = _subscribed(route, names, args, kwargs)
            else:
                if name == "send_offsets_to_transaction":  # a group named by its id: the trial's group
                    if len(args) > 1 and isinstance(args[1], str):
                        args = (args[0], trial_id(route, args[1]), *args[2:])
                    elif isinstance(kwargs.get("group_metadata"), str):
                        kwargs["group_metadata"] = trial_id(route, kwargs["group_metadata"])
                if name == "commit_async" and callable(kwargs.get("callback")):
                    done = kwargs["callback"]
                    kwargs["callback"] = lambda offsets, response: done(back(names, offsets), response)
                elif name == "commit_async" and len(args) > 1 and callable(args[1]):
                    done = args[1]
                    args = (args[0], lambda offsets, response: done(back(names, offsets), response), *args[2:])
                args = tuple(moved(route, names, a) for a in args)
                kwargs = {k: moved(route, names, v) for k, v in kwargs.items()}
        out = orig(self, *args, **kwargs)
        return _sent(self, names, out) if name == "send" and route is not None else back(names, out)

    method.__name__ = name
    return method


def _metadata_back(names: dict[str, str], metadata: Any) -> Any:
    """A producer's ``RecordMetadata`` naming the job's topic (its ``topic`` and ``topic_partition``)."""
    from kafka.producer.future import RecordMetadata

    if not isinstance(metadata, RecordMetadata) or metadata.topic not in names:
        return metadata
    return metadata._replace(topic=names[metadata.topic], topic_partition=back(names, metadata.topic_partition))


def _sent(client: Any, names: dict[str, str], sent: Any) -> Any:
    """``send``'s future, resolving to a ``RecordMetadata`` that names the job's topic: kafka-python's own future,
    its class changed to one that names it back as it resolves (``get``, callbacks, ``value`` alike; the record
    is not yet acknowledged when ``send`` returns, and one that was is named back here)."""
    from kafka.producer.future import FutureRecordMetadata

    if not names or type(sent) is not FutureRecordMetadata:
        return sent
    named = client.__dict__.get("_streamchaos_sent")
    if named is None:
        class Sent(FutureRecordMetadata):
            __slots__ = ()

            def success(self, value):
                return super().success(_metadata_back(names, value))

        named = client.__dict__["_streamchaos_sent"] = Sent
    sent.__class__ = named
    if sent.succeeded():
        sent.value = _metadata_back(names, sent.value)
    return sent


# Kafka 4 no longer serves the protocol versions older clients ask (KIP-896): kafka-python before 2.1 asks
# Metadata v1 and FindCoordinator v0 whatever the broker offers; 2.0.2's KafkaProducer against Kafka 4.1.1 raises
# NoBrokersAvailable as it is made (its version probe gets no answer it knows), which names no cause.
SPEAKS_KAFKA_4 = (2, 1)


def version_of(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def require_speaks(route: dict) -> None:
    """One line, before the job's client is made, where the job's kafka-python cannot speak the trial's broker."""
    import kafka

    broker = route.get("version")
    if broker and version_of(broker)[:1] >= (4,) and version_of(kafka.__version__) < SPEAKS_KAFKA_4:
        raise UserError(f"the job's kafka-python {kafka.__version__} cannot speak to the trial's Kafka {broker} (it "
                        "asks protocol versions Kafka 4 removed): install kafka-python>=2.1 beside the job "
                        "(pip install -U kafka-python)")


def rerouted(base: type, methods: tuple[str, ...]) -> type:
    def __new__(cls, *args, **kwargs):  # noqa: N807 - refused before there is a client to close when collected
        route = _route()
        if route is not None:
            require_speaks(route)
        client = base.__new__(cls)
        client.__dict__["_streamchaos_route"] = route  # where the job's call reaches, for __init__ and each call
        return client

    def __init__(self, *args, **kwargs):  # noqa: N807
        route = self.__dict__["_streamchaos_route"]
        names: dict[str, str] = {}
        if route is not None and route.get("named"):
            names[route["topic"]] = route["named"]
        self.__dict__["_streamchaos_names"] = names
        if route is not None and args:  # KafkaConsumer(*topics): the topics it subscribes to
            args = tuple(trial_topic(route, t, names) for t in args)
        base.__init__(self, *args, **configs(route, kwargs))

    def __next__(self):  # noqa: N807 - iterating a consumer yields its records
        return back(self.__dict__["_streamchaos_names"], base.__next__(self))

    # Named as kafka-python's own class, so a job's function that refers to it pickles it by reference and the
    # executors' worker finds its rerouted one (chaos.jobs.databases.on_executors).
    body: dict[str, Any] = {"__new__": __new__, "__init__": __init__, "__doc__": base.__doc__, "__module__": "kafka",
                            "__qualname__": base.__name__, "_streamchaos_rerouted": True}
    if hasattr(base, "__next__"):
        body["__next__"] = __next__
    body.update({name: _method(name, getattr(base, name)) for name in methods if hasattr(base, name)})
    return type(base.__name__, (base,), body)


PRODUCER_METHODS = ("send", "partitions_for", "send_offsets_to_transaction")
CONSUMER_METHODS = ("assign", "assignment", "commit", "commit_async", "committed", "position", "highwater", "pause",
                    "paused", "resume", "seek", "seek_to_beginning", "seek_to_end", "subscribe", "subscription",
                    "partitions_for_topic", "topics", "poll", "offsets_for_times", "beginning_offsets",
                    "end_offsets")


def reroute() -> None:
    """kafka-python's ``KafkaProducer`` and ``KafkaConsumer``, where the job has it, reach this run's broker (its
    ``KafkaAdminClient``: ``kafka_python_admin``)."""
    try:
        import kafka
        import kafka.consumer.group
        import kafka.producer.kafka
    except ImportError:
        return
    if getattr(kafka.KafkaProducer, "_streamchaos_rerouted", False):
        return
    producer = rerouted(kafka.KafkaProducer, PRODUCER_METHODS)
    consumer = rerouted(kafka.KafkaConsumer, CONSUMER_METHODS)
    kafka.KafkaProducer = kafka.producer.KafkaProducer = kafka.producer.kafka.KafkaProducer = producer
    kafka.KafkaConsumer = kafka.consumer.KafkaConsumer = kafka.consumer.group.KafkaConsumer = consumer
