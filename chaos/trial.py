"""One trial: scenario in, stored run directory out (scenario, events, history, sink, result).

The loop is Jepsen's: start the pipeline's driver, let the controller fire each fault at its
(batch, phase), restart a killed driver from the same checkpoint after its downtime, heal every
fault, then drain (wait until a committed batch covers the whole input) or give up after the
recovery timeout (``stalled``). The runner decides no verdict; it records what happened.

Run directory::

    scenario.json   the replayable scenario      events.parquet  the input stream
    driver.json     the driver's configuration   history.jsonl   the timeline
    checkpoint/     Spark's checkpoint           sink/           the sink's files
    logs/           driver-<k>.log per incarnation
    state/<N>.parquet  the state store at committed batch N (stateful pipelines, for the consistent cut)
    frozen/         the sink as the trial ended it, which the verdict is judged from (chaos/evidence.py)
    result.json     the summary other tools read (see ``summarize``)
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import polars as pl

from chaos import interrupt
from chaos.atomic import write_json
from chaos.channels import Channels
from chaos.cluster import QUICK_JVM_OPTIONS, Cluster, make_cluster, spark_env, spark_home, sweep_driver_scratch
from chaos.containers import reap_containers
from chaos.controller import Controller, History
from chaos.errors import UserError
from chaos.eventlog import EventLogServer
from chaos.evidence import freeze, judged_sink
from chaos.java import require_java
from chaos.jvm.archive import driver_archive, executor_archive
from chaos.jvm.unsigned import quick_class_path
from chaos.nemesis import Nemesis
from chaos.postgres import PostgresServer
from chaos.procs import Group, Owned, reap_orphans, wait_until
from chaos.pydaemon import import_home
from chaos.queryconf import REFUSED_RC
from chaos.scenario import Scenario, generate_events
from chaos.socketfeed import SocketFeed
from chaos.source import read_offsets_file
from chaos.spare import Spare, recycle_folder
from chaos.sparkenv import current_version as spark_version
from chaos.spec import Fault
from chaos.watcher import CheckpointWatcher
from pipelines_under_test import Pipeline, resolve

MAX_UNPLANNED_EXITS = 2
STOP_GRACE = 30.0
STATE_DUMP_GRACE = 120.0
# A recycled driver runs at most this many more trials, then a freshly booted spare takes its place: each trial
# leaves a stopped query and a session behind in its JVM (Spark keeps a session's listener bus registered).
MAX_RECYCLED_TRIALS = 20
STANDBY_WAIT = 90.0  # longest a held driver waits for its standby to be warm before the kill
# Until a started driver reports its session up, the stall clock allows at least this long: a boot on a loaded
# machine or on Docker nodes can outlast a short --recovery-timeout, which is about commits, not boots.
BOOT_GRACE_S = 120.0


def first_upgrade(schedule: list[Fault]) -> Fault | None:
    """The schedule's earliest stop-driver/upgrade=V: from it on, drivers run another Spark."""
    return min((f for f in schedule if f.upgrade is not None), key=lambda f: f.point, default=None)


def validate_schedule(scenario: Scenario, pipeline: Pipeline) -> None:
    """Reject faults the pipeline cannot take (no cluster needed: called before anything starts)."""
    for fault in scenario.schedule:
        if fault.target == "sink-db" and not pipeline.database:
            raise UserError(f"{fault.spec}: {pipeline.name} has no sink database; use a pg-* pipeline")
        if fault.channel and fault.target == "sink" and not pipeline.sink_channel:
            raise UserError(f"{fault.spec}: {pipeline.name} writes to a local file, it has no sink channel; "
                            "use a pipeline with a database sink")
        if fault.channel and fault.target == "source" and pipeline.own_source:
            raise UserError(f"{fault.spec}: {pipeline.name} reads a source of its own, not the harness's event log "
                            "through the source channel; use a pipeline that reads the event log")
        if fault.phase not in pipeline.phases:
            hint = (" (if its query keeps state, set state_store = True on the pipeline)"
                    if fault.phase == "state-commit" else "")
            raise UserError(f"{fault.spec}: {pipeline.name}'s batches never reach phase {fault.phase!r}; "
                            f"use one of {', '.join(pipeline.phases)}{hint}")
    schedule = scenario.schedule
    upgrade = first_upgrade(schedule)
    if upgrade is not None:
        from chaos.sparkenv import python_for

        python_for(upgrade.upgrade)  # added, or one line saying how to add it
        if pipeline.boot_conf() or pipeline.own_source:
            raise UserError(f"{upgrade.spec}: {pipeline.name} has JVM hooks or a source of its own, built for "
                            "the running Spark; upgrade a pipeline that reads the harness's event log")
        later = [f for f in schedule if f.point >= upgrade.point and f is not upgrade
                 and (f.target in ("executor", "worker") or f.action == "stop-driver")]
        if later:
            raise UserError(f"{later[0].spec}: after {upgrade.spec} the query runs in one local-mode driver (the "
                            "cluster stays on the running Spark): no executor, worker or second stop to fault")
    if pipeline.database:
        from chaos.postgres import require_postgres

        require_postgres()


class Harness:
    """What lives across the trials of one run: owned processes, the cluster, the event log server."""

    def __init__(self, cluster: str = "standalone", workers: int = 2, workdir: Path | None = None,
                 toxiproxy: str | None = None, standby: bool = True, worker_cores: int | None = None,
                 quick_jvm: bool = True, spare: bool | None = None, quick_python: bool = True,
                 quick_scheduling: bool = True, recycle: bool = True, quick_sql: bool = True,
                 data_dir: Path | None = None) -> None:
        self.cluster_spec = cluster
        self.data_dir = data_dir  # where the trials' directories live, if not in ``workdir`` (Docker nodes mount it)
        # JVM flags of every Spark process started for the trials (chaos.cluster.QUICK_JVM_OPTIONS), and
        # the drivers' class archive (chaos/jvm/archive.py), built on the first quick-JVM harness's start.
        self.quick_jvm = quick_jvm
        self.java_options = QUICK_JVM_OPTIONS if quick_jvm else ""
        # Unsigned copies of Spark's signed jars (Janino), first on the class path: archivable (chaos/jvm/unsigned.py).
        self.class_path = ""
        self.class_archive: Path | None = None
        self.executor_archive: Path | None = None  # executors' own (their class path differs)
        # The applications' Python daemons import pyspark from cached bytecode, not pyspark.zip (chaos/pydaemon.py).
        self.python_daemon = "chaos.pydaemon" if quick_python else None
        self.driver_cwd: Path | None = None  # the drivers' working directory (chaos.pydaemon.import_home)
        # Tasks do not wait for a preferred executor (spark.locality.wait 0s instead of 3s): after an executor
        # kill, the state store tasks it held waited 3 s for it, then ran on a survivor anyway. Scheduling only:
        # offers still go to local tasks first, and nothing in a batch's result depends on where it ran.
        self.locality_wait = "0s" if quick_scheduling else None
        # The catalogue's queries run interpreted, not compiled (chaos.driver.INTERPRETED_SQL): each driver and
        # executor JVM lives for a few batches of a few hundred rows, and compiling their code cost more CPU
        # than it saved (benchmarks/throughput.py). A user's job keeps Spark's defaults (Pipeline.interpreted_sql).
        self.interpreted_sql = quick_sql
        # A pre-warmed standby driver replaces a killed one (see chaos/driver.py): kill -> next commit ~2.5 s
        # instead of ~25 s, inside the memory budget (benchmarks/throughput.py). ``standby=False``: cold restarts.
        self.standby = standby
        # Each trial's first driver boots during the previous trial's tail (chaos/spare.py); by default with
        # the standby. A run of one trial boots none (``trial(last=True)``).
        spare = standby if spare is None else spare
        self.use_spare = spare
        # With ``spare``: a trial's last driver, unless a fault killed it, stays for the next trial as its
        # first driver (chaos.driver.serve): its JVM, session and executors are not booted again.
        self.recycle = spare and recycle
        # On the harness's own workers an application gets one executor holding all its cores
        # (chaos.driver.boot): an executor JVM and its Python daemon less per application, ~0.4 GiB. Each
        # worker has room for one such executor; with a standby and spares, for two, so that the next
        # trial's standby spare holds executors beside this trial's driver and the driver spare and is
        # warm when its trial starts. Cores here are slots (the machine has 2): only the active
        # application's executor works, the others idle.
        self.worker_cores = worker_cores or (2 * workers if standby and spare else workers)
        self.toxiproxy = toxiproxy
        self.workers = workers
        self.workdir = Path(workdir or Path.cwd() / "runs").resolve()
        # The drivers' and executors' temporary files (chaos.cluster.scratch_option): emptied at each start
        # (what the JVMs of a killed harness left), removed at the close.
        self.tmp = self.workdir / "tmp"
        self.owned = Owned()
        self.cluster: Cluster | None = None
        self.eventlog: EventLogServer | None = None
        self.channels: Channels | None = None
        self.source_url = ""
        self.database: PostgresServer | None = None  # first trial that needs it (pgnode on docker)
        self.sink_dsn: str | None = None
        self.timings: dict[str, float] = {}
        self.spare: Spare | None = None  # the next trial's first driver, booted ahead (with ``spare``)
        # With ``spare`` and ``standby``: the next trial's first standby too, booted in the same tail.
        self.standby_spare: Spare | None = None
        self.spares = 0
        self.recycled: dict[int, int] = {}  # pid of a recycled driver -> trials it ran after its first
        self.next_trial = True  # False during a run's last trial: no spare is booted (or kept) for nobody

    def __enter__(self) -> Harness:
        require_java()
        self.cluster = make_cluster(self.cluster_spec, self.owned, self.workdir / "cluster", self.workers,
                                    worker_cores=self.worker_cores, java_options=self.java_options,
                                    data_dir=self.data_dir or self.workdir)
        reap_orphans()
        reap_containers()
        self.workdir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp.mkdir()
        # A previous harness's spare folders (its ``listening`` would let a spare be signalled before it can
        # catch the signal: a second `streamchaos trial` in the same runs/ directory lost its first driver).
        shutil.rmtree(self.workdir / "spares", ignore_errors=True)
        if self.python_daemon:
            self.driver_cwd = import_home(self.workdir / ".pyspark-home", spark_home())
        try:
            t0 = time.monotonic()
            self.cluster.start()
            self.timings["cluster_start_s"] = round(time.monotonic() - t0, 2)
            if self.quick_jvm and self.cluster.kind != "docker":  # nodes run their image's JVM: no archive fits
                self.class_path = quick_class_path()
                t0 = time.monotonic()
                # Dumped by a driver of the harness's own cluster (its client classes too); on a cluster the
                # harness does not own, in local mode: that cluster may have no core to spare for it.
                dump_master = self.cluster.master_url if self.cluster.owns_workers else "local[2]"
                self.class_archive = driver_archive(self.java_options, self.class_path, dump_master, self.owned)
                self.timings["class_archive_s"] = round(time.monotonic() - t0, 2)
                t0 = time.monotonic()
                self.executor_archive = executor_archive(self.java_options, self.class_path,
                                                         self.cluster.master_url, self.owned)
                self.timings["executor_archive_s"] = round(time.monotonic() - t0, 2)
            self.eventlog = EventLogServer(self.cluster.host)
            host = self.cluster.host  # where drivers and executors reach this machine (loopback, or a gateway)
            self.channels = Channels(self.toxiproxy, hosts=(host,))
            # Drivers and executors reach the event log only through the source channel's proxy.
            self.source_url = "http://" + self.channels.open("source", urlparse(self.eventlog.url).netloc, host)
            self.boot_spare(Scenario.workers)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.database:
            self.database.stop()
            self.database = None
        if self.channels:
            self.channels.close()
            self.channels = None
        if self.eventlog:
            self.eventlog.close()
            self.eventlog = None
        if self.cluster:
            self.cluster.stop()
        self.owned.stop_all()
        shutil.rmtree(self.tmp, ignore_errors=True)
        shutil.rmtree(self.workdir / "spares", ignore_errors=True)

    def boot_spare(self, cores_max: int, driver: bool = True) -> list[tuple[Spare, str]]:
        """With ``spare``: boot the next trial's first driver now, in the background (chaos/spare.py); with
        ``standby`` too, its first standby beside it (``standby_spares``: on a third core per worker). Its
        session runs at a lower priority until the next trial hands it over; the standby has its JVM, session
        and executors booted by then: what kept a first driver kill waiting.
        ``driver=False``: the standby only (the trial's last driver will be recycled). Returns what it booted."""
        if not self.use_spare or not self.next_trial:
            return []
        settings = {"master": self.cluster.master_url, **self.start_settings(), "cores_max": cores_max}
        booted = []
        if driver and (self.spare is None or not self.spare.group.alive()):
            self.spare = self._boot_one(settings)
            booted.append((self.spare, "driver"))
        if self.standby_spares and (self.standby_spare is None or not self.standby_spare.group.alive()):
            self.standby_spare = self._boot_one({**settings, "role": "standby"})
            booted.append((self.standby_spare, "standby"))
        return booted

    def recycle_driver(self, group: Group, log: Path, grace: float, keep: bool) -> None:
        """Stop a trial's last driver whose driver.json names a ``recycle`` folder: SIGUSR2 stops its query
        and dumps its state as for any driver, then it waits there as a spare instead of exiting
        (chaos.driver.serve). ``keep``: it becomes the next trial's first driver (``self.spare``); else,
        or if it did not get there within ``grace``, its group is killed."""
        folder = recycle_folder(self.workdir / "spares", group.pid)
        for name in ("ready", "listening", "go.json"):  # from its previous recycling
            (folder / name).unlink(missing_ok=True)
        group.signal_leader(signal.SIGUSR2)
        wait_until(lambda: (folder / "ready").exists() or not group.alive(), grace)
        uses = self.recycled.get(group.pid, 0)
        if (keep and group.alive() and (folder / "ready").exists() and self.spare is None
                and uses < MAX_RECYCLED_TRIALS):
            self.recycled[group.pid] = uses + 1
            self.spare = Spare(group, folder, json.loads((folder / "spare.json").read_text()))
            self.spare.adopt_log(log)
            return
        group.kill()
        self.owned.forget(group)

    def start_settings(self) -> dict:
        """How this harness starts every driver (and its executors): what a spare must have booted with."""
        return {"java_options": self.java_options, "class_path": self.class_path,
                "class_archive": str(self.class_archive) if self.class_archive else None,
                "executor_archive": str(self.executor_archive) if self.executor_archive else None,
                "python_daemon": self.python_daemon, "locality_wait": self.locality_wait, "tmp_dir": str(self.tmp),
                "interpreted_sql": self.interpreted_sql, "driver_host": self.cluster.host,
                "cluster_conf": self.cluster.driver_conf or None,
                "worker_cores": self.worker_cores if self.cluster.owns_workers else None}

    @property
    def standby_spares(self) -> bool:
        """Only on the harness's own cluster with a third core per worker: there the standby spare holds
        executors beside this trial's driver and the driver spare. With fewer cores it could take the
        ones the driver spare needs, and hold them, as the next trial's standby, while that trial's
        first driver waits for executors that never come."""
        return self.use_spare and self.standby and self.cluster.owns_workers and self.worker_cores >= 3

    def _boot_one(self, settings: dict) -> Spare:
        self.spares += 1
        return Spare.boot(self.owned, self.workdir / "spares" / f"spare-{self.spares}", settings,
                          driver_argv(), driver_env(), cwd=self.driver_cwd)

    def take_spare(self, config: dict, boot_conf: dict, standby: bool = False) -> Spare | None:
        """The spare (``standby``: the standby spare), if it boots like a cold driver of ``config`` would;
        else stop it (its executors would hold the cores this trial's standby needs)."""
        if standby:
            spare, self.standby_spare = self.standby_spare, None
        else:
            spare, self.spare = self.spare, None
        if spare is None:
            return None
        if spare.fits(config, boot_conf):
            return spare
        spare.group.terminate(5.0)
        self.owned.forget(spare.group)
        return None

    def check_faults(self, scenario: Scenario, pipeline: Pipeline) -> None:
        """Reject faults this cluster or pipeline cannot carry out, before anything starts."""
        validate_schedule(scenario, pipeline)
        for fault in scenario.schedule:
            if fault.target == "worker" and self.cluster.kind != "standalone":
                raise UserError(f"{fault.spec} needs --cluster standalone (the harness's own workers); "
                                "on --cluster docker, kill or pause the whole node: kill-node, pause-node")
            if fault.kind == "partition" and fault.target == "sink-db" and self.cluster.kind != "docker":
                raise UserError(f"{fault.spec} needs --cluster docker (the sink database is then a node of its "
                                "own); here cut the sink channel instead: cut-sink@BATCH:PHASE/10s")
            if fault.target == "node" and self.cluster.kind != "docker":
                raise UserError(f"{fault.spec} needs --cluster docker (nodes are containers; `streamchaos image "
                                "build` makes their image)")
            if fault.target == "executor" and self.cluster_spec.startswith("local["):
                raise UserError(f"{fault.spec}: local mode has no executor processes")

    def _ensure_database(self) -> None:
        if self.database is None:
            t0 = time.monotonic()
            if self.cluster.kind == "docker":  # a node of its own, which a partition can cut off
                from chaos.pgnode import PostgresNode

                self.database = PostgresNode(self.cluster, self.workdir / "postgres").start()
                upstream = f"{self.database.address}:{self.database.port}"
            else:
                self.database = PostgresServer(self.owned, self.workdir / "postgres").start()
                upstream = f"127.0.0.1:{self.database.port}"
            self.timings["database_start_s"] = round(time.monotonic() - t0, 2)
            # The sink reaches the database only through the sink channel's proxy (where nodes reach it too).
            host, port = self.channels.open("sink", upstream, self.cluster.host).rsplit(":", 1)
            self.sink_dsn = PostgresServer.dsn_at(host, int(port))
        elif not self.database.ready():
            self.database.restart()

    def trial(self, scenario: Scenario, run_dir: Path, last: bool = False) -> dict:
        """Run one trial into ``run_dir``; ``last``: no trial follows on this harness (no spare is booted)."""
        self.next_trial = not last
        pipeline = resolve(scenario.pipeline)
        self.check_faults(scenario, pipeline)
        if not self.cluster.healthy():
            self.cluster.heal()
        if pipeline.database:
            self._ensure_database()
        trial = Trial(self, pipeline, scenario, Path(run_dir).resolve())
        try:
            result = trial.run()
        finally:  # the scratch files of this trial's dead drivers (and their executors): a spare stays
            sweep_driver_scratch(self.tmp, {group.pid for group in self.owned.groups})
        # If the trial's tail did not (it drained before its last driver committed).
        self.boot_spare(scenario.workers)
        return result


def driver_argv() -> list[str]:
    return [sys.executable, "-m", "chaos.driver"]


SITE_HOOK = Path(__file__).resolve().parent / "sitehook"  # its sitecustomize: chaos/sitehook/sitecustomize.py


def driver_env() -> dict[str, str]:
    """A driver imports chaos and the user's pipeline module from the harness's working directory. Every
    Python process it starts (its data source planners) runs chaos/sitehook/sitecustomize.py first."""
    env = spark_env()
    env["PYTHONPATH"] = ":".join(p for p in [str(SITE_HOOK), str(Path.cwd()), env.get("PYTHONPATH", "")] if p)
    return env


class Trial:
    def __init__(self, harness: Harness, pipeline: Pipeline, scenario: Scenario, run_dir: Path) -> None:
        self.h = harness
        self.pipeline = pipeline
        self.scenario = scenario
        self.dir = run_dir
        self.driver: Group | None = None
        self.standby: Group | None = None  # booted, waiting for SIGUSR1 (``--standby``), incarnation + 1
        self.next_standby: Group | None = None  # incarnation + 2's, booted while the standby takes over
        self.committed_by = -1  # the last incarnation seen committing a batch
        # A standby costs a second application's driver and executors: only when a driver kill is planned
        # before any upgrade (after one, drivers run another Spark, in local mode: no standby serves them).
        schedule = scenario.schedule
        upgrade = first_upgrade(schedule)
        self.wants_standby = harness.standby and any(
            f.action == "kill-driver" and (upgrade is None or f.point < upgrade.point) for f in schedule)
        self.incarnation = -1
        self.restarts = 0
        self.cores_max: int | None = None  # executor cores of the next applications, after a stop-driver rescale
        self.upgraded: str | None = None  # the PySpark every incarnation runs on after stop-driver/upgrade=V
        self.history: History | None = None
        self.config: dict = {}  # driver.json
        self.spares_booted = False  # the next trial's spares, once per trial (``_keep_spare``)

    # -- set-up -------------------------------------------------------------------------------
    def _prepare(self) -> pl.DataFrame:
        if self.dir.exists():
            shutil.rmtree(self.dir)
        for sub in ("checkpoint", "sink", "logs"):
            (self.dir / sub).mkdir(parents=True)
        self.scenario.save(self.dir / "scenario.json")
        events = self.pipeline.place_events(generate_events(self.scenario), self.scenario.partitions)
        events.write_parquet(self.dir / "events.parquet")
        self.history = History(self.dir / "history.jsonl")
        self.pipeline.prepare_sink(self.dir / "sink")
        if self.pipeline.database:
            self.pipeline.prepare_database(self.h.database.dsn)
        self.h.eventlog.load(events, self.scenario.partitions)
        return events

    def _await_standby(self, detail: dict) -> None:
        """Before a driver kill at a phase where Spark is held (not one the watcher saw in the checkpoint):
        wait until the standby is booted and holds executors with their Python workers (chaos.driver.stand_by),
        so the kill lands at the same logical point and the takeover is measured, not the standby's boot.
        The held driver does nothing meanwhile."""
        standby = self.standby
        if standby is None or detail.get("source") == "watcher":
            return
        incarnation = self.incarnation + 1
        deadline = time.monotonic() + STANDBY_WAIT
        while (incarnation not in self.controller.standby_ready and standby.alive()
               and time.monotonic() < deadline):
            time.sleep(0.05)

    def _spawn_driver(self, incarnation: int, standby: bool = False) -> Group:
        argv = driver_argv() + [str(self.dir), str(incarnation)]
        env, cwd = driver_env(), self.h.driver_cwd
        if self.cores_max is not None:  # rescaled by a stop-driver fault
            argv.append(f"--cores-max={self.cores_max}")
        if self.upgraded is not None:  # another PySpark, in local mode, away from this one's import home
            from chaos.sparkenv import python_for

            python = str(python_for(self.upgraded))
            argv = [python, *argv[1:], "--local"]
            env.update(PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)
            env.pop("SPARK_HOME", None)
            cwd = self.dir
        return self.h.owned.spawn(
            f"driver-{incarnation}",
            argv + ["--standby"] if standby else argv,
            env=env,
            log_path=self.dir / "logs" / f"driver-{incarnation}.log",
            cwd=cwd,
        )

    def _start_driver(self) -> None:
        """The next incarnation: the standby if one is booted and alive, else a cold start."""
        self.incarnation += 1
        self.controller.incarnation = self.incarnation
        stop = self.nemesis.driver_kill
        self.nemesis.driver_kill = None
        why = ""
        if stop is not None and stop.action == "stop-driver":
            why = (f"{stop.spec}: a rescale restarts with other executor cores" if stop.index is not None
                   else f"{stop.spec}: the query resumes on PySpark {stop.upgrade}, in local mode"
                   if stop.upgrade is not None
                   else f"{stop.spec}: a clean stop restarts the query as a new deployment would")
            self.upgraded = stop.upgrade or self.upgraded
            # A rescale: the next application gets other executor cores, so no pre-booted standby serves it.
            if stop.index is not None:
                self.cores_max = stop.index
            if self.standby is not None:
                self.standby.terminate(5.0)
                self.h.owned.forget(self.standby)
                self.standby = None
        standby, self.standby = self.standby, None
        self.standby, self.next_standby = self.next_standby, None  # booted during the downtime, if any
        if standby is not None and standby.alive():
            standby.signal_leader(signal.SIGUSR1)
            self.driver = standby
            self.history.add("driver", event="start", incarnation=self.incarnation, pid=standby.pid, standby=True,
                             driver_start="standby")
            return
        if standby is not None:  # it died while waiting: forget it, start cold
            self.h.owned.forget(standby)
            why = why or "its standby died while waiting"
        spare = self.h.take_spare(self.config, self.pipeline.boot_conf()) if self.incarnation == 0 else None
        if spare is not None:
            self.driver = spare.hand_over(self.dir, self.incarnation)
            spare.link_log(self.dir / "logs" / f"driver-{self.incarnation}.log")
            self.history.add("driver", event="start", incarnation=self.incarnation, pid=self.driver.pid,
                             spare=spare.folder.name,
                             driver_start="recycled" if spare.folder.name.startswith("recycled-") else "spare")
            return
        self.driver = self._spawn_driver(self.incarnation)
        self.history.add("driver", event="start", incarnation=self.incarnation, pid=self.driver.pid,
                         driver_start="cold", why=why or self._cold_reason(),
                         **({"cores_max": self.cores_max} if self.cores_max is not None else {}),
                         **({"spark": self.upgraded} if self.upgraded is not None else {}))

    def _cold_reason(self) -> str:
        """Why this incarnation boots a JVM and a session now (recorded with its start)."""
        if not self.h.standby:
            return "pre-warmed drivers are off (--no-standby)"
        if self.upgraded is not None:
            return f"it runs on PySpark {self.upgraded} after the upgrade: no standby is booted on another Spark"
        if self.incarnation == 0:
            if self.pipeline.boot_conf():
                return "the pipeline sets JVM options at boot (boot_conf): no spare was booted with them"
            if not self.h.use_spare:
                return "a run's first driver: a spare is booted only during a previous trial"
            return "no spare was ready: the run's first trial, or the previous trial ended before booting one"
        if not self.wants_standby:
            return "the schedule kills no driver: no standby was booted"
        return "no standby was ready: one boots only after the active driver's first commit"

    def _keep_standby(self) -> None:
        """Boot the next incarnation ahead: the first beside the first driver, later ones once the active
        driver has committed a batch (not beside its recovery, which it would slow down on 2 cores), and
        only while a driver kill is still ahead: a standby nobody takes over from costs a JVM, a session
        and executors on the 2 cores the trial runs on."""
        if (self.standby is None and self.wants_standby and self.upgraded is None
                and any(f.action == "kill-driver" for f in self.controller.unfired())
                and (self.incarnation == 0 or self.committed_by == self.incarnation)):
            incarnation = self.incarnation + 1
            spare = self.h.take_spare(self.config, self.pipeline.boot_conf(), standby=True) \
                if self.cores_max is None else None
            if spare is not None:  # booted during the previous trial's tail: it only warms up now
                self.standby = spare.hand_over(self.dir, incarnation, standby=True)
                spare.link_log(self.dir / "logs" / f"driver-{incarnation}.log")
                self.history.add("driver", event="standby", incarnation=incarnation, pid=self.standby.pid,
                                 spare=spare.folder.name)
                return
            self.standby = self._spawn_driver(incarnation, standby=True)
            self.history.add("driver", event="standby", incarnation=incarnation, pid=self.standby.pid)

    def _boot_next_standby(self) -> None:
        """At a driver kill that a standby will take over, with another driver kill ahead: boot that one's
        standby now, in the downtime, when the machine has cores to spare (the dead application's, and the
        waiting standby's), rather than after the takeover's first commit, beside the trial's batches: it
        is then warm before the next kill instead of holding it."""
        ends = sorted((f for f in self.controller.unfired() if f.action in ("kill-driver", "stop-driver")),
                      key=lambda f: f.batch)
        if (self.standby is not None and self.standby.alive() and self.next_standby is None
                and self.cores_max is None and self.nemesis.driver_kill is not None
                and self.nemesis.driver_kill.action == "kill-driver"
                and ends and ends[0].action == "kill-driver"):  # a stop-driver first would rescale: no standby
            incarnation = self.incarnation + 2
            self.next_standby = self._spawn_driver(incarnation, standby=True)
            self.history.add("driver", event="standby", incarnation=incarnation, pid=self.next_standby.pid)

    def _keep_spare(self, at_kill: bool = False) -> None:
        """Boot the next trial's spares once this one's last driver runs: no driver kill ahead (nothing else
        will boot), no standby, and the active driver has committed a batch. With a recycled driver (
        ``recycle`` in driver.json: it will be the next trial's first) that is the standby spare only, and
        then already at the last driver kill (``at_kill``, in its downtime): the next trial's first kill
        comes a few batches after its start, and the spare, niced, must be warm by then."""
        if not self.h.use_spare or self.spares_booted:
            return
        recycled = bool(self.config.get("recycle"))
        if at_kill:
            if not recycled:
                return
        elif self.standby is not None or self.committed_by != self.incarnation:
            return
        if any(f.action == "kill-driver" for f in self.controller.unfired()):  # checked last: it runs every 0.1 s
            return
        self.spares_booted = True
        for spare, role in self.h.boot_spare(self.scenario.workers, driver=not recycled):
            self.history.add("driver", event="spare", folder=spare.folder.name, pid=spare.group.pid, role=role)

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> dict:
        events = self._prepare()
        faults = self.scenario.schedule
        checkpoint = self.dir / "checkpoint"
        self.h.channels.reset()
        self.nemesis = Nemesis(self.h.cluster, lambda: self.driver, lambda: self.controller.app_id,
                               checkpoint, self.history, self.h.channels, self.h.database)
        self.controller = Controller(self.history, faults, self.nemesis.fire, host=self.h.cluster.host)
        self.controller.listeners.append(self.nemesis.on_phase)
        feed = SocketFeed(events, self.scenario.events_per_batch) if self.pipeline.socket_feed else None
        if feed is not None:
            self.controller.listeners.append(lambda batch, phase: feed.advance() if phase == "committed" else None)
        self.nemesis.before_driver_kill = self._await_standby
        self.config = {
            "pipeline": self.scenario.pipeline,
            "master": self.h.cluster.master_url,
            "controller": self.controller.address,
            "eventlog": self.h.source_url,
            "checkpoint": str(checkpoint),
            "sink_dir": str(self.dir / "sink"),
            "sink_dsn": self.h.sink_dsn if self.pipeline.database else None,
            "feed": feed.address if feed else None,
            "state_dir": str(self.dir / "state"),
            "oracle_dir": str(self.dir / "oracle") if self.pipeline.spark_oracle else None,
            "oracle_dsn": self.pipeline.oracle_dsn(self.h.database.dsn) if self.pipeline.database else None,
            "events_per_batch": self.scenario.events_per_batch,
            "events": events.height,
            "partitions": self.scenario.partitions,
            "cores_max": self.scenario.workers,
            "query_conf": self.scenario.conf,
            **self.h.start_settings(),
        }
        if self.h.recycle and self.h.next_trial and not self.pipeline.boot_conf():
            self.config["recycle"] = str(self.h.workdir / "spares")  # its last driver may stay (chaos.driver.serve)
        (self.dir / "driver.json").write_text(json.dumps(self.config, indent=2))
        watcher = CheckpointWatcher(checkpoint, self.controller, self.history, events.height, feed)
        started = time.monotonic()
        outcome, reason = "drained", ""
        finished = False
        try:
            watcher.start()
            self._start_driver()
            outcome, reason = self._supervise(watcher)
            self.nemesis.wait_heals()
            if outcome == "drained" and self.pipeline.settle_commits:
                self._settle(watcher)
            finished = True
        except BaseException:
            for group in (self.driver, self.standby, self.next_standby):  # interrupted: the user is waiting
                if group is not None:
                    group.kill()
            raise
        finally:
            self._stop_driver(recycle=finished and outcome == "drained")
            live = [self.h.spare.log] if self.h.spare is not None else []  # a recycled driver's
            for log in (self.dir / "logs").glob("driver-*.log"):
                Spare.keep_log(log, live)
            watcher.stop()
            watcher.scan()
            self.controller.close()
            if feed is not None:
                feed.close()
        seconds = round(time.monotonic() - started, 2)
        if self.pipeline.database:
            if not self.h.database.ready():  # a kill-sink-db whose heal did not run (interrupted trial)
                self.h.database.restart()
            self.pipeline.export_database(self.h.database.dsn, self.dir / "sink")
        freeze(self.dir)  # what the verdict is judged from, whatever reaches the sink later (chaos/evidence.py)
        self.history.close()
        result = summarize(self, events, outcome, reason, seconds)
        write_json(self.dir / "result.json", result)
        return result

    def _supervise(self, watcher: CheckpointWatcher) -> tuple[str, str]:
        timeout = self.scenario.recovery_timeout
        last_progress = time.monotonic()
        booting = not self.controller.booted.is_set()
        unplanned = 0
        while True:
            interrupt.check()
            if watcher.drained.wait(0.1):
                return "drained", ""
            self._keep_standby()
            self._keep_spare()
            if watcher.progress.is_set():
                watcher.progress.clear()
                last_progress = time.monotonic()
                self.committed_by = self.incarnation
            if self.controller.booted.is_set():  # the stall clock runs from the boot of the driver
                self.controller.booted.clear()
                booting, last_progress = False, time.monotonic()
            if time.monotonic() - last_progress > (max(timeout, BOOT_GRACE_S) if booting else timeout):
                return "stalled", f"no batch committed for {timeout:.0f}s"
            if self.driver.alive():
                continue
            rc = self.driver.proc.returncode
            fault = self.nemesis.driver_kill
            self.h.owned.forget(self.driver)
            self.history.add("driver", event="exit", incarnation=self.incarnation, rc=rc,
                             killed_by=fault.spec if fault else None)
            if watcher.drained.is_set():
                return "drained", ""
            if fault is None and rc == REFUSED_RC:
                return "refused", self._refusal()
            if fault is None:
                unplanned += 1
                if unplanned > MAX_UNPLANNED_EXITS:
                    return "failed", f"driver exited {unplanned} times on its own: {self._log_tail()}"
            downtime = fault.duration if (fault and fault.duration is not None) else self.scenario.driver_downtime
            self._boot_next_standby()
            self._keep_spare(at_kill=fault is not None and fault.action == "kill-driver")
            time.sleep(downtime)  # the configured downtime of the crashed host, not a placement guess
            self.restarts += 1
            self.history.add("restart", incarnation=self.incarnation + 1, downtime=downtime)
            self._start_driver()
            booting, last_progress = not self.controller.booted.is_set(), time.monotonic()

    def _settle(self, watcher: CheckpointWatcher) -> None:
        """Stop the drained query, restart it from its checkpoint with every fault disarmed, and let it
        commit ``settle_commits`` more times: what a user's restart after a stop would still deliver."""
        self.controller.disarmed = True
        self._stop_driver()
        before = max(watcher.committed, default=-1)
        self.history.add("settle", incarnation=self.incarnation + 1, commits=self.pipeline.settle_commits)
        self._start_driver()
        wanted = before + self.pipeline.settle_commits
        deadline = time.monotonic() + self.scenario.recovery_timeout
        while (max(watcher.committed, default=-1) < wanted and self.driver.alive()
               and time.monotonic() < deadline):
            interrupt.check()
            time.sleep(0.1)
        self.history.add("settled", incarnation=self.incarnation, last_commit=max(watcher.committed, default=-1),
                         alive=self.driver.alive())

    def _stop_driver(self, recycle: bool = False) -> None:
        """Stop the trial's drivers; ``recycle``: the trial is over and drained, its last driver may stay."""
        for standby in (self.standby, self.next_standby):
            if standby is not None:
                standby.terminate(5.0)
                self.h.owned.forget(standby)
        self.standby = self.next_standby = None
        if self.driver is not None:
            # A stateful pipeline's driver reads the state of every committed batch before it exits. SIGUSR2,
            # not a fault's SIGTERM: it exits without stopping its session, which the group kill ends.
            grace = STOP_GRACE + (STATE_DUMP_GRACE if self.pipeline.state or self.pipeline.spark_oracle else 0.0)
            if self.config.get("recycle") and self.driver.alive():  # it waits as a spare instead of exiting
                # Not after a worker kill: its application may hold fewer executors than a spare would.
                keep = recycle and self.h.cluster.healthy() and self.cores_max is None and self.upgraded is None
                log = self.dir / "logs" / f"driver-{self.incarnation}.log"
                self.h.recycle_driver(self.driver, log, grace, keep)
            else:
                self.driver.terminate(grace, sig=signal.SIGUSR2)
                self.h.owned.forget(self.driver)
            self.driver = None

    def _refusal(self) -> str:
        """Spark's message for a refused configuration variant, as the driver printed it."""
        lines = self._log_lines()
        found = [ln.split("streamchaos: refused: ", 1)[1] for ln in lines if "streamchaos: refused: " in ln]
        return (found or [self._log_tail(lines)])[-1]

    def _log_lines(self) -> list[str]:
        """The current driver incarnation's log, its non-blank lines."""
        log = self.dir / "logs" / f"driver-{self.incarnation}.log"
        return [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()] if log.exists() else []

    def _log_tail(self, lines: list[str] | None = None) -> str:
        lines = self._log_lines() if lines is None else lines
        errors = [ln for ln in lines if "Error" in ln or "Exception" in ln]
        return (errors or lines or ["(empty log)"])[-1][:300]


# -- the summary ---------------------------------------------------------------------------------
def batch_offsets(checkpoint: Path) -> list[dict]:
    """Per committed-or-planned batch: its start and end offsets from the write-ahead log."""
    folder = checkpoint / "offsets"
    names = sorted(int(n.name) for n in folder.iterdir() if n.name.isdigit()) if folder.is_dir() else []
    commits = checkpoint / "commits"
    out, previous = [], None
    for n in names:
        ends = read_offsets_file(str(folder / str(n)))
        end = ends[0] if ends else None
        out.append({"batch": n, "start": previous, "end": end, "committed": (commits / str(n)).exists()})
        previous = end
    return out


def recoveries(records: list[dict]) -> list[dict]:
    """For each driver kill: seconds from the kill to the next committed batch (the restart cost)."""
    out = []
    for i, rec in enumerate(records):
        if rec["kind"] != "fault" or not rec["detail"].get("spec", "").startswith("kill-driver"):
            continue
        nxt = next((r for r in records[i:] if r["kind"] == "phase" and r["phase"] == "committed"), None)
        out.append({"spec": rec["detail"]["spec"], "seconds": round(nxt["t"] - rec["t"], 2) if nxt else None})
    return out


def summarize(trial: Trial, events: pl.DataFrame, outcome: str, reason: str, seconds: float) -> dict:
    records = trial.history.snapshot()
    faults = []
    for armed in trial.controller.armed:
        rec = armed.record
        faults.append({
            "spec": armed.fault.spec,
            "fired": armed.fired and rec.get("detail", {}).get("done", False),
            "batch": armed.fault.batch,
            "phase": armed.fault.phase,
            "t": rec.get("t"),
            "detail": rec.get("detail", {}),
        })
    deliveries = trial.pipeline.read_deliveries(judged_sink(trial.dir))
    offsets = batch_offsets(trial.dir / "checkpoint")
    return {
        "pipeline": trial.scenario.pipeline,
        "guarantee": trial.pipeline.guarantee,
        "events": events.height,
        "batches": len([b for b in offsets if b["committed"]]),
        "restarts": trial.restarts,
        "incarnations": trial.incarnation + 1,
        "outcome": outcome,
        "reason": reason,
        "seconds": seconds,
        "faults": faults,
        "offsets": offsets,
        "deliveries": deliveries.to_dicts() if deliveries is not None else None,
        "phases": sum(1 for r in records if r["kind"] == "phase"),
        "recoveries": recoveries(records),
        # How each incarnation's driver started: "cold" (a JVM and a session booted then, with why),
        # "standby" (a warm standby took over), "spare" or "recycled" (booted ahead, chaos/spare.py).
        "drivers": [{"incarnation": r["detail"]["incarnation"], "driver_start": r["detail"].get("driver_start"),
                     **({"why": r["detail"]["why"]} if r["detail"].get("why") else {}),
                     **({"spark": r["detail"]["spark"]} if r["detail"].get("spark") else {})}
                    for r in records if r["kind"] == "driver" and r["detail"].get("event") == "start"],
        "cluster": trial.h.cluster.describe(),
        # Whether this trial's JVMs booted on the class archives (chaos/jvm/archive.py): None = without.
        "class_archives": {"driver": str(trial.h.class_archive) if trial.h.class_archive else None,
                           "executor": str(trial.h.executor_archive) if trial.h.executor_archive else None},
        "run_dir": str(trial.dir),
        "seed": trial.scenario.seed,
        "spark": spark_version(),  # the PySpark this trial ran on (``streamchaos --spark VERSION``)
    }

