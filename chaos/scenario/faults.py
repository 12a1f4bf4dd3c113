"""The fault spec grammar users type and reports print: ``ACTION@BATCH:PHASE[/ARG...]``.

Examples: ``kill-driver@3:sink-done``, ``kill-executor@5:reading``, ``pause-executor@2:reading/3s``,
``damage-checkpoint@6:committed/truncate-offsets``, ``stop-driver@4:committed/1`` (a clean stop and a
restart from the same checkpoint with 1 executor core: a rescale, Flink's stop-with-savepoint). A
fault is anchored to a logical point (a micro-batch id and a checkpoint phase), so a schedule replays
exactly. ``ACTION@SECONDSs`` (``kill-driver@12.5s``) fires at a wall-clock time from the trial's start
instead, as time-based chaos tools do (``--timing random``, chaos/scenario/random_times.py): it replays to the same
time, not to the same point.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from chaos.errors import UserError

# Phases of micro-batch N, in the order they usually happen (docs/faults.md; the real order
# depends on the sink and is recorded, not assumed).
PHASES = ("planned", "reading", "state-commit", "sink-write", "sink-done", "committed")

TARGETS = ("driver", "executor", "worker", "node")  # node: a Docker node (container) of --cluster docker
CHANNELS = ("source", "sink")
CHANNEL_KINDS = ("delay", "cut", "reset", "down")
CHANNEL_DEFAULT_DURATION = 5.0
DEFAULT_LATENCY_MS = 1000
# Checkpoint damage, in shrink order (a shrink tries the earlier modes): the newest file of a kind truncated to
# half (a half-written file) or deleted; every offsets/commits file but the newest deleted (retention gone too
# far); bytes of the newest state file flipped; one operator's state directory deleted; the query's metadata file
# (its id) deleted; the newest offsets/commits file put back as the temporary file its writer, killed before the
# rename, would have left.
DAMAGE_MODES = (
    *(f"{how}-{what}" for what in ("offsets", "commits", "state") for how in ("truncate", "delete")),
    "retain-offsets", "retain-commits", "flip-state", "delete-operator", "delete-metadata",
    "unrename-offsets", "unrename-commits",
)
STATE_DAMAGE = ("truncate-state", "delete-state", "flip-state", "delete-operator")  # a state store's files


def damage_fires(mode: str, batch: int, phase: str) -> bool:
    """Whether the checkpoint holds what ``mode`` damages when batch ``batch`` reaches ``phase``: a commit file
    once batch 0 committed, two of them once batch 1 did, two offsets files from batch 1 on, state files once batch
    0 committed (the planner plans no damage that would find nothing to damage)."""
    committed = batch + (1 if phase == "committed" else 0)  # commits/ files by then
    if mode == "retain-commits":
        return committed >= 2
    if mode.endswith("-commits"):
        return committed >= 1
    if mode == "retain-offsets":
        return batch >= 1
    if mode in STATE_DAMAGE:
        return committed >= 1
    return True  # offsets/B from `planned` on, the metadata file from the query's start


ACTIONS = (
    *(f"kill-{t}" for t in TARGETS),
    "kill-sink-db",
    "kill-broker",  # the harness's Kafka broker: SIGKILL, restarted on its data after the downtime
    "pause-broker",  # SIGSTOP of the broker for the duration
    # Kafka's retention beating the consumer: the records of the trial's topic before batch B's end plus N more
    # (default: one batch's worth) are deleted, those the query has not read yet with them.
    "delete-records",
    # The trial's topic grows mid-stream by N partitions (default 1); the records keyed to them from the next batch
    # on are produced there (chaos/run/topics.py), as a producer's default partitioner places them after a resize.
    "add-partitions",
    *(f"pause-{t}" for t in TARGETS),
    *(f"{k}-{c}" for k in CHANNEL_KINDS for c in CHANNELS),
    "damage-checkpoint",
    "stop-driver",
    "partition",  # a Docker node cut off its network: partition@3:reading/node=1/10s (node=sink: the database's,
    # node=kafka: the broker's)
    "slow-node",  # a Docker node held to a tenth of a CPU for the duration
    "oom-node",  # a Docker node's memory limited to what it uses: the kernel's OOM killer takes an executor
    # Spark's graceful decommission (SIGPWR): the executor, or every executor of the worker, finishes its tasks and
    # migrates its blocks before it leaves; a decommissioned worker is replaced after the fault's duration.
    "decommission-executor",
    "decommission-worker",
)

_SPEC = re.compile(r"^(?P<action>[a-z-]+)@(?P<batch>\d+):(?P<phase>[a-z-]+)(?P<args>(/[^/]+)*)$")
_TIMED = re.compile(r"^(?P<action>[a-z-]+)@(?P<at>\d+(\.\d+)?)s(?P<args>(/[^/]+)*)$")
TIMED_BATCH = -1  # a timed fault's batch: no phase report matches it
_DURATION = re.compile(r"^(?P<n>\d+(\.\d+)?)(?P<unit>ms|s|m)$")
_ATTRIBUTE = re.compile(r"^(?P<key>latency|jitter)=(?P<value>\d+)$")
_UNTIL = re.compile(r"^until=(?P<phase>[a-z-]+)$")
_NODE = re.compile(r"^node=(?P<index>\d+|sink|kafka)$")  # sink: the sink database's node; kafka: the broker's
# A partition between two machines only: from=PEER drops what PEER sends the node (one way), with=PEER both ways.
_PEER = re.compile(r"^(?P<mode>from|with)=(?P<peer>driver|master|sink|node=\d+)$")
_UPGRADE = re.compile(r"^upgrade=(?P<version>\d+\.\d+\.\d+)$")
UNTIL_MAX_S = 60.0  # a channel fault "until PHASE" is healed after this at the latest (no deadlock)


def parse_duration(text: str) -> float:
    """``3s`` / ``500ms`` / ``1.5s`` / ``2m`` -> seconds."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(text)
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0}[match["unit"]]
    return float(match["n"]) * scale


def format_duration(seconds: float) -> str:
    if seconds < 1 or seconds != int(seconds):
        return f"{round(seconds * 1000)}ms"
    return f"{int(seconds)}s"


@dataclass(frozen=True)
class Fault:
    """One scheduled fault. ``args`` keep the user's words; the properties below interpret them."""

    action: str
    batch: int
    phase: str
    args: tuple[str, ...] = ()
    at_s: float | None = None  # a timed fault: seconds from the trial's start (batch TIMED_BATCH, phase planned)

    @property
    def spec(self) -> str:
        at = f"{self.at_s:g}s" if self.timed else f"{self.batch}:{self.phase}"
        return f"{self.action}@{at}" + "".join(f"/{a}" for a in self.args)

    @property
    def timed(self) -> bool:
        """Fired at a wall-clock time, not at a (batch, phase)."""
        return self.at_s is not None

    def __str__(self) -> str:
        return self.spec

    @property
    def point(self) -> tuple[int, int]:
        """Where it fires, comparable: (batch, the phase's place in ``PHASES``)."""
        return self.batch, PHASES.index(self.phase)

    @property
    def kind(self) -> str:
        """kill, pause, damage, partition, decommission, or a channel fault: delay, cut, reset, down."""
        return self.action.split("-", 1)[0]

    @property
    def channel(self) -> bool:
        """A fault of the source or sink channel (carried out by the fault proxy)."""
        return self.kind in CHANNEL_KINDS

    @property
    def attributes(self) -> dict[str, int]:
        """``key=value`` arguments of channel faults (latency, jitter in ms)."""
        out = {}
        for arg in self.args:
            if match := _ATTRIBUTE.match(arg):
                out[match["key"]] = int(match["value"])
        return out

    @property
    def target(self) -> str:
        if self.action == "partition":
            return "sink-db" if "node=sink" in self.args else "broker" if "node=kafka" in self.args else "node"
        return self.action.split("-", 1)[1]

    @property
    def duration(self) -> float | None:
        """Pause length, or the downtime before a killed (or decommissioned) worker or a killed driver is
        restarted."""
        for arg in self.args:
            if _DURATION.match(arg):
                return parse_duration(arg)
        return None

    @property
    def until(self) -> str | None:
        """``until=PHASE``: heal at the first report of PHASE for this batch or a later one."""
        for arg in self.args:
            if match := _UNTIL.match(arg):
                return match["phase"]
        return None

    @property
    def index(self) -> int | None:
        """Which executor/worker/node (by position in the live map; ``node=N`` of a partition); None means the
        one at the phase."""
        for arg in self.args:
            if arg.isdigit():
                return int(arg)
            if (match := _NODE.match(arg)) and match["index"].isdigit():
                return int(match["index"])
        return None

    @property
    def count(self) -> int | None:
        """``/N`` of delete-records (how many records past the batch's end offsets go too) and of add-partitions
        (how many partitions the topic gains)."""
        return self.index if self.action in ("delete-records", "add-partitions") else None

    @property
    def peer(self) -> tuple[str, str] | None:
        """``(mode, peer)`` of a partition between the node and one peer (``from=`` one way, ``with=`` both)."""
        for arg in self.args:
            if match := _PEER.match(arg):
                return match["mode"], match["peer"]
        return None

    @property
    def upgrade(self) -> str | None:
        """``upgrade=VERSION`` of stop-driver: the query resumes on that PySpark (chaos/machine/spark_versions.py)."""
        for arg in self.args:
            if match := _UPGRADE.match(arg):
                return match["version"]
        return None

    @property
    def mode(self) -> str | None:
        """The damage mode of damage-checkpoint."""
        for arg in self.args:
            if arg in DAMAGE_MODES:
                return arg
        return None


def parse_fault(text: str) -> Fault:
    """Parse one spec; raise UserError with a one-line explanation on any mistake."""
    text = text.strip()
    if timed := _TIMED.match(text):
        return _timed(text, timed)
    match = _SPEC.match(text)
    if not match:
        raise UserError(
            f"malformed fault spec {text!r}: expected ACTION@BATCH:PHASE[/ARG...] or ACTION@SECONDSs[/ARG...], "
            "e.g. kill-driver@3:sink-done, pause-executor@2:reading/3s or kill-driver@12.5s"
        )
    action, phase = match["action"], match["phase"]
    batch = int(match["batch"])
    # ``latency=1500,jitter=500`` is one arg of two attributes: keep them as separate args.
    args = tuple(part for a in match["args"].split("/") if a for part in (a.split(",") if "=" in a else [a]))
    if action not in ACTIONS:
        raise UserError(f"unknown fault action {action!r} in {text!r}: use one of {', '.join(ACTIONS)}")
    if phase not in PHASES:
        raise UserError(f"unknown phase {phase!r} in {text!r}: use one of {', '.join(PHASES)}")
    fault = Fault(action, batch, phase, args)
    for arg in args:
        known = (_DURATION.match(arg) or arg.isdigit() or arg in DAMAGE_MODES or _ATTRIBUTE.match(arg)
                 or _UNTIL.match(arg) or _UPGRADE.match(arg)
                 or (action == "partition" and (_NODE.match(arg) or _PEER.match(arg))))
        if not known:
            raise UserError(
                f"unknown argument {arg!r} in {text!r}: use a duration (3s, 500ms), an index (0, 1, ...), "
                f"latency=MS, jitter=MS, until=PHASE, node=N|sink, from=PEER or with=PEER (partition), "
                f"upgrade=X.Y.Z or a damage mode ({', '.join(DAMAGE_MODES)})"
            )
    if fault.until is not None:
        if fault.until not in PHASES:
            raise UserError(f"unknown phase {fault.until!r} in until= of {text!r}: use one of {', '.join(PHASES)}")
        if not (fault.channel or fault.kind == "partition"):
            raise UserError(f"{text!r}: until=PHASE only goes with channel faults (delay/cut/reset/down) and "
                            "partition")
        if fault.duration is not None:
            raise UserError(f"{text!r}: give a duration or until=PHASE, not both")
    if fault.peer is not None and fault.target == "broker":  # the job reaches it through proxies on the host
        raise UserError(f"{text!r}: the broker's node is reached through the fault proxies on the host's end, from "
                        "no other peer: cut it off whole (drop from=/with=), or cut the source or sink channel")
    if fault.peer is not None:
        me = {"sink-db": "sink"}.get(fault.target, f"node={fault.index}")
        if fault.peer[1] == me:
            raise UserError(f"{text!r}: a node is not partitioned from itself; name another peer")
    if fault.attributes and fault.kind != "delay":
        raise UserError(f"{text!r}: latency= and jitter= only go with delay-source and delay-sink")
    if fault.channel and fault.index is not None:
        raise UserError(f"{text!r}: a channel has no index; drop it")
    if fault.kind in ("pause", "slow", "oom") and fault.duration is None:
        raise UserError(f"{text!r}: a {fault.kind} fault needs a duration, e.g. {fault.spec}/3s")
    if fault.action == "damage-checkpoint" and fault.mode is None:
        raise UserError(
            f"{text!r}: damage-checkpoint needs a mode, one of {', '.join(DAMAGE_MODES)}"
        )
    if fault.action != "damage-checkpoint" and fault.mode is not None:
        raise UserError(f"{text!r}: a damage mode only goes with damage-checkpoint")
    if fault.action == "stop-driver":
        if phase != "committed":
            raise UserError(f"{text!r}: a clean stop waits for the batch in flight, so it goes at :committed "
                            f"(e.g. stop-driver@{batch}:committed/1)")
        if fault.duration is not None or fault.mode is not None:
            raise UserError(f"{text!r}: stop-driver takes the restarted application's executor cores (e.g. /1) "
                            "or upgrade=VERSION")
        if fault.index is not None and fault.upgrade is not None:
            raise UserError(f"{text!r}: give executor cores or upgrade=VERSION, not both")
    elif fault.upgrade is not None:
        raise UserError(f"{text!r}: upgrade=VERSION only goes with stop-driver (e.g. stop-driver@{batch}:committed/"
                        f"{fault.args[-1]})")
    if fault.action == "decommission-executor" and fault.duration is not None:
        raise UserError(f"{text!r}: a decommissioned executor leaves when it has handed its blocks on; it takes no "
                        "duration (a decommissioned worker's is how long it stays away)")
    if fault.action != "stop-driver" and fault.target == "driver" and fault.index is not None:
        raise UserError(f"{text!r}: there is one driver; drop the index")
    if fault.action == "add-partitions" and (fault.duration is not None or fault.count == 0):
        raise UserError(f"{text!r}: add-partitions takes how many partitions the topic gains, at least 1 (e.g. "
                        f"add-partitions@{batch}:{phase}/2)")
    return fault


def _timed(text: str, match: re.Match) -> Fault:
    """``ACTION@SECONDSs[/ARG...]``: checked as the same fault at a phase would be, then anchored in time. A
    clean stop (it waits for a commit) and a heal at a phase need a phase."""
    args = match["args"]
    if match["action"] == "add-partitions":
        raise UserError(f"{text!r}: the records keyed to the new partitions are those after its batch; it takes a "
                        "batch and phase (add-partitions@BATCH:PHASE/N), not a time")
    phased = parse_fault(f"{match['action']}@0:planned{args}") if match["action"] != "stop-driver" else None
    if phased is None:
        raise UserError(f"{text!r}: stop-driver waits for a batch to commit; it takes a phase "
                        "(stop-driver@BATCH:committed), not a time")
    if phased.until is not None:
        raise UserError(f"{text!r}: until=PHASE heals at a phase; a timed fault takes a duration (e.g. /5s)")
    return Fault(phased.action, TIMED_BATCH, "planned", phased.args, at_s=float(match["at"]))
