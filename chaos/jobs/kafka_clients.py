"""A job's own Kafka clients reach the trial's broker: the confluent_kafka producers and consumers a job makes.

Spark's Kafka sink is at-least-once, so jobs that want exactly-once into Kafka write it themselves: a foreachBatch
collects the batch and produces it in one transaction of a ``confluent_kafka.Producer``, the batch id committed as a
consumer group's offset in the same transaction (``send_offsets_to_transaction``, Kafka's own exactly-once
processing), and a replayed batch whose offset is there is skipped. Run as written, those clients would reach the
servers the job names. As Spark's Kafka writes are (chaos.jobs.kafka_sink), they are rerouted: ``bootstrap.servers``
is the trial's (through the sink channel's proxy), the topic the job names in ``--sink kafka:TOPIC`` (every topic,
with none named) is the trial's output topic, and transactional ids and consumer groups get the trial's topic before
them, so trials sharing the broker never fence or read each other's. What the clients hand back names the job's
topic again (a message's ``topic()``, the partitions of ``committed``, ``position``, ``assignment``, rebalance,
delivery and commit callbacks given by keyword or in the settings, ``list_topics``), so a job comparing them with its
own name still matches; a message it hands back (``commit(msg)``) names the trial's topic for that call. The job's
code is not changed: the classes are replaced in ``confluent_kafka`` before its module is imported, so ``from
confluent_kafka import Producer`` binds the rerouted one; the harness's own clients are left alone. A job's
``AdminClient`` reaches the trial's broker too (chaos.jobs.kafka_admin), kafka-python's clients alike
(chaos.jobs.kafka_python_clients); chaos.jobs.kafka_rerouting reroutes the three.

Spark's answer has no output topic: each of its runs gets one of its own on the same broker (``begin_answer``),
made before the run starts with the output topic's partitions, read back after it (committed records, as the
trial's are judged) into the answer's folder beside the rows of Spark's own Kafka writes, then deleted
(``finish_answer``).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from chaos.clusters.kafka.login import Login, librdkafka, security_key
from chaos.clusters.kafka.login import of as login_of
from chaos.jobs import kafka_sink
from chaos.jobs.callers import from_the_job


def _route() -> dict | None:
    """Where this run's Kafka writes go (``{"bootstrap", "topic", "named"}``), None when a client is the harness's
    or the run has no broker to give."""
    out = kafka_sink.target()
    if not out or not out.get("bootstrap") or not from_the_job(("confluent_kafka", "chaos.jobs.kafka_clients",
                                                                "chaos.jobs.kafka_admin")):
        return None
    return out


def trial_topic(route: dict | None, name: Any, names: dict[str, str] | None = None) -> Any:
    """The topic a client of the job's means by ``name`` (``names`` learns the job's name of the trial's)."""
    if route is None or not isinstance(name, str) or (route.get("named") and name != route["named"]):
        return name
    if names is not None:
        names[route["topic"]] = name
    return route["topic"]


def _with_topic(tp: Any, topic: str) -> Any:
    """The TopicPartition on ``topic``, its metadata and leader epoch kept (read-only: given at construction). One
    that carries an error is kept as it is (its error cannot be given to a new one)."""
    from confluent_kafka import TopicPartition

    if getattr(tp, "error", None) is not None:
        return tp
    kept = {k: getattr(tp, k) for k in ("metadata", "leader_epoch") if getattr(tp, k, None) is not None}
    return TopicPartition(topic, tp.partition, tp.offset, **kept)


def _partitions(route: dict | None, value: Any, names: dict[str, str] | None = None) -> Any:
    """A TopicPartition, or a list of them, on the trial's topic."""
    from confluent_kafka import TopicPartition

    if route is None:
        return value
    if isinstance(value, TopicPartition):
        return _with_topic(value, trial_topic(route, value.topic, names))
    if isinstance(value, list | tuple):
        return type(value)(_partitions(route, v, names) for v in value)
    return value


def _back(names: dict[str, str], value: Any) -> Any:
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
        return type(value)(_back(names, v) for v in value)
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
        return call(*(_back(names, a) for a in args))

    return called


def trial_id(route: dict, name: str) -> str:
    """A transactional id or consumer group of the job's, on the trial's broker: the trial's topic before it, so
    trials sharing the broker never fence or read each other's."""
    return f"{route['topic']}.{name}"


def on_trial_broker(route: dict, conf: dict[str, Any], *, job_login: Callable[[str], bool], login: dict[str, Any],
                    bootstrap: str, ids: tuple[str, ...]) -> dict[str, Any]:
    """A client's settings (in its library's names) on the trial's broker: the settings ``job_login`` tells as the
    job's broker's give way to the trial's ``login``, ``bootstrap`` is the trial's, and the ``ids`` are the
    trial's (``trial_id``)."""
    conf = {k: v for k, v in conf.items() if not job_login(k)}
    conf.update(login)
    conf[bootstrap] = route["bootstrap"]
    for key in ids:
        if conf.get(key):
            conf[key] = trial_id(route, conf[key])
    return conf


def first_parameter(orig: Callable) -> str | None:
    """The name ``orig``'s signature gives its first argument after ``self`` (a job writes
    ``create_topics(new_topics=[...])`` as often as not); None where it has no signature to read. Read once, when a
    method is wrapped."""
    try:
        return list(inspect.signature(orig).parameters)[1]
    except (ValueError, TypeError, IndexError):
        return None


def first_argument(args: tuple, kwargs: dict, name: str | None) -> tuple[Any, Callable[[Any], tuple[tuple, dict]]]:
    """A call's first argument after ``self``, given by position or by its ``name`` (``first_parameter``), and how
    to call with another in its place (``args, kwargs``). None where the call has none (the method then says what
    is missing)."""
    if args:
        return args[0], lambda value: ((value, *args[1:]), kwargs)
    if name is None or name not in kwargs:
        return None, lambda value: (args, kwargs)
    return kwargs[name], lambda value: (args, {**kwargs, name: value})


def names_output(route: dict, name: Any) -> bool:
    """The job means the output topic (the trial's, made by the harness) by ``name``."""
    return isinstance(name, str) and trial_topic(route, name) == route["topic"]


def _conf(route: dict | None, args: tuple, kwargs: dict) -> dict:
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
        route = _route()
        self.__dict__["_streamchaos_route"] = route
        names = self.__dict__["_streamchaos_names"] = {}
        if route is not None and route.get("named"):
            names[route["topic"]] = route["named"]
        conf = _conf(route, args, kwargs)
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
        return _back(names, getattr(base, _call)(self, *args, **kwargs))

    def list_topics(self, *args, **kwargs):
        return produce(self, *args, _call="list_topics", **kwargs)

    def commit(self, *args, **kwargs):
        route, names = self.__dict__.get("_streamchaos_route"), _names(self)
        if "offsets" in kwargs:
            kwargs["offsets"] = _partitions(route, kwargs["offsets"], names)
        elif len(args) > 1:  # commit(message, offsets) positionally, message None
            args = (args[0], _partitions(route, args[1], names), *args[2:])
        with _handed(names, (*args, *kwargs.values())):
            return _back(names, base.commit(self, *args, **kwargs))

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
                else (lambda v: _partitions(route, v, names)))
        if args and arg is not None:
            args = (move(args[0]), *args[1:])
        elif arg is not None and arg in kwargs:
            kwargs[arg] = move(kwargs[arg])
        if route is not None:
            kwargs.update({k: _callback(names, kwargs[k]) for k in _CALLBACKS if k in kwargs})
        with _handed(names, (*args, *kwargs.values())):
            return _back(names, orig(self, *args, **kwargs))

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


# Spark's answer: a topic of its own per run.
ANSWER_RECORDS = "answer-topic.parquet"  # beside the rows of Spark's own Kafka writes (kafka_sink.CAPTURED)


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
            captured = Path(folder) / kafka_sink.CAPTURED
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
