"""A scenario: everything needed to run (and re-run) one trial. Serializable to scenario.json.

The event stream is derived from the seed alone, so a stored scenario replays to the same events,
the same per-batch offsets and the same fault placement.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from chaos.errors import UserError
from chaos.scenario.faults import Fault, parse_fault
from chaos.scenario.schema import EVENT_SCHEMA  # noqa: F401  (re-exported: the stream's schema)

BASE_TIME_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
# A trial's stream unless told otherwise (every command, the campaign spec and the plugin take these):
# ten micro-batches of 200 events, over 20 keys.
EVENTS = 2000
EVENTS_PER_BATCH = 200
KEYS = 20
MAX_DISORDER_MS = 2000


@dataclass
class Scenario:
    pipeline: str
    events: int = EVENTS
    seed: int = 0
    events_per_batch: int = EVENTS_PER_BATCH
    partitions: int = 2
    keys: int = KEYS
    max_disorder_ms: int = MAX_DISORDER_MS
    skew: float = 1.0
    late_fraction: float = 0.0
    late_by_ms: int = 600_000
    resent_fraction: float = 0.0
    # Parsed once, here: given as specs (``kill-driver@3:sink-done``, as stored in scenario.json) or as Faults.
    faults: list[Fault] = field(default_factory=list)
    cluster: str = "standalone"
    workers: int = 2
    brokers: int = 1  # Kafka brokers (--cluster docker: each a node, every partition on up to three)
    driver_downtime: float = 1.0
    recovery_timeout: float = 180.0
    # A configuration variant (chaos/scenario/variants.py): Spark settings, the trigger, writeStream options.
    conf: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.events < 1:
            raise UserError(f"--events must be at least 1, got {self.events}")
        if self.events_per_batch < 1:
            raise UserError(f"--events-per-batch must be at least 1, got {self.events_per_batch}")
        if self.partitions < 1 or self.keys < 1 or self.brokers < 1:
            raise UserError("--partitions, --keys and --brokers must be at least 1")
        for name in ("late_fraction", "resent_fraction"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise UserError(f"{name} must lie in [0, 1], got {getattr(self, name)}")
        self.faults = [parse_fault(f) if isinstance(f, str) else f for f in self.faults]
        last = self.batches - 1
        for fault in self.faults:
            if fault.batch > last:
                raise UserError(
                    f"fault {fault.spec} names batch {fault.batch}, but {self.events} events at "
                    f"{self.events_per_batch} per batch make batches 0..{last}: lower the batch or "
                    "raise --events"
                )

    @property
    def batches(self) -> int:
        return math.ceil(self.events / self.events_per_batch)

    @property
    def specs(self) -> list[str]:
        """The faults as the user types them (``--fault`` arguments, scenario.json)."""
        return [f.spec for f in self.faults]

    # Scenario fields the ``trial`` command takes as options (the rest are harness settings it derives).
    _CLI_OPTIONS = {"events": "--events", "seed": "--seed", "events_per_batch": "--events-per-batch",
                    "partitions": "--partitions", "keys": "--keys", "skew": "--skew",
                    "max_disorder_ms": "--max-disorder-ms", "late_fraction": "--late-fraction",
                    "resent_fraction": "--resent-fraction", "cluster": "--cluster", "workers": "--workers",
                    "brokers": "--brokers",
                    "driver_downtime": "--downtime", "recovery_timeout": "--recovery-timeout"}

    def command(self, spark: str | None = None) -> str:
        """The ``streamchaos trial`` command line that replays this scenario (non-default options only), on
        ``spark`` (``--spark``) when the trial ran on another Spark than the installed one."""
        defaults = Scenario(self.pipeline)
        parts = ["streamchaos", *(["--spark", shlex.quote(spark)] if spark else []), "trial",
                 shlex.quote(self.pipeline)]
        for name, option in self._CLI_OPTIONS.items():
            value = getattr(self, name)
            if name in ("events", "seed") or value != getattr(defaults, name):
                parts += [option, shlex.quote(str(value))]
        for spec in self.specs:
            parts += ["--fault", spec]
        for key, value in self.conf.items():
            parts += ["--conf", shlex.quote(f"{key}={value}")]
        return " ".join(parts)

    def to_dict(self) -> dict:
        """The stored form (scenario.json, a campaign plan's entry): faults as specs."""
        return {**asdict(self), "faults": self.specs}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def save(self, path: Path) -> None:
        path.write_text(self.to_json())

    @classmethod
    def load(cls, path: Path) -> Scenario:
        from chaos.store.records import dataclass_fields, load_json

        fix = "restore it from the campaign's campaign.json or re-run the trial"
        fields = dataclass_fields(cls, load_json(path, fix), str(path), fix)  # each of its errors names the file
        try:
            return cls(**fields)
        except UserError as exc:  # well-typed values no trial can run (__post_init__ speaks of options)
            raise UserError(f"{path} holds a scenario no trial can run ({exc}): {fix}") from None


def generate_events(stream) -> pl.DataFrame:
    """The event stream of a scenario (or a ``properties.strategies.StreamSpec``), from its seed alone.

    Unique ids in append order; keys with a Zipf skew (``skew`` 0 = uniform); event time 100 ms apart
    with up to ``max_disorder_ms`` of disorder; a ``late_fraction`` of events whose event time lies
    ``late_by_ms`` in the past (beyond any sensible watermark delay: they are ``late``); a
    ``resent_fraction`` of events re-sent by the producer with a new id and the same payload
    (``resent_of`` names the original id: what dedup pipelines must drop). ``partition`` is derived
    from the key (like a Kafka producer), ``offset`` is the position in that partition.
    """
    rng = np.random.default_rng(stream.seed)
    n = stream.events
    ids = np.arange(n, dtype=np.int64)
    weights = 1.0 / np.arange(1, stream.keys + 1) ** stream.skew
    key_idx = rng.choice(stream.keys, size=n, p=weights / weights.sum())
    values = rng.integers(1, 1000, size=n, dtype=np.int64)
    jitter = rng.integers(0, stream.max_disorder_ms + 1, size=n) if stream.max_disorder_ms else 0
    event_ms = BASE_TIME_MS + ids * 100 - jitter
    late = rng.random(n) < stream.late_fraction if stream.late_fraction else np.zeros(n, dtype=bool)
    late[: min(n, 10)] = False  # the watermark needs a few on-time events before anything can be late
    event_ms = np.where(late, event_ms - stream.late_by_ms, event_ms)
    resent_of = np.full(n, -1, dtype=np.int64)
    if stream.resent_fraction and n > 1:
        # Event i repeats the payload of an earlier event j (the producer retried after a timeout).
        chosen = np.flatnonzero(rng.random(n) < stream.resent_fraction)
        chosen = chosen[chosen > 0]
        back = rng.integers(1, 20, size=chosen.size)
        resent_of[chosen] = np.maximum(chosen - back, 0)
        resent_of[chosen] = _originals(resent_of)[chosen]
        src = resent_of[chosen]
        key_idx[chosen], values[chosen], event_ms[chosen] = key_idx[src], values[src], event_ms[src]
        late[chosen] = late[src]
    partition = (key_idx % stream.partitions).astype(np.int32)
    frame = pl.DataFrame(
        {
            "id": ids,
            "key": [f"k{k:03d}" for k in key_idx],
            "value": values,
            "event_time": pl.Series(event_ms, dtype=pl.Int64).cast(pl.Datetime("ms")),
            "partition": partition,
            "late": late,
            "resent_of": pl.Series(resent_of).replace(-1, None),
        }
    )
    return frame.with_columns(pl.int_range(pl.len()).over("partition").cast(pl.Int64).alias("offset"))


def _originals(resent_of: np.ndarray) -> np.ndarray:
    """Follow re-send chains to the first event, so every copy names the one original."""
    root = np.arange(resent_of.size)
    for i in range(resent_of.size):
        j = resent_of[i]
        if j >= 0:
            root[i] = root[j]
    return root
