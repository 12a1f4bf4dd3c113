"""How a job's own Kafka clients, of any library, name the trial's broker, topic, ids and groups.

A job's clients are rerouted (chaos.jobs.kafka.confluent, .confluent_admin, .kafka_python): the topic the job names
in ``--sink kafka:TOPIC`` (every topic, with none named) is the trial's output topic, transactional ids and consumer
groups get the trial's topic before them, and a wrapped method finds the argument it moves however the job passed
it. What is the same for every library is here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def trial_topic(route: dict | None, name: Any, names: dict[str, str] | None = None) -> Any:
    """The topic a client of the job's means by ``name`` (``names`` learns the job's name of the trial's)."""
    if route is None or not isinstance(name, str) or (route.get("named") and name != route["named"]):
        return name
    if names is not None:
        names[route["topic"]] = name
    return route["topic"]


def trial_id(route: dict, name: str) -> str:
    """A transactional id or consumer group of the job's, on the trial's broker: the trial's topic before it, so
    trials sharing the broker never fence or read each other's."""
    return f"{route['topic']}.{name}"


def job_group(route: dict, group: str) -> str | None:
    """The job's name of a group listed on the trial's broker; None for a group that is not the trial's (other
    trials share the broker, and Spark's answer runs name theirs after the answer's topic)."""
    prefix = trial_id(route, "")
    if not group.startswith(prefix) or group.startswith(f"{prefix}answer."):
        return None
    return group[len(prefix):]


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
