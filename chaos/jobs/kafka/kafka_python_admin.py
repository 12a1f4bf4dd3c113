"""A job's kafka-python ``KafkaAdminClient`` asks the trial's broker about the trial's topic and groups, and is
answered in the job's names, as a confluent_kafka ``AdminClient`` is (``confluent_admin``).

Jobs written with kafka-python make their output topic at start (``create_topics``), check it (``list_topics``,
``describe_topics``, ``describe_configs``), grow it (``create_partitions``) or read and reset their consumer group's
lag (2.x: ``list_consumer_group_offsets``, ``describe_consumer_groups``; 3.x: ``list_group_offsets``,
``alter_group_offsets``, ``describe_groups``). Here the client is the rerouted one (``kafka_python``): a topic the job
names in ``--sink kafka:TOPIC`` (every topic, with none named) is the trial's output topic, a group is the trial's
(``trial_id``, as its consumers' groups are), and what comes back (dicts and lists naming topics and groups,
``TopicPartition`` keys) names the job's again; ``list_groups``/``list_consumer_groups`` list the trial's groups
alone (other trials and Spark's answer runs share the broker). The output topic is the harness's, made fresh for
the trial with its partitions, so the job's ``create_topics``/``delete_topics`` of it are left out. Whichever of the
two versions' names the installed kafka-python has are rerouted; kafka-python's calls on itself pass as they are.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from typing import Any

from chaos.jobs.kafka.kafka_python import PLAIN, back, moved, rerouted, version_of
from chaos.jobs.kafka.naming import first_argument, first_parameter, job_group, names_output, trial_id, trial_topic

Names = dict[str, str]


def _group(route: dict, names: Names, group: Any) -> Any:
    """The trial's group (or transactional id) for the job's ``group``, its name learned for the answers; one named
    as the trial's already (a rerouted consumer's ``config["group_id"]``) is left as it is."""
    if not isinstance(group, str) or group.startswith(trial_id(route, "")):
        return group
    names[trial_id(route, group)] = group
    return trial_id(route, group)


def _topics(route: dict, names: Names, topics: Any) -> Any:
    """Topic names (one, or a list of them; ``create_partitions``' map keyed by them) on the trial's topic."""
    if isinstance(topics, dict):
        return {trial_topic(route, k, names): v for k, v in topics.items()}
    if isinstance(topics, list | tuple | set):
        return type(topics)(trial_topic(route, t, names) for t in topics)
    return trial_topic(route, topics, names)


def _configs(route: dict, names: Names, resources: Any) -> Any:
    """``ConfigResource``s, a topic's on the trial's topic (a copy: the job's own is left as it wrote it)."""
    moved = []
    for resource in resources if isinstance(resources, list | tuple) else [resources]:
        kind = getattr(resource, "resource_type", None)
        if str(getattr(kind, "name", kind)).upper() == "TOPIC":
            resource = copy.copy(resource)
            resource.name = trial_topic(route, resource.name, names)
        moved.append(resource)
    return moved if isinstance(resources, list | tuple) else moved[0]


def _groups(route: dict, names: Names, groups: Any) -> Any:
    """Group ids (one, a list, or ``list_group_offsets``' map of a group to its partitions) in the trial's; so are
    transactional ids (``describe_transactions``)."""
    if isinstance(groups, dict):
        return {_group(route, names, k): moved(route, names, v) for k, v in groups.items()}
    if isinstance(groups, list | tuple | set):
        return type(groups)(_group(route, names, g) for g in groups)
    return _group(route, names, groups)


def _as_given(route: dict, names: Names, value: Any) -> Any:
    """A first argument that names no topic or group (``elect_leaders``' election type): the others move."""
    return value


def _others(route: dict, names: Names, value: Any) -> Any:
    """An argument after the first: its TopicPartitions on the trial's topic (``alter_group_offsets``' offsets,
    ``list_consumer_group_offsets``' partitions), a static member to remove by its trial's ``group_instance_id``
    (as the job's consumer got it), ``describe_topic_partitions``' cursor on the trial's topic."""
    if isinstance(value, dict) and isinstance(value.get("topic_name"), str):  # the cursor an answer gave
        return {**value, "topic_name": trial_topic(route, value["topic_name"], names)}
    if isinstance(value, list) and any(type(m).__name__ == "MemberToRemove" for m in value):
        members = [copy.copy(m) for m in value]
        for member in members:
            if type(member).__name__ == "MemberToRemove" and member.group_instance_id:
                member.group_instance_id = _group(route, names, member.group_instance_id)
        return members
    return moved(route, names, value)


# Each request's first argument, and how it moves to the trial's names; the others move by ``_others``. A request
# kafka-python makes of itself (``wait_for_topics`` asks ``describe_topics``) passes as it is, so the one the job
# calls is here even where it only calls another.
REQUESTS: dict[str, Callable[[dict, Names, Any], Any]] = {
    "describe_topics": _topics, "wait_for_topics": _topics, "describe_topic_partitions": _topics,
    "create_partitions": _topics, "delete_records": moved, "list_partition_offsets": moved,
    "describe_log_dirs": moved, "elect_leaders": _as_given, "describe_producers": moved,
    "describe_configs": _configs, "alter_configs": _configs, "reset_configs": _configs,
    "describe_groups": _groups, "delete_groups": _groups, "list_group_offsets": _groups,
    "alter_group_offsets": _groups, "reset_group_offsets": _groups, "delete_group_offsets": _groups,
    "remove_group_members": _groups, "describe_transactions": _groups,
    "describe_consumer_groups": _groups, "delete_consumer_groups": _groups, "list_consumer_group_offsets": _groups,
}
LISTINGS = ("list_groups", "list_consumer_groups")


def _answer(names: Names, value: Any) -> Any:
    """An admin answer naming the job's topics and groups: 3.x's dicts and lists and raw responses
    (``create_partitions``), 2.x's named tuples (``GroupInformation``) and raw responses (``describe_configs``,
    ``create_partitions``: a response object whose fields hold plain tuples), made for this answer and so renamed in
    place."""
    from kafka.structs import TopicPartition

    if isinstance(value, tuple) and hasattr(value, "_fields") and not isinstance(value, TopicPartition):
        return type(value)._make(_answer(names, v) for v in value)
    fields = getattr(getattr(type(value), "_struct", None), "_fields", None)
    if fields is not None and hasattr(value, "__slots__"):  # 3.x's protocol DataContainer (create_partitions)
        for field in fields:
            if hasattr(value, field.name):
                setattr(value, field.name, _answer(names, getattr(value, field.name)))
        return value
    schema = getattr(type(value), "SCHEMA", None)
    if schema is not None and hasattr(value, "__dict__"):  # kafka-python 2.x's protocol Struct
        for field in schema.names:
            setattr(value, field, _answer(names, getattr(value, field)))
        return value
    if type(value) is dict:
        return {_answer(names, k): _answer(names, v) for k, v in value.items()}
    if type(value) in PLAIN:
        return type(value)(_answer(names, v) for v in value)
    return back(names, value)


def _from_kafka_python() -> bool:
    """The call came from kafka-python itself (one admin call making another): its names are the trial's already."""
    return sys._getframe(2).f_globals.get("__name__", "").startswith("kafka.")


def _request(orig: Callable, into_trial: Callable[[dict, Names, Any], Any]) -> Callable:
    first = first_parameter(orig)

    def method(self, *args, **kwargs):
        route, names = self.__dict__["_streamchaos_route"], self.__dict__["_streamchaos_names"]
        if route is None or _from_kafka_python():
            return orig(self, *args, **kwargs)
        request, given = first_argument(args, kwargs, first)
        if request is not None:  # describe_topics(): every topic, the trial's answered by the job's name
            args, kwargs = given(into_trial(route, names, request))
        args = (args[0], *(_others(route, names, a) for a in args[1:])) if args else args
        kwargs = {k: v if k == first else _others(route, names, v) for k, v in kwargs.items()}
        return _answer(names, orig(self, *args, **kwargs))

    method.__name__ = orig.__name__
    return method


def _group_id(listing: Any) -> Any:
    """A listed group's id: 3.x lists dicts, 2.x ``(group_id, protocol_type)`` tuples."""
    if isinstance(listing, dict):
        return listing.get("group_id")
    return listing[0] if isinstance(listing, tuple) and listing else None


def _renamed(listing: Any, group: str) -> Any:
    return {**listing, "group_id": group} if isinstance(listing, dict) else (group, *listing[1:])


def _listing(orig: Callable) -> Callable:
    """``list_groups``/``list_consumer_groups``: the trial's groups alone (not Spark's answer runs'), by the job's
    names."""
    def method(self, *args, **kwargs):
        route, names = self.__dict__["_streamchaos_route"], self.__dict__["_streamchaos_names"]
        listed = orig(self, *args, **kwargs)
        if route is None or _from_kafka_python() or not isinstance(listed, list):
            return listed
        ours = []
        for listing in listed:
            group = _group_id(listing)
            name = job_group(route, group) if isinstance(group, str) else None
            if name is not None:
                names[group] = name
                ours.append(_renamed(listing, name))
        return ours

    method.__name__ = orig.__name__
    return method


def _kept_out(orig: Callable) -> Callable:
    """``create_topics``/``delete_topics``: the output topic is the harness's (made fresh for the trial with its
    partitions, deleted after it), so the job's request for the topic that names it is left out (nothing raised for
    it; an answer with none); other topics are made or deleted on the trial's broker as named."""
    import kafka

    first = first_parameter(orig)
    refuses_none = version_of(kafka.__version__) >= (3,)  # 3.x refuses a request of no topic

    def method(self, *args, **kwargs):
        route = self.__dict__["_streamchaos_route"]
        topics, given = first_argument(args, kwargs, first)
        if route is None or topics is None:
            return orig(self, *args, **kwargs)

        def ours(t: Any) -> bool:
            return names_output(route, t if isinstance(t, str) else getattr(t, "name", None))

        rest = ({k: v for k, v in topics.items() if not ours(k)} if isinstance(topics, dict)
                else [t for t in topics if not ours(t)])
        if topics and not rest and refuses_none:
            return {"topics": []}  # its answer's shape (the response's fields), with none
        args, kwargs = given(rest)  # 2.x is asked for none: its answer is the response object it gives
        return orig(self, *args, **kwargs)

    method.__name__ = orig.__name__
    return method


def rerouted_admin(base: type) -> type:
    """``base`` (kafka-python's ``KafkaAdminClient``) on the trial's broker, its requests moved to the trial's
    topic and groups."""
    cls = rerouted(base, ("list_topics",))
    cls.create_topics, cls.delete_topics = _kept_out(base.create_topics), _kept_out(base.delete_topics)
    for name, into_trial in REQUESTS.items():
        if hasattr(base, name):
            setattr(cls, name, _request(getattr(base, name), into_trial))
    for name in LISTINGS:
        if hasattr(base, name):
            setattr(cls, name, _listing(getattr(base, name)))
    return cls


def reroute() -> None:
    """kafka-python's ``KafkaAdminClient``, where the job has it, reaches this run's broker."""
    try:
        import kafka
        import kafka.admin.client
    except ImportError:
        return
    if getattr(kafka.KafkaAdminClient, "_streamchaos_rerouted", False):
        return
    admin = rerouted_admin(kafka.KafkaAdminClient)
    kafka.KafkaAdminClient = kafka.admin.KafkaAdminClient = kafka.admin.client.KafkaAdminClient = admin
