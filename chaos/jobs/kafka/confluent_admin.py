"""A job's confluent_kafka ``AdminClient`` reaches the trial's broker, and names topics and groups as the job does.

Jobs make an ``AdminClient`` to create their output topic at start, check it exists (``list_topics``,
``describe_topics``) or its settings (``describe_configs``), read their consumer groups' lag
(``list_consumer_group_offsets``, ``list_offsets``) or reset it (``alter_consumer_group_offsets``). Run as written,
it would reach the broker the job names. Here it reaches the trial's (chaos.jobs.kafka.confluent): a request's topic
the job names in ``--sink kafka:TOPIC`` (every topic, with none named) is the trial's output topic, a consumer group
is the trial's (``trial_id``, as the job's consumers' groups are), and what comes back (the keys of the futures'
map, a topic's description, a group's offsets, members and their partitions, the cluster's metadata, the groups
``list_consumer_groups`` or the deprecated ``list_groups`` list: the trial's alone) names the job's topic and group
again. The output topic is the harness's, made fresh for the trial with its partitions, so the job's
``create_topics``/``delete_topics`` of it are left out and reported done. The class is changed in place (its methods
call ``super(AdminClient, self)``, which a subclass put in its name would turn into endless recursion).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from chaos.jobs.kafka import confluent
from chaos.jobs.kafka.naming import first_argument, first_parameter, job_group, names_output, trial_id, trial_topic


class _Names:
    """The job's names of the trial's topics (``topics``) and consumer groups (``groups``) one admin client used."""

    def __init__(self, route: dict | None) -> None:
        self.route = route
        self.topics: dict[str, str] = {}
        self.groups: dict[str, str] = {}
        if route is not None and route.get("named"):
            self.topics[route["topic"]] = route["named"]

    def topic(self, name: Any) -> Any:
        return trial_topic(self.route, name, self.topics)

    def group(self, name: Any) -> Any:
        if self.route is None or not isinstance(name, str):
            return name
        self.groups[trial_id(self.route, name)] = name
        return trial_id(self.route, name)

    def back(self, value: Any) -> Any:
        """``value`` naming the job's topics and groups: a name, a TopicPartition, a list of them, the cluster's
        metadata, a topic's description, a group's offsets or description (changed in place, as they are the
        client's own objects made for this answer)."""
        if isinstance(value, str):
            return self.groups.get(value, self.topics.get(value, value))
        value = confluent.back(self.topics, value)
        if isinstance(getattr(value, "group_id", None), str):  # ConsumerGroupTopicPartitions, its description
            value.group_id = self.groups.get(value.group_id, value.group_id)
        if isinstance(getattr(value, "topic_partitions", None), list):  # their offsets, a member's assignment
            value.topic_partitions = confluent.back(self.topics, value.topic_partitions)
        if isinstance(getattr(value, "name", None), str) and (hasattr(value, "partitions")  # TopicDescription
                                                              or _is_topic_resource(value)):
            value.name = self.topics.get(value.name, value.name)
        for member in getattr(value, "members", None) or ():
            for assignment in (getattr(member, "assignment", None), getattr(member, "target_assignment", None)):
                if assignment is not None:
                    self.back(assignment)
        return value

    def own(self, group: str) -> str | None:
        """The job's name of a listed group of the trial's (learned for the answers); None for another's."""
        name = job_group(self.route, group)
        if name is not None:
            self.groups[group] = name
        return name

    def own_groups(self, listed: Any) -> Any:
        """``list_consumer_groups``' answer: the trial's groups alone, by the job's names."""
        listed.valid = [g for g in listed.valid or () if self.own(g.group_id) is not None]
        for listing in listed.valid:
            listing.group_id = self.groups[listing.group_id]
        return listed

    def own_metadata(self, listed: list) -> list:
        """The deprecated ``list_groups``' answer (``GroupMetadata``, named by ``id``): the trial's alone."""
        ours = [g for g in listed if isinstance(g.id, str) and self.own(g.id) is not None]
        for group in ours:
            group.id = self.groups[group.id]
        return ours

    def answer(self, futures: dict[Any, Future]) -> dict[Any, Future]:
        """A request's futures keyed and resolving as the job named them."""
        return {self.back(key): _named_back(self, future) for key, future in futures.items()}


def _is_topic_resource(value: Any) -> bool:
    """A ``ConfigResource`` of a topic (``describe_configs`` and the alter calls: a job checks its retention)."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    return isinstance(value, ConfigResource) and value.restype == ResourceType.TOPIC


def _named_back(names: _Names, future: Future, back: Callable[[Any], Any] | None = None) -> Future:
    """A future resolving to ``future``'s result named as the job names it (by ``back``; its error as it is, and
    an error naming it back too). Running from the start, as the library's are: the job cannot cancel it."""
    named: Future = Future()
    named.set_running_or_notify_cancel()
    back = back or names.back

    def done(f: Future) -> None:
        try:
            error = f.exception()
            if error is None:
                named.set_result(back(f.result()))
        except BaseException as e:  # noqa: BLE001 - cancelled, or naming it back failed: the job's future says so
            error = e
        if error is not None:
            named.set_exception(error)

    future.add_done_callback(done)
    return named


def _topics_in(names: _Names, request: Any) -> Any:
    """A ``TopicCollection``, the list of ``NewPartitions`` or of TopicPartitions, or a map keyed by
    TopicPartitions (``list_offsets``), on the trial's topic."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import NewPartitions

    if isinstance(request, TopicCollection):
        return TopicCollection([names.topic(t) for t in request.topic_names])
    if isinstance(request, dict):
        return {confluent.partitions(names.route, k, names.topics): v for k, v in request.items()}
    if isinstance(request, list) and request and isinstance(request[0], NewPartitions):
        return [NewPartitions(names.topic(p.topic), p.new_total_count, replica_assignment=p.replica_assignment)
                for p in request]
    return confluent.partitions(names.route, request, names.topics)


def _configs_in(names: _Names, request: Any) -> Any:
    """``ConfigResource``s, a topic's on the trial's topic (a copy: the job's own is left as it wrote it)."""
    moved = []
    for resource in request:
        if _is_topic_resource(resource):
            resource = copy.copy(resource)
            resource.name = names.topic(resource.name)
        moved.append(resource)
    return moved


def _groups_in(names: _Names, request: Any) -> Any:
    """Group ids, or ``ConsumerGroupTopicPartitions`` (a group's offsets), in the trial's group and topic."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    return [ConsumerGroupTopicPartitions(names.group(r.group_id),
                                         confluent.partitions(names.route, r.topic_partitions, names.topics))
            if isinstance(r, ConsumerGroupTopicPartitions) else names.group(r) for r in request]


def _moved(orig: Callable, into_trial: Callable[[_Names, Any], Any]) -> Any:
    """An admin request whose first argument ``into_trial`` moves to the trial's topics and groups, answered in
    the job's names."""
    first = first_parameter(orig)

    def method(self, *args, **kwargs):
        names = self.__dict__.get("_streamchaos_names")
        request, given = first_argument(args, kwargs, first)
        if names is None or names.route is None or request is None:
            return orig(self, *args, **kwargs)
        args, kwargs = given(into_trial(names, request))
        return names.answer(orig(self, *args, **kwargs))

    method.__name__ = orig.__name__
    return method


def _kept_out(orig: Callable, topic_of: Callable[[Any], str]) -> Any:
    """``create_topics``/``delete_topics``: the output topic is the harness's (made fresh for the trial with its
    partitions, deleted after it), so a request the job makes for the topic that names it is left out and reported
    done; other topics are made or deleted on the trial's broker as named."""
    first = first_parameter(orig)

    def method(self, *args, **kwargs):
        names = self.__dict__.get("_streamchaos_names")
        route = names.route if names is not None else None
        topics, given = first_argument(args, kwargs, first)
        if route is None or topics is None:
            return orig(self, *args, **kwargs)
        ours = [t for t in topics if names_output(route, topic_of(t))]
        rest = [t for t in topics if all(t is not o for o in ours)]
        args, kwargs = given(rest)
        done = orig(self, *args, **kwargs) if rest or not ours else {}
        for topic in ours:
            future: Future = Future()
            future.set_result(None)
            done[topic_of(topic)] = future
        return done

    method.__name__ = orig.__name__
    return method


TOPIC_REQUESTS = ("describe_topics", "create_partitions", "delete_records", "list_offsets")
CONFIG_REQUESTS = ("describe_configs", "alter_configs", "incremental_alter_configs")
GROUP_REQUESTS = ("list_consumer_group_offsets", "alter_consumer_group_offsets", "describe_consumer_groups",
                  "delete_consumer_groups")


def reroute_admin(cls: type) -> None:
    """``cls`` (confluent_kafka's ``AdminClient``) reaches the trial's broker when the job makes one, changed in
    place."""
    if cls.__dict__.get("_streamchaos_rerouted"):
        return
    init, list_topics = cls.__init__, getattr(cls, "list_topics", None)
    list_groups, legacy_groups = getattr(cls, "list_consumer_groups", None), getattr(cls, "list_groups", None)

    def __init__(self, conf, **kwargs):  # noqa: N807
        route = confluent.job_route()
        self.__dict__["_streamchaos_names"] = _Names(route)
        init(self, confluent.settings(route, (conf,), {}), **kwargs)

    def listed(self, *args, **kwargs):
        names = self.__dict__.get("_streamchaos_names")
        if names is None or names.route is None:
            return list_topics(self, *args, **kwargs)
        topic, given = first_argument(args, kwargs, "topic")  # list_topics(topic=...): the trial's
        args, kwargs = given(names.topic(topic)) if topic is not None else (args, kwargs)
        return names.back(list_topics(self, *args, **kwargs))

    def groups(self, *args, **kwargs):
        names = self.__dict__.get("_streamchaos_names")
        listed = list_groups(self, *args, **kwargs)
        if names is None or names.route is None:
            return listed
        return _named_back(names, listed, names.own_groups)

    def metadata(self, *args, **kwargs):  # list_groups(group=None): deprecated, still in jobs written for 1.x
        names = self.__dict__.get("_streamchaos_names")
        if names is None or names.route is None:
            return legacy_groups(self, *args, **kwargs)
        group, given = first_argument(args, kwargs, "group")
        args, kwargs = given(names.group(group)) if group is not None else (args, kwargs)
        return names.own_metadata(legacy_groups(self, *args, **kwargs))

    cls.__init__ = __init__
    if list_groups is not None:
        cls.list_consumer_groups = groups
    if legacy_groups is not None:
        cls.list_groups = metadata
    if list_topics is not None:
        cls.list_topics = listed
    cls.create_topics = _kept_out(cls.create_topics, lambda t: t.topic)
    cls.delete_topics = _kept_out(cls.delete_topics, lambda t: t)
    for requests, into_trial in ((TOPIC_REQUESTS, _topics_in), (CONFIG_REQUESTS, _configs_in),
                                 (GROUP_REQUESTS, _groups_in)):
        for name in requests:
            if hasattr(cls, name):
                setattr(cls, name, _moved(getattr(cls, name), into_trial))
    cls._streamchaos_rerouted = True
