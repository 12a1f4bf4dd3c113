"""What lives across the trials of one run (Jepsen's "db" and the control node's services): owned
processes, the Spark cluster, the event log server behind the source channel, the sink database behind
the sink channel, the class archives every JVM boots on, and the drivers booted ahead (chaos/driver/booted_ahead.py).

``Harness.trial(scenario, run_dir)`` hands one trial to chaos/run/trial.py and keeps what the next trial
can reuse. A harness is a context manager: everything it started is stopped at its exit, and what a
killed harness left is reaped at the next start (chaos/machine/processes.py, chaos/clusters/docker/containers.py).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

from chaos.clusters.base import Cluster
from chaos.clusters.postgres import PostgresServer, credentials, jdbc_driver_jars
from chaos.clusters.registry import make_cluster, reap_every_kind
from chaos.driver.booted_ahead import Spares
from chaos.driver.launch import driver_env
from chaos.driver.pydaemon import import_home
from chaos.driver.spare import Spare
from chaos.errors import UserError
from chaos.machine.java import require_java
from chaos.machine.jvm.archive import archive_path, driver_archive, executor_archive, will_build
from chaos.machine.jvm.unsigned import quick_class_path
from chaos.machine.processes import Owned, reap_orphans
from chaos.machine.spark import QUICK_JVM_OPTIONS, spark_home, sweep_driver_scratch
from chaos.nemesis.channels import Channels
from chaos.run.admission import check_cluster_faults, validate_schedule
from chaos.run.services import TrialServices
from chaos.run.trial import Trial
from chaos.scenario.scenario import Scenario
from chaos.stream.eventlog import EventLogServer
from pipelines_under_test import resolve


class Harness:
    """What lives across the trials of one run: owned processes, the cluster, the event log server."""

    def __init__(self, cluster: str = "standalone", workers: int = 2, workdir: Path | None = None,
                 toxiproxy: str | None = None, standby: bool = True, worker_cores: int | None = None,
                 quick_jvm: bool = True, spare: bool | None = None, quick_python: bool = True,
                 quick_scheduling: bool = True, recycle: bool = True, quick_sql: bool = True,
                 data_dir: Path | None = None, echo: Callable[[str], None] | None = None) -> None:
        self.cluster_spec = cluster
        self.echo = echo or (lambda text: None)  # what the start is doing, for a person waiting (the CLI's stderr)
        self.data_dir = data_dir  # where the trials' directories live, if not in ``workdir`` (Docker nodes mount it)
        # JVM flags of every Spark process started for the trials (chaos.machine.spark.QUICK_JVM_OPTIONS), and
        # the drivers' class archive (chaos/machine/jvm/archive.py), built on the first quick-JVM harness's start.
        self.quick_jvm = quick_jvm
        self.java_options = QUICK_JVM_OPTIONS if quick_jvm else ""
        # Unsigned copies of Spark's signed jars (Janino), first on the class path: archivable
        # (chaos/machine/jvm/unsigned.py).
        self.class_path = ""
        self.class_archive: Path | None = None
        self.executor_archive: Path | None = None  # executors' own (their class path differs)
        # The applications' Python daemons import pyspark from cached bytecode, not pyspark.zip
        # (chaos/driver/pydaemon.py).
        self.python_daemon = "chaos.driver.pydaemon" if quick_python else None
        self.driver_cwd: Path | None = None  # the drivers' working directory (chaos.driver.pydaemon.import_home)
        # Tasks do not wait for a preferred executor (spark.locality.wait 0s instead of 3s): after an executor
        # kill, the state store tasks it held waited 3 s for it, then ran on a survivor anyway. Scheduling only:
        # offers still go to local tasks first, and nothing in a batch's result depends on where it ran.
        self.locality_wait = "0s" if quick_scheduling else None
        # The catalogue's queries run interpreted, not compiled (chaos.driver.process.INTERPRETED_SQL): each driver and
        # executor JVM lives for a few batches of a few hundred rows, and compiling their code costs more CPU
        # than it saves (docs/performance.md). A user's job keeps Spark's defaults (Pipeline.interpreted_sql).
        self.interpreted_sql = quick_sql
        # A pre-warmed standby driver replaces a killed one (chaos/run/standby.py). ``standby=False``: cold restarts.
        self.standby = standby
        # Each trial's first driver boots during the previous trial's tail (chaos/driver/booted_ahead.py); by default
        # with the standby. A run of one trial boots none (``trial(last=True)``).
        spare = standby if spare is None else spare
        # On the harness's own workers an application gets one executor holding all its cores
        # (chaos.driver.process.boot): an executor JVM and its Python daemon less per application, ~0.4 GiB. Each
        # worker has room for one such executor; with a standby and spares, for two, so that the next
        # trial's standby spare holds executors beside this trial's driver and the driver spare and is
        # warm when its trial starts. Cores here are slots (the machine has 2): only the active
        # application's executor works, the others idle.
        self.worker_cores = worker_cores or (2 * workers if standby and spare else workers)
        self.toxiproxy = toxiproxy
        self.workers = workers
        self.workdir = Path(workdir or Path.cwd() / "runs").resolve()
        # The drivers' and executors' temporary files (chaos.machine.spark.scratch_option): emptied at each start
        # (what the JVMs of a killed harness left), removed at the close.
        self.tmp = self.workdir / "tmp"
        self.owned = Owned()
        # With ``spare``: a trial's last driver, unless a fault killed it, stays for the next trial as its
        # first driver (chaos.driver.process.serve): its JVM, session and executors are not booted again.
        self.spares = Spares(self.owned, self.workdir / "spares", enabled=spare, recycle=recycle)
        self.cluster: Cluster | None = None
        self.eventlog: EventLogServer | None = None
        self.channels: Channels | None = None
        self.source_url = ""
        self.database: PostgresServer | None = None  # first trial that needs it (pgnode on docker)
        self.sink_dsn: str | None = None
        self.kafka = None  # the Kafka broker (chaos.clusters.kafka.broker), first trial of a job read through it
        self.plugins = ""  # spark.plugins of every driver booted from now on (chaos.machine.jvm.ReadingBarrier)
        # Jars every driver of this harness adds to its application (spark.jars): PostgreSQL's JDBC driver, and Spark's
        # Kafka connector once a job read through it ran, so the spares booted for the next trials have it too.
        self.jars = ""
        self.timings: dict[str, float] = {}
        self._lock = None  # the open lock file of ``workdir`` (``_claim_workdir``)

    def __enter__(self) -> Harness:
        require_java()
        self.cluster = make_cluster(self.cluster_spec, self.owned, self.workdir / "cluster", self.workers,
                                    worker_cores=self.worker_cores, java_options=self.java_options,
                                    data_dir=self.data_dir or self.workdir)
        self._claim_workdir()  # after the cluster spec is known good: a rejected command writes nothing
        reap_orphans()
        reap_every_kind()  # what a killed harness left: containers and networks of Docker nodes
        credentials()  # before anything starts: every process of the harness reads the database's passfile
        self.workdir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp.mkdir()
        # A previous harness's spare folders (its ``listening`` would let a spare be signalled before it can
        # catch the signal: a second `streamchaos trial` in the same runs/ directory lost its first driver).
        shutil.rmtree(self.spares.folder, ignore_errors=True)
        if self.python_daemon:
            self.driver_cwd = import_home(self.workdir / ".pyspark-home", spark_home())
        self.spares.env, self.spares.cwd = driver_env(), self.driver_cwd
        self.spares.with_standby = self.standby_spares
        try:
            t0 = time.monotonic()
            self.cluster.start()
            self.timings["cluster_start_s"] = round(time.monotonic() - t0, 2)
            if self.quick_jvm and self.cluster.local_jvms:  # nodes and hosts run their own JVMs
                self._build_archives()
            self.eventlog = EventLogServer(self.cluster.host)
            host = self.cluster.host  # where drivers and executors reach this machine (loopback, or a gateway)
            self.channels = Channels(self.toxiproxy, hosts=(host,))
            # Drivers and executors reach the event log only through the source channel's proxy.
            self.source_url = "http://" + self.channels.open("source", urlparse(self.eventlog.url).netloc, host)
            if host == "127.0.0.1":  # drivers on this machine: jars from its cache (nodes and hosts have their own)
                self._add_jars(jdbc_driver_jars(say=self.echo))
            self.boot_spares(Scenario.workers)
        except BaseException:
            self.close()
            raise
        return self

    def _claim_workdir(self) -> None:
        """One harness per directory: its start empties the scratch and spare folders and its cluster writes its
        logs there, so a second run in the same directory at the same time (two ``streamchaos trial`` in one
        ``runs/``) would delete the first one's drivers' files under them. The lock goes with the process (a
        killed harness leaves none held)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        lock = open(self.workdir / ".harness.lock", "a+")  # noqa: SIM115 (held until close)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            other = lock.read().strip() or "?"
            lock.close()
            raise UserError(f"another streamchaos run (pid {other}) is using {self.workdir}: start this one in "
                            "another directory (--keep or --out elsewhere, or another working directory), or wait "
                            "for that one to end") from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        self._lock = lock

    def _build_archives(self) -> None:
        """The drivers' and executors' class archives (chaos/machine/jvm/archive.py): found by their key, or built once
        per machine, which the start says as it happens (about two minutes)."""
        self.class_path = quick_class_path()
        builds = [role for role in ("driver", "executor")
                  if will_build(archive_path(self.java_options, role, self.class_path))]
        if builds:
            self.echo("first run: preparing Spark start-up caches (class archives of the driver and executor "
                      "JVMs), about 2 minutes, once per machine")
        # Dumped by a driver of the harness's own cluster (its client classes too); on a cluster the
        # harness does not own, in local mode: that cluster may have no core to spare for it.
        dump_master = self.cluster.master_url if self.cluster.owns_workers else "local[2]"
        steps = {  # role: (what the start says, how it is built); timed as class_archive_s, executor_archive_s
            "driver": ("the drivers' class archive: a driver runs a small batch and streaming job and dumps the "
                       "classes it loaded", lambda: driver_archive(self.java_options, self.class_path, dump_master,
                                                                   self.owned)),
            "executor": ("the executors' class archive: a one-core application's executor dumps its classes",
                         lambda: executor_archive(self.java_options, self.class_path, self.cluster.master_url,
                                                  self.owned)),
        }
        built = {}
        for role, (what, build) in steps.items():
            t0 = time.monotonic()
            if role in builds:
                self.echo(f"  [{builds.index(role) + 1}/{len(builds)}] {what} ...")
            built[role] = build()
            seconds = round(time.monotonic() - t0, 2)
            self.timings["class_archive_s" if role == "driver" else "executor_archive_s"] = seconds
            if role in builds:
                self.echo(f"        {'done' if built[role] else 'failed (trials run without it)'} in {seconds:.0f}s")
        self.class_archive, self.executor_archive = built["driver"], built["executor"]

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.kafka:
            self.kafka.stop()
            self.kafka = None
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
        shutil.rmtree(self.spares.folder, ignore_errors=True)
        if self._lock is not None:
            self._lock.close()  # the flock goes with it
            self._lock = None

    def boot_spares(self, cores_max: int, driver: bool = True) -> list[tuple[Spare, str]]:
        """The next trial's first driver (and first standby), booted now on this harness's settings."""
        settings = {"master": self.cluster.master_url, **self.start_settings(), "cores_max": cores_max}
        return self.spares.boot(settings, driver=driver)

    def start_settings(self) -> dict:
        """How this harness starts every driver (and its executors): what a spare must have booted with."""
        return {"java_options": self.java_options, "class_path": self.class_path,
                "class_archive": str(self.class_archive) if self.class_archive else None,
                "executor_archive": str(self.executor_archive) if self.executor_archive else None,
                "python_daemon": self.python_daemon, "locality_wait": self.locality_wait, "tmp_dir": str(self.tmp),
                "interpreted_sql": self.interpreted_sql, "driver_host": self.cluster.host,
                "cluster_conf": self.cluster.driver_conf or None,
                "worker_cores": self.worker_cores if self.cluster.owns_workers else None,
                "jars": self.jars or None, "plugins": self.plugins or None}

    @property
    def standby_spares(self) -> bool:
        """Only on the harness's own cluster with a third core per worker: there the standby spare holds
        executors beside this trial's driver and the driver spare. With fewer cores it could take the
        ones the driver spare needs, and hold them, as the next trial's standby, while that trial's
        first driver waits for executors that never come."""
        return self.spares.enabled and self.standby and self.cluster.owns_workers and self.worker_cores >= 3

    def check_faults(self, scenario: Scenario, pipeline) -> None:
        """Reject faults this cluster or pipeline cannot carry out, before anything starts."""
        validate_schedule(scenario, pipeline)
        check_cluster_faults(scenario, self.cluster_spec)
        self.cluster.check(scenario, pipeline)

    def _ensure_database(self) -> None:
        if self.database is None:
            t0 = time.monotonic()
            self.database = self.cluster.sink_database(self.owned, self.workdir / "postgres")
            self.timings["database_start_s"] = round(time.monotonic() - t0, 2)
            # The sink reaches the database only through the sink channel's proxy (where nodes reach it too).
            upstream = f"{self.database.address}:{self.database.port}"
            host, port = self.channels.open("sink", upstream, self.cluster.host).rsplit(":", 1)
            self.sink_dsn = self.database.dsn_via(host, int(port))
        elif not self.database.ready():
            self.database.restart()

    def _add_jars(self, jars: list[Path]) -> None:
        """Jars every driver booted from now on adds to its application (``spark.jars``): the spares too."""
        known = [j for j in self.jars.split(",") if j]
        self.jars = ",".join(known + [str(j) for j in jars if str(j) not in known])

    def _ensure_kafka(self, brokers: int) -> None:
        """The broker (or ``brokers`` brokers) a job's Kafka source reads through Spark's connector: started once,
        kept for every trial that asks for as many."""
        from chaos.clusters.kafka.jars import spark_connector_jars

        if self.kafka is not None and self.kafka.brokers != brokers:
            self.kafka.stop()
            self.kafka = None
        if self.kafka is None:
            t0 = time.monotonic()
            broker = self.cluster.kafka_broker(self.owned, self.workdir, brokers)
            self._add_jars(spark_connector_jars(say=self.echo))  # resolved here, once
            try:
                self.kafka = broker.start(
                    say=self.echo, proxy=lambda name, upstream: self.channels.open(name, upstream, self.cluster.host))
            except BaseException:  # a broker (or the brokers) half started: gone before the error goes on
                broker.stop()
                raise
            self.timings["kafka_start_s"] = round(time.monotonic() - t0, 2)
        elif not self.kafka.ready():
            self.kafka.restart()

    def trial(self, scenario: Scenario, run_dir: Path, last: bool = False) -> dict:
        """Run one trial into ``run_dir``; ``last``: no trial follows on this harness (no spare is booted)."""
        self.spares.next_trial = not last
        pipeline = resolve(scenario.pipeline)
        self.check_faults(scenario, pipeline)
        if not self.cluster.healthy():
            self.cluster.heal()
        if pipeline.database:
            self._ensure_database()
        if pipeline.kafka:
            self._ensure_kafka(scenario.brokers)
        if jars := pipeline.spark_jars(say=self.echo):
            self._add_jars(jars)
        if pipeline.checkpoint_phases or pipeline.task_phases:  # JVM hooks every driver's application must hold
            from chaos.machine.jvm import READING_BARRIER_CLASS, hooks_jar

            self._add_jars([hooks_jar()])
            if pipeline.task_phases:  # a plugin of every application from now on: a no-op for other queries
                self.plugins = READING_BARRIER_CLASS
        services = TrialServices(
            cluster=self.cluster, owned=self.owned, eventlog=self.eventlog, channels=self.channels, spares=self.spares,
            source_url=self.source_url, driver_cwd=self.driver_cwd, standby=self.standby,
            start_settings=self.start_settings(), class_archive=self.class_archive,
            executor_archive=self.executor_archive, boot_spares=self.boot_spares, database=self.database,
            sink_dsn=self.sink_dsn, kafka=self.kafka if pipeline.kafka else None)
        trial = Trial(services, pipeline, scenario, Path(run_dir).resolve())
        try:
            result = trial.run()
        finally:  # the scratch files of this trial's dead drivers (and their executors): a spare stays
            sweep_driver_scratch(self.tmp, {group.pid for group in self.owned.groups})
        # If the trial's tail did not (it drained before its last driver committed).
        self.boot_spares(scenario.workers)
        return result
