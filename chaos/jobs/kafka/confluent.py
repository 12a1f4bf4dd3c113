"""A job's own Kafka clients reach the trial's broker: the confluent_kafka producers and consumers a job makes.

Spark's Kafka sink is at-least-once, so jobs that want exactly-once into Kafka write it themselves: a foreachBatch
collects the batch and produces it in one transaction of a ``confluent_kafka.Producer``, the batch id committed as a
consumer group's offset in the same transaction (``send_offsets_to_transaction``, Kafka's own exactly-once
processing), and a replayed batch whose offset is there is skipped. Run as written, those clients would reach the
servers the job names. As Spark's Kafka writes are (chaos.jobs.kafka.sink), they are rerouted: ``bootstrap.servers``
is the trial's (through the sink channel's proxy), the topic the job names in ``--sink kafka:TOPIC`` (every topic,
with none named) is the trial's output topic, and transactional ids and consumer groups get the trial's topic before
them, so trials sharing the broker never fence or read each other's. What the clients hand back names the job's
topic again (a message's ``topic()``, the partitions of ``committed``, ``position``, ``assignment``, rebalance,
delivery and commit callbacks given by keyword or in the settings, ``list_topics``), so a job comparing them with its
own name still matches; a message it hands back (``commit(msg)``) names the trial's topic for that call. The job's
code is not changed: the classes are replaced in ``confluent_kafka`` before its module is imported, so ``from
confluent_kafka import Producer`` binds the rerouted one; the harness's own clients are left alone. A job's
``AdminClient`` reaches the trial's broker too (chaos.jobs.kafka.confluent_admin), kafka-python's clients alike
(chaos.jobs.kafka.kafka_python); chaos.jobs.kafka.rerouting reroutes the three.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from chaos.clusters.kafka.login import librdkafka, security_key
from chaos.clusters.kafka.login import of as login_of
from chaos.jobs.callers import from_the_job
from chaos.jobs.kafka import sink
from chaos.jobs.kafka.naming import on_trial_broker, trial_topic

OWN = ("confluent_kafka", "chaos.jobs.kafka.confluent")  # the library and the wrappers (this and its admin)


def job_route() -> dict | None:
    """Where this run's Kafka writes go (``{"bootstrap", "topic", "named"}``), None when a client is the harness's
    or the run has no broker to give."""
    out = sink.target()
    if not out or not out.get("bootstrap") or not from_the_job(OWN):
        return None
    return out


def _with_topic(tp: Any, topic: str) -> Any:
    """The TopicPartition on ``topic``, its metadata and leader epoch kept (read-only: given at construction). One
    that carries an error is kept as it is (its error cannot be given to a new one)."""
    from confluent_kafka import TopicPartition

    if getattr(tp, "error", None) is not None:
        return tp
    kept = {k: getattr(tp, k) for k in ("metadata", "leader_epoch") if getattr(tp, k, None) is not None}
    return TopicPartition(topic, tp.partition, tp.offset, **kept)


def partitions(route: dict | None, value: Any, names: dict[str, str] | None = None) -> Any:
    """A TopicPartition, or a list of them, on the trial's topic."""
    from confluent_kafka import TopicPartition

    if route is None:
        return value
    if isinstance(value, TopicPartition):
        return _with_topic(value, trial_topic(route, value.topic, names))
    if isinstance(value, list | tuple):
        return type(value)(partitions(route, v, names) for v in value)
    return value


def back(names: dict[str, str], value: Any) -> Any:
    """What a client hands back, with the job's topic name where it names the trial's: a message (its topic set),
    a TopicPartition, a list of either, or a cluster's metadata (the job's name beside the trial's)."""
    from confluent_kafka import Message, TopicPartition

    if not names:
        return value
    if isinstance(value, Message):
        if value.topic() in names:
            value.set_topic(names[value.topic()])
    elif isinstance(value, TopicPartition):
        return _with_topic(value, names[value.topic]) if value.topic in names else value
    elif isinstance(value, list | tuple):
        return type(value)(back(names, v) for v in value)
    elif isinstance(getattr(value, "topics", None), dict):  # ClusterMetadata
        for trial, job in names.items():
            if trial in value.topics:
                value.topics[job] = value.topics[trial]
    return value


@contextmanager
def _handed(names: dict[str, str], values: Iterable[Any]) -> Iterator[None]:
    """Messages the job hands a client (``commit(msg)``, ``store_offsets(msg)``) named by the trial's topic for
    the call: librdkafka takes the topic from the message itself. They name the job's topic again after it."""
    from confluent_kafka import Message

    trial_of = {job: trial for trial, job in names.items()}
    moved = [v for v in values if isinstance(v, Message) and v.topic() in trial_of]
    for message in moved:
        message.set_topic(trial_of[message.topic()])
    try:
        yield
    finally:
        for message in moved:
            message.set_topic(names[message.topic()])


def _callback(names: dict[str, str], call: Any) -> Any:
    """A delivery or rebalance callback of the job's, handed the job's topic name."""
    if not callable(call):
        return call

    def called(*args):
        return call(*(back(names, a) for a in args))

    return called


def settings(route: dict | None, args: tuple, kwargs: dict) -> dict:
    conf = {**(args[0] if args else {}), **kwargs}
    if route is None:
        return conf
    return on_trial_broker(route, conf, job_login=security_key, login=librdkafka(login_of(route)),
                           bootstrap="bootstrap.servers", ids=("transactional.id", "group.id", "group.instance.id"))


_PRODUCER_MOVES = {"send_offsets_to_transaction": "positions"}
_CONSUMER_MOVES = {"subscribe": "topics", "assign": "partitions", "incremental_assign": "partitions",
                   "incremental_unassign": "partitions", "committed": "partitions", "position": "partitions",
                   "offsets_for_times": "partitions", "pause": "partitions", "resume": "partitions",
                   "seek": "partition", "get_watermark_offsets": "partition", "store_offsets": "offsets"}


_CALLBACKS = ("on_delivery", "callback", "on_assign", "on_revoke", "on_lost")
_RETURNS = ("poll", "consume", "committed", "position", "offsets_for_times", "assignment")


def _names(client: Any) -> dict[str, str]:
    """The job's names of the trial's topics this client has used (the named one known from the start)."""
    return client.__dict__["_streamchaos_names"]


def _rerouted(base: type, moves: dict[str, str]) -> type:
    def __init__(self, *args, **kwargs):  # noqa: N807
        route = job_route()
        self.__dict__["_streamchaos_route"] = route
        names = self.__dict__["_streamchaos_names"] = {}
        if route is not None and route.get("named"):
            names[route["topic"]] = route["named"]
        conf = settings(route, args, kwargs)
        if route is not None:
            conf.update({k: _callback(names, conf[k]) for k in ("on_delivery", "on_commit") if k in conf})
        base.__init__(self, conf)

    def produce(self, *args, _call: str = "produce", **kwargs):
        route, names = self.__dict__.get("_streamchaos_route"), _names(self)
        if args:
            args = (trial_topic(route, args[0], names), *args[1:])
        elif "topic" in kwargs:
            kwargs["topic"] = trial_topic(route, kwargs["topic"], names)
        if route is not None:
            kwargs.update({k: _callback(names, kwargs[k]) for k in _CALLBACKS if k in kwargs})
        return back(names, getattr(base, _call)(self, *args, **kwargs))

    def list_topics(self, *args, **kwargs):
        return produce(self, *args, _call="list_topics", **kwargs)

    def commit(self, *args, **kwargs):
        route, names = self.__dict__.get("_streamchaos_route"), _names(self)
        if "offsets" in kwargs:
            kwargs["offsets"] = partitions(route, kwargs["offsets"], names)
        elif len(args) > 1:  # commit(message, offsets) positionally, message None
            args = (args[0], partitions(route, args[1], names), *args[2:])
        with _handed(names, (*args, *kwargs.values())):
            return back(names, base.commit(self, *args, **kwargs))

    # Named as confluent_kafka's own class, so a job's function that refers to it pickles it by reference and the
    # executors' worker finds its rerouted one (chaos.jobs.databases.on_executors).
    body: dict[str, Any] = {"__init__": __init__, "__doc__": base.__doc__, "__module__": "confluent_kafka",
                            "__qualname__": base.__name__, "_streamchaos_rerouted": True, "list_topics": list_topics}
    if hasattr(base, "produce"):
        body["produce"] = produce
    if hasattr(base, "produce_batch"):
        body["produce_batch"] = _named("produce_batch", produce)
    if hasattr(base, "commit"):
        body["commit"] = commit
    for name, arg in {**{n: None for n in _RETURNS}, **moves}.items():
        if hasattr(base, name):
            body[name] = _bound(base, name, arg)
    return type(base.__name__, (base,), body)


def _named(name: str, first_is_topic: Any) -> Any:
    """A method whose first argument is a topic, as ``produce`` moves it, calling the base class's ``name``."""
    def method(self, *args, **kwargs):
        return first_is_topic(self, *args, _call=name, **kwargs)

    method.__name__ = name
    return method


def _bound(base: type, name: str, arg: str | None) -> Any:
    """``name`` of ``base`` with its argument ``arg`` moved to the trial's topic (None: none moved), callbacks and
    what it returns naming the job's."""
    orig = getattr(base, name)

    def method(self, *args, **kwargs):
        route, names = self.__dict__.get("_streamchaos_route"), _names(self)
        move = ((lambda v: [trial_topic(route, t, names) for t in v]) if arg == "topics"
                else (lambda v: partitions(route, v, names)))
        if args and arg is not None:
            args = (move(args[0]), *args[1:])
        elif arg is not None and arg in kwargs:
            kwargs[arg] = move(kwargs[arg])
        if route is not None:
            kwargs.update({k: _callback(names, kwargs[k]) for k in _CALLBACKS if k in kwargs})
        with _handed(names, (*args, *kwargs.values())):
            return back(names, orig(self, *args, **kwargs))

    method.__name__ = name
    return method


def reroute() -> None:
    """``confluent_kafka.Producer`` and ``Consumer`` (and their serializing kin, whichever the job has) reach this
    run's broker and topic."""
    try:
        import confluent_kafka
    except ImportError:
        return
    if getattr(confluent_kafka.Producer, "_streamchaos_rerouted", False):
        return
    for name, moves in (("Producer", _PRODUCER_MOVES), ("Consumer", _CONSUMER_MOVES),
                        ("SerializingProducer", _PRODUCER_MOVES), ("DeserializingConsumer", _CONSUMER_MOVES)):
        if hasattr(confluent_kafka, name):
            setattr(confluent_kafka, name, _rerouted(getattr(confluent_kafka, name), moves))
