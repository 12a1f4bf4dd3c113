"""One trial: scenario in, stored run directory out (scenario, events, history, sink, result).

The loop is Jepsen's: start the pipeline's driver, let the controller fire each fault at its
(batch, phase), restart a killed driver from the same checkpoint after its downtime (a warm standby
takes over where one is booted: chaos/run/standby.py), heal every fault, then drain (wait until a
committed batch covers the whole input) or give up after the recovery timeout (``stalled``). The
runner decides no verdict; it records what happened.

Run directory::

    scenario.json   the replayable scenario      events.parquet  the input stream
    driver.json     the driver's configuration   history.jsonl   the timeline
    checkpoint/     Spark's checkpoint           sink/           the sink's files
    logs/           driver-<k>.log per incarnation
    state/<N>.parquet  the state store at committed batch N (stateful pipelines, for the consistent cut)
    frozen/         the sink as the trial ended it, which the verdict is judged from (chaos/store/evidence.py)
    result.json     the summary other tools read (``Trial.summary``)
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import time
from pathlib import Path

import polars as pl

from chaos.driver.launch import driver_argv, driver_env
from chaos.driver.spare import Spare
from chaos.errors import HarnessError, UserError
from chaos.machine import interrupt
from chaos.machine.processes import Group
from chaos.machine.spark_versions import current_version as spark_version
from chaos.nemesis.actions import DECOMMISSION_CONF, Nemesis
from chaos.nemesis.controller import Controller, History
from chaos.run.admission import first_upgrade
from chaos.run.services import TrialServices
from chaos.run.standby import Standbys
from chaos.run.topics import TrialTopics, grown_layout, grown_partitions
from chaos.run.watcher import CheckpointWatcher
from chaos.scenario.scenario import Scenario, generate_events
from chaos.scenario.variants import JOB_ERROR, JOB_ERROR_RC, REFUSED_RC
from chaos.store.atomic import write_json
from chaos.store.checkpoint import offset_counts, unfinished_first_offsets
from chaos.store.evidence import freeze, judged_sink
from chaos.store.result import batch_offsets, recoveries
from chaos.stream.socketfeed import SocketFeed
from pipelines_under_test import Pipeline

MAX_UNPLANNED_EXITS = 2
STOP_GRACE = 30.0
STATE_DUMP_GRACE = 120.0
ORACLE_GRACE = 600.0  # a job's stop waits this long for Spark's answer (up to 3 runs: chaos.jobs.as_written)
# Until a started driver reports its session up, the stall clock allows at least this long: a boot on a loaded
# machine or on Docker nodes can outlast a short --recovery-timeout, which is about commits, not boots.
BOOT_GRACE_S = 120.0
DISK_FULL_BYTES = 1 << 20  # less than this free where the trial runs: its writes fail, whatever the logs say
DISK_CHECK_S = 3.0  # no commit for this long on a full disk: the trial stops then, not at the recovery timeout


class Trial:
    """One trial on a harness: its drivers' incarnations, the faults at their points, the drain."""

    def __init__(self, harness: TrialServices, pipeline: Pipeline, scenario: Scenario, run_dir: Path) -> None:
        self.h = harness
        self.pipeline = pipeline
        self.scenario = scenario
        self.dir = run_dir
        self.driver: Group | None = None
        self.committed_by = -1  # the last incarnation seen committing a batch
        # A standby costs a second application's driver and executors: only when a driver kill is planned
        # before any upgrade (after one, drivers run another Spark, in local mode: no standby serves them).
        upgrade = first_upgrade(scenario.faults)
        self.standbys = Standbys(self, wanted=harness.standby and any(
            f.action == "kill-driver" and (upgrade is None or f.point < upgrade.point) for f in scenario.faults))
        self.incarnation = -1
        self.exit_recorded = -1  # the last incarnation whose exit the history holds
        self.restarts = 0
        self.cores_max: int | None = None  # executor cores of the next applications, after a stop-driver rescale
        self.upgraded: str | None = None  # the PySpark every incarnation runs on after stop-driver/upgrade=V
        self.history: History | None = None
        self.config: dict = {}  # driver.json
        self.kafka_topic: str | None = None  # the trial's topic on the harness's broker (a job read through it)
        self.topics: TrialTopics | None = None

    # -- set-up -------------------------------------------------------------------------------
    def _prepare(self) -> pl.DataFrame:
        if self.dir.exists():
            shutil.rmtree(self.dir)
        for sub in ("checkpoint", "sink", "logs"):
            (self.dir / sub).mkdir(parents=True)
        self.scenario.save(self.dir / "scenario.json")
        events = grown_layout(self.pipeline.place_events(generate_events(self.scenario), self.scenario.partitions),
                              self.scenario.partitions, self.scenario.faults, self.scenario.events_per_batch)
        events.write_parquet(self.dir / "events.parquet")
        self.history = History(self.dir / "history.jsonl")
        self.pipeline.prepare_sink(self.dir / "sink")
        if self.pipeline.database:
            self.pipeline.prepare_database(self.h.database.dsn)
        self.h.eventlog.load(events, grown_partitions(self.scenario.partitions, self.scenario.faults))
        if self.h.kafka is not None:
            self.topics = TrialTopics(self.h.kafka, self.dir, self.pipeline, self.history)
            self.topics.make(events, self.scenario.partitions, self.scenario.events_per_batch, self.scenario.faults)
            self.kafka_topic = self.topics.topic
        return events

    def spawn_driver(self, incarnation: int, standby: bool = False) -> Group:
        argv = driver_argv() + [str(self.dir), str(incarnation)]
        env, cwd = driver_env(), self.h.driver_cwd
        if self.cores_max is not None:  # rescaled by a stop-driver fault
            argv.append(f"--cores-max={self.cores_max}")
        if self.upgraded is not None:  # another PySpark, in local mode, away from this one's import home
            from chaos.machine.spark_versions import python_for

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
        self.controller.running.clear()
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
            self.standbys.drop()
        standby, died = self.standbys.take_over()
        if standby is not None:
            self.driver = standby
            self.history.add("driver", event="start", incarnation=self.incarnation, pid=standby.pid, standby=True,
                             driver_start="standby")
            return
        why = why or died
        spare = self.h.spares.take(self.config, self.pipeline.boot_conf()) if self.incarnation == 0 else None
        if spare is not None:
            self.driver = spare.hand_over(self.dir, self.incarnation)
            spare.link_log(self.dir / "logs" / f"driver-{self.incarnation}.log")
            self.history.add("driver", event="start", incarnation=self.incarnation, pid=self.driver.pid,
                             spare=spare.folder.name,
                             driver_start="recycled" if spare.folder.name.startswith("recycled-") else "spare")
            return
        self.driver = self.spawn_driver(self.incarnation)
        self.history.add("driver", event="start", incarnation=self.incarnation, pid=self.driver.pid,
                         driver_start="cold", why=why or self.standbys.cold_reason(),
                         **({"cores_max": self.cores_max} if self.cores_max is not None else {}),
                         **({"spark": self.upgraded} if self.upgraded is not None else {}))

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> dict:
        events = self._prepare()
        faults = self.scenario.faults
        checkpoint = self.dir / "checkpoint"
        self.h.channels.reset()
        self.nemesis = Nemesis(self.h.cluster, lambda: self.driver, lambda: self.controller.app_id,
                               checkpoint, self.history, self.h.channels, self.h.database, self.h.kafka)
        self.nemesis.kafka_topic, self.nemesis.batch_records = self.kafka_topic, self.scenario.events_per_batch
        self.nemesis.grow_topic = self.topics.grow if self.topics is not None else None
        if self.pipeline.kafka:  # its source (and Kafka sink) channel is the broker's listener, not the event log's
            self.nemesis.channel_routes = {c: self.h.kafka.proxies(c) for c in ("source", "sink")}
        self.controller = Controller(self.history, faults, self.nemesis.fire, host=self.h.cluster.host,
                                     peers=self.h.cluster.peers_in_reports,
                                     executor_phases=self.pipeline.executor_phases,
                                     checkpoint=checkpoint)
        self.controller.listeners.append(self.nemesis.on_phase)
        feed = SocketFeed(events, self.scenario.events_per_batch) if self.pipeline.socket_feed else None
        for fed in (feed, self.topics and self.topics.feed):
            if fed is not None:
                self.controller.listeners.append(lambda batch, phase, fed=fed: fed.advance()
                                                 if phase == "committed" else None)
        self.nemesis.before_driver_kill = self.standbys.await_ready
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
            # The job's connections go through the source and sink channels' proxies (chaos.clusters.kafka.broker).
            "kafka": {"bootstrap": self.h.kafka.source_bootstrap, "sink_bootstrap": self.h.kafka.sink_bootstrap,
                      "topic": self.kafka_topic, "login": self.h.kafka.login_file,
                      "output": self.topics.output, "version": self.h.kafka.version,
                      "max_offsets": self.scenario.events_per_batch} if self.kafka_topic else None,
            **self.h.start_settings,
        }
        if any(f.kind == "decommission" for f in faults):  # two 1-core executors: one has a peer to migrate to
            self.config["spark_conf"] = {**(self.config.get("spark_conf") or {}), **DECOMMISSION_CONF}
        spares = self.h.spares
        # A driver booted with settings of its own (decommission) would bring them to the next trial: not recycled.
        if spares.recycle and spares.next_trial and not self.pipeline.boot_conf() and not self.config.get("spark_conf"):
            self.config["recycle"] = str(spares.folder)  # its last driver may stay (chaos.driver.process.serve)
        (self.dir / "driver.json").write_text(json.dumps(self.config, indent=2))
        watcher = CheckpointWatcher(checkpoint, self.controller, self.history, events.height, feed,
                                    self.pipeline.drain_commits)
        started = time.monotonic()
        outcome, reason = "drained", ""
        finished = False
        try:
            watcher.start()
            self._start_driver()
            self.controller.start_clock()
            outcome, reason = self._supervise(watcher)
            if outcome == "drained" and (self.pipeline.spark_oracle or self.pipeline.state):
                self._driver_for_the_answer()
            self.nemesis.wait_heals()
            if outcome == "drained" and self.pipeline.settle_commits:
                self._settle(watcher)
            finished = True
        except BaseException:
            if self.driver is not None:  # interrupted: the user is waiting
                self.driver.kill()
            self.standbys.kill()
            raise
        finally:
            self._stop_driver(recycle=finished and outcome == "drained")
            for log in (self.dir / "logs").glob("driver-*.log"):
                Spare.keep_log(log, self.h.spares.live_logs())
            watcher.stop()
            watcher.scan()
            self.controller.close()
            if feed is not None:
                feed.close()
            if self.topics is not None:
                self.topics.end(export=finished)
        seconds = round(time.monotonic() - started, 2)
        lost = self.h.cluster.lost()
        if lost:
            raise HarnessError(lost)
        if self.topics is not None:
            self.topics.raise_feed_error()
        if finished and outcome == "drained" and self.pipeline.spark_oracle \
                and not (self.dir / "oracle" / "meta.json").exists():
            raise HarnessError(f"Spark's answer for {self.dir} (the job over every record) did not finish in "
                               f"{ORACLE_GRACE + STOP_GRACE:.0f}s: see its last driver log in {self.dir / 'logs'}")
        if self.pipeline.database:
            if not self.h.database.ready():  # a kill-sink-db whose heal did not run (interrupted trial)
                self.h.database.restart()
            self.pipeline.export_database(self.h.database.dsn, self.dir / "sink")
        freeze(self.dir)  # what the verdict is judged from, whatever reaches the sink later (chaos/store/evidence.py)
        self.history.close()
        self.history.raise_write_error()
        if outcome in ("stalled", "failed"):
            self._raise_if_disk_full()
        result = self.summary(events, outcome, reason, seconds)
        write_json(self.dir / "result.json", result)
        return result

    def _supervise(self, watcher: CheckpointWatcher) -> tuple[str, str]:
        timeout = self.scenario.recovery_timeout
        last_progress = time.monotonic()
        booting = not self.controller.booted.is_set()
        unplanned = 0
        while True:
            interrupt.check()
            if watcher.drained.wait(0.1) or self._finished_all(watcher.total):
                return "drained", ""
            self.standbys.keep()
            self.standbys.keep_spares()
            if watcher.progress.is_set():
                watcher.progress.clear()
                last_progress = time.monotonic()
                self.committed_by = self.incarnation
            if self.controller.booted.is_set():  # the stall clock runs from the boot of the driver
                self.controller.booted.clear()
                booting, last_progress = False, time.monotonic()
            idle = time.monotonic() - last_progress
            if idle > (max(timeout, BOOT_GRACE_S) if booting else timeout):
                unsent = self.topics.unsent() if self.topics is not None else None
                return "stalled", f"no batch committed for {timeout:.0f}s" + (f"; {unsent}" if unsent else "")
            if idle > DISK_CHECK_S and shutil.disk_usage(self.dir).free < DISK_FULL_BYTES:
                return "stalled", "the disk is full"  # no need to wait out the timeout: _raise_if_disk_full names it
            if self.driver.alive():
                continue
            rc = self.driver.proc.returncode
            fault = self.nemesis.driver_kill
            self._exited(rc, fault)
            if watcher.drained.is_set():
                return "drained", ""
            if fault is None and rc == REFUSED_RC:
                return "refused", self._refusal()
            if fault is None and rc == JOB_ERROR_RC:  # the job cannot start: the user's to fix, not a verdict
                said = [ln for ln in self._log_lines() if ln.startswith(JOB_ERROR)]
                raise UserError((said[-1].removeprefix(JOB_ERROR) if said else self._log_tail())
                                + f" (its output: {self.dir / 'logs'})")
            if fault is None:
                unplanned += 1
                if unplanned > MAX_UNPLANNED_EXITS:
                    return "failed", f"driver exited {unplanned} times on its own: {self._log_tail()}"
            downtime = fault.duration if (fault and fault.duration is not None) else self.scenario.driver_downtime
            self.standbys.boot_next()
            self.standbys.keep_spares(at_kill=fault is not None and fault.action == "kill-driver")
            time.sleep(downtime)  # the configured downtime of the crashed host, not a placement guess
            self.restarts += 1
            self.history.add("restart", incarnation=self.incarnation + 1, downtime=downtime)
            self._start_driver()
            booting, last_progress = not self.controller.booted.is_set(), time.monotonic()

    def _finished_all(self, total: int) -> bool:
        """A running query told the harness it finished a batch that read every event, though its checkpoint need
        not say so yet (asynchronous progress tracking writes it at most once an interval). Its first source, as
        the watcher reads offsets/N."""
        ends = self.controller.finished_ends
        if not ends:
            return False
        counts = offset_counts(json.loads(ends[0]) if isinstance(ends[0], str) else ends[0])
        return counts is not None and sum(int(v) for v in counts.values()) >= total

    def _exited(self, rc: int | None, fault) -> None:
        self.h.owned.forget(self.driver)
        self.history.add("driver", event="exit", incarnation=self.incarnation, rc=rc,
                         killed_by=fault.spec if fault else None)
        self.exit_recorded = self.incarnation

    def _driver_for_the_answer(self) -> None:
        """The last driver's stop writes the oracle and the state, so it must be running its query when the
        stream drains. A fault that killed the driver as the last batch committed (a kill at a time can land
        there) leaves none: one more resumes the drained query from its checkpoint, every fault disarmed; one
        that was still booting is waited for."""
        self.controller.disarmed = True
        if not self.driver.alive():
            if self.exit_recorded != self.incarnation:
                self._exited(self.driver.proc.returncode, self.nemesis.driver_kill)
            self.history.add("restart", incarnation=self.incarnation + 1, downtime=0, why="drained: the answer")
            self._start_driver()
        deadline = time.monotonic() + self.scenario.recovery_timeout
        while not self.controller.running.wait(0.1) and self.driver.alive() and time.monotonic() < deadline:
            interrupt.check()

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
        self.standbys.drop()
        if self.driver is not None:
            # A stateful pipeline's driver reads the state of every committed batch before it exits. SIGUSR2,
            # not a fault's SIGTERM: it exits without stopping its session, which the group kill ends.
            grace = STOP_GRACE + (ORACLE_GRACE if self.pipeline.spark_oracle else
                                  STATE_DUMP_GRACE if self.pipeline.state else 0.0)
            if self.config.get("recycle") and self.driver.alive():  # it waits as a spare instead of exiting
                # Not after a worker kill: its application may hold fewer executors than a spare would.
                keep = recycle and self.h.cluster.healthy() and self.cores_max is None and self.upgraded is None
                log = self.dir / "logs" / f"driver-{self.incarnation}.log"
                self.h.spares.recycle_driver(self.driver, log, grace, keep)
            else:
                self.driver.terminate(grace, sig=signal.SIGUSR2)
                self.h.owned.forget(self.driver)
            self.driver = None

    def summary(self, events: pl.DataFrame, outcome: str, reason: str, seconds: float) -> dict:
        """result.json: what happened, in numbers other tools read (the campaign, the report, benchmarks);
        the runner decides no verdict (properties/ does, from the stored run)."""
        records = self.history.snapshot()
        faults = []
        for armed in self.controller.armed:
            rec = armed.record
            faults.append({
                "spec": armed.fault.spec,
                "fired": armed.fired and rec.get("detail", {}).get("done", False),
                # A fault at a time: where the stream was when it fired (None: before any phase).
                "batch": rec.get("batch") if armed.fault.timed else armed.fault.batch,
                "phase": rec.get("phase") if armed.fault.timed else armed.fault.phase,
                "t": rec.get("t"),
                "detail": rec.get("detail", {}),
            })
        deliveries = self.pipeline.read_deliveries(judged_sink(self.dir))
        offsets = batch_offsets(self.dir / "checkpoint", self.history.records)
        return {
            "pipeline": self.scenario.pipeline,
            "guarantee": self.pipeline.guarantee,
            "events": events.height,
            "batches": len([b for b in offsets if b["committed"]]),
            "restarts": self.restarts,
            "incarnations": self.incarnation + 1,
            "outcome": outcome,
            "reason": reason,
            "seconds": seconds,
            "faults": faults,
            "offsets": offsets,
            "deliveries": deliveries.to_dicts() if deliveries is not None else None,
            "phases": sum(1 for r in records if r["kind"] == "phase"),
            "recoveries": recoveries(records),
            # How each incarnation's driver started: "cold" (a JVM and a session booted then, with why),
            # "standby" (a warm standby took over), "spare" or "recycled" (booted ahead, chaos/driver/spare.py).
            "drivers": [{"incarnation": r["detail"]["incarnation"], "driver_start": r["detail"].get("driver_start"),
                         **({"why": r["detail"]["why"]} if r["detail"].get("why") else {}),
                         **({"spark": r["detail"]["spark"]} if r["detail"].get("spark") else {})}
                        for r in records if r["kind"] == "driver" and r["detail"].get("event") == "start"],
            "cluster": self.h.cluster.describe(),
            # Whether this trial's JVMs booted on the class archives (chaos/machine/jvm/archive.py): None = without.
            "class_archives": {"driver": str(self.h.class_archive) if self.h.class_archive else None,
                               "executor": str(self.h.executor_archive) if self.h.executor_archive else None},
            "run_dir": str(self.dir),
            "seed": self.scenario.seed,
            "spark": spark_version(),  # the PySpark this trial ran on (``streamchaos --spark VERSION``)
            "source": self._source(),
        }

    def _source(self) -> dict | None:
        """For a user's job that reads Kafka: which source ran (``connector``: Spark's Kafka connector on the trial's
        topic, with the options the harness set; ``stand-in``), None for every other pipeline."""
        kafka = getattr(getattr(self.pipeline, "spec", None), "kafka", "")
        if not kafka:
            return None
        if kafka != "connector":
            return {"via": "stand-in"}
        written = self.dir / "source.json"
        found = json.loads(written.read_text()) if written.exists() else {"via": "connector", "topic": self.kafka_topic}
        from chaos.clusters.kafka.jars import connector

        return {**found, "connector": str(connector(spark_version())), "bootstrap": self.h.kafka.source_bootstrap}

    def _raise_if_disk_full(self) -> None:
        """A trial a full disk stopped says nothing of the pipeline: Spark fails its checkpoint or sink writes,
        the query stalls or its driver exits, while the harness's own small writes may still fit. The drivers'
        logs hold Java's or Python's ENOSPC message (or the disk has next to nothing free): the trial ends as the
        harness's failure, named by chaos.campaign.runner and the CLI, not as a stalled pipeline."""
        if shutil.disk_usage(self.dir).free < DISK_FULL_BYTES or any(
                "No space left on device" in log.read_text(errors="replace")
                for log in (self.dir / "logs").glob("*.log")):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.dir))

    def _refusal(self) -> str:
        """Spark's message for a refused configuration variant, as the driver printed it."""
        lines = self._log_lines()
        found = [ln.split("streamchaos: refused: ", 1)[1] for ln in lines if "streamchaos: refused: " in ln]
        message = (found or [self._log_tail(lines)])[-1]
        left = "STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY" in message and unfinished_first_offsets(
            self.dir / "checkpoint")
        if left:  # Spark's leftover, not the configuration's
            return (f"Spark refuses every restart: the killed driver left {', '.join(left)} in offsets/, a write of "
                    f"offsets/0 it never finished (a Spark 4.1+ bug: docs/findings/003). {message}")
        return message

    def _log_lines(self) -> list[str]:
        """The current driver incarnation's log, its non-blank lines."""
        log = self.dir / "logs" / f"driver-{self.incarnation}.log"
        return [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()] if log.exists() else []

    def _log_tail(self, lines: list[str] | None = None) -> str:
        lines = self._log_lines() if lines is None else lines
        failed = [ln for ln in lines if ln.startswith("streamchaos: query failed: ")]  # the query's own words
        if failed:
            return failed[-1].removeprefix("streamchaos: ")[:300]
        errors = [ln for ln in lines if ("Error" in ln or "Exception" in ln)  # the message, not a stack frame
                  and not ln.lstrip().startswith(("at ", "... "))]
        return (errors or lines or ["(empty log)"])[-1][:300]
