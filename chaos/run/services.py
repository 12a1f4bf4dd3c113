"""What a trial uses of the harness it runs on: a small frozen set of collaborators, handed over by
``Harness.trial``, so a trial (and its standbys) never reach back into the harness that made them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.clusters.base import Cluster
from chaos.driver.booted_ahead import Spares
from chaos.machine.processes import Owned
from chaos.nemesis.channels import Channels
from chaos.stream.eventlog import EventLogServer


@dataclass(frozen=True)
class TrialServices:
    cluster: Cluster
    owned: Owned
    eventlog: EventLogServer
    channels: Channels
    spares: Spares
    source_url: str  # the event log, through the source channel's proxy
    driver_cwd: Path | None  # the drivers' working directory (chaos.driver.pydaemon.import_home)
    standby: bool  # a pre-warmed standby replaces a killed driver
    start_settings: dict  # how every driver (and its executors) starts: what a spare must have booted with
    class_archive: Path | None
    executor_archive: Path | None
    boot_spares: Callable[..., list]  # the next trial's first driver (and standby), booted now
    database: Any = None  # the sink database, for a pipeline that has one
    sink_dsn: str | None = None  # the sink database through the sink channel's proxy
    kafka: Any = None  # the Kafka broker, for a job whose Kafka source is Spark's connector
