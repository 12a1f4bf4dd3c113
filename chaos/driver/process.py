"""The driver process of a trial (Jepsen's "client"): ``python -m chaos.driver.process RUN_DIR INCARNATION``.

One incarnation = one process group (this Python, its JVM, the JVM's Python workers), so killing
the driver kills all of it, as losing the driver's host would. Each incarnation restarts the query
from the same checkpoint: Spark re-runs the last batch that has offsets/N but no commits/N.

Start-up is split in two steps, ``boot`` (JVM + SparkSession, the slow part) and ``run`` (start the
query). ``--standby`` boots, warms its executors and then waits for SIGUSR1: the
harness keeps one such pre-warmed driver (with its own application and, where the workers have cores
to spare, its own executors) and wakes it when the active one dies, like Flink's standby JobManager.
It then does exactly what a cold restart does: start the query from the same checkpoint.
``--spare SPARE_DIR`` is the same idea one step earlier: a driver booted for no trial yet (the
harness's JVM settings only), its executors' Python workers warmed, waiting for SIGUSR1 and then
``SPARE_DIR/go.json`` naming the run directory and incarnation it becomes: the next trial's first
driver, booted during the previous trial's tail. Only pipelines that set no JVM conf at boot
(``boot_conf``) can take one; the harness checks that before it hands a trial over.
A trial's last driver is recycled the same way when the driver.json names a ``recycle`` folder: at the
harness's stop (SIGUSR2) it stops the query, dumps the state and, instead of exiting, waits in
``<recycle>/recycled-<pid>`` as the next trial's first driver, which it runs in a fresh session of the
same application (its JVM, executors and Python workers warm): only what a fault killed is booted again.
SIGTERM stops the query cleanly (used after the input is drained).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
import traceback
from contextlib import ExitStack
from pathlib import Path

from chaos.driver.jvm_options import EXECUTOR_CLASS_PATH, class_path_first, driver_java_options, executor_java_options
from chaos.errors import UserError
from chaos.jobs import delta_tables
from chaos.jobs.chains import READING_KEYS, finish_available, stop_side_queries, stopped_feeder
from chaos.machine.spark import driver_scratch
from chaos.nemesis import barrier
from chaos.scenario.variants import JOB_ERROR, JOB_ERROR_RC, REFUSED_RC, raised_for_the_job
from chaos.store.atomic import write_json


def boot(config: dict, incarnation: int = 0):
    """JVM + SparkSession for ``config`` (a spare's config names no pipeline: the harness's settings only)."""
    from pyspark.sql import SparkSession

    from chaos.stream.source import EventLogSource, WarmSource
    from pipelines_under_test import resolve

    pipeline = config.get("pipeline")
    if python := (config.get("cluster_conf") or {}).get("spark.pyspark.python"):
        # PySpark takes its workers' Python from this variable only (a cluster of hosts: its venv's path, which
        # this machine links to its own Python, chaos.clusters.ssh.shipping.link_python).
        os.environ["PYSPARK_PYTHON"] = python
    if config.get("tmp_dir"):  # this driver's own part of the harness's scratch directory
        scratch = driver_scratch(config["tmp_dir"], os.getpid())
        scratch.mkdir(parents=True, exist_ok=True)
        config = {**config, "tmp_dir": str(scratch)}
    builder = (
        SparkSession.builder.master(config["master"])
        .appName(f"streamchaos-{pipeline or 'spare'}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # progress bars in the driver logs are noise
        .config("spark.driver.host", config.get("driver_host") or "127.0.0.1")  # chaos.clusters.base.Cluster.host
        .config("spark.driver.bindAddress", config.get("driver_host") or "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(config.get("shuffle_partitions", 2)))
        .config("spark.executor.memory", config.get("executor_memory", "512m"))
        .config("spark.driver.memory", config.get("driver_memory", "1g"))
        .config("spark.driver.extraJavaOptions", driver_java_options(config))
        .config("spark.sql.streaming.stopTimeout", "30s")
        # A Python worker per task, forked from its daemon (which has imported everything ahead,
        # chaos/driver/pydaemon.py), not kept idle after it: each idle worker's copy-on-write pages count in full
        # in its RSS, and the idle workers of the standby's executor and of every application's data source
        # planners were ~0.6 GiB of a trial's 3.5 GiB (benchmarks/throughput.py; ~2 s slower trial).
        .config("spark.python.worker.reuse", "false")
        # For JVM-side phase barriers (the file sink's commit protocol).
        .config("spark.streamchaos.controller", config["controller"])
        .config("spark.streamchaos.incarnation", str(incarnation))
    )
    if config.get("cores_max"):
        builder = builder.config("spark.cores.max", str(config["cores_max"]))
        if config["cores_max"] <= (config.get("worker_cores") or 0):
            # The harness's own workers: one executor with all the application's cores instead of one
            # 1-core executor per worker (one JVM and one Python daemon, ~0.4 GiB, less per application).
            builder = builder.config("spark.executor.cores", str(config["cores_max"]))
    if config.get("tmp_dir"):  # the driver's block manager and pyspark's files: gone with the driver
        builder = builder.config("spark.local.dir", config["tmp_dir"])
    if config.get("python_daemon"):  # chaos/driver/pydaemon.py: pyspark from cached bytecode in every daemon
        builder = builder.config("spark.python.daemon.module", config["python_daemon"])
    for key, value in (config.get("cluster_conf") or {}).items():  # chaos.clusters.base.Cluster.driver_conf
        builder = builder.config(key, value)
    if config.get("interpreted_sql"):  # Harness(quick_sql=True)
        for key, value in INTERPRETED_SQL.items():
            builder = builder.config(key, value[0])
    if config.get("locality_wait"):  # Harness(quick_scheduling=True)
        builder = builder.config("spark.locality.wait", config["locality_wait"])
    if executor_java_options(config):
        builder = builder.config("spark.executor.extraJavaOptions", executor_java_options(config))
    if config.get("jars"):  # the harness's (Spark's Kafka connector): executors fetch them from the driver
        builder = builder.config("spark.jars", config["jars"])
    if config.get("plugins"):  # chaos/machine/jvm/ReadingBarrier.java, from those jars
        builder = builder.config("spark.plugins", config["plugins"])
    # The pipeline's JVM settings (class path of its hooks) must be there before the JVM starts.
    boot_conf = resolve(pipeline).boot_conf() if pipeline else {}
    executors = (config.get("cluster_conf") or {}).get(EXECUTOR_CLASS_PATH)
    if executors and EXECUTOR_CLASS_PATH in boot_conf:  # hosts: their copy of the hooks, not this machine's
        boot_conf = {**boot_conf, EXECUTOR_CLASS_PATH: executors}
    for key, value in class_path_first(config.get("class_path") or "",
                                       {**boot_conf, **(config.get("spark_conf") or {})}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    print(f"streamchaos: Spark {spark.version} ({spark.sparkContext.master})", flush=True)
    spark.dataSource.register(EventLogSource)
    spark.dataSource.register(WarmSource)
    return spark


def make_source(spark, config: dict):
    """The streaming DataFrame of the harness's event log (its schema comes from a Python worker)."""
    from chaos.stream.source import SOURCE_NAME

    return (
        spark.readStream.format(SOURCE_NAME)
        .option("eventlog", config["eventlog"])
        .option("controller", config["controller"])
        .option("checkpoint", config["checkpoint"])
        .option("maxRowsPerBatch", str(config["events_per_batch"]))
        .load()
    )


def warm_up(spark, wait: float = 15.0, read: bool = True, until=lambda: False) -> bool:
    """Wait for this application's executors and (``read``) start their Python workers ahead.

    A task's first Python worker costs a daemon and its imports (chaos/driver/pydaemon.py); the daemon warmed
    here forks the query's reader tasks' workers. It must be started by a Python data source read
    (``chaos.stream.source.WarmSource``): Spark keys its daemons by the workers' environment, and an RDD job
    gets another daemon than the query's reads. On a cluster without spare cores the application gets
    no executors before the active driver dies: then nothing is warmed (a job would wait until then).
    """
    from chaos.stream.source import WARM_SOURCE_NAME

    sc = spark.sparkContext

    def executors() -> int:  # block managers known to the driver, its own included
        return sc._jsc.sc().getExecutorMemoryStatus().size() - 1

    deadline = time.monotonic() + wait
    while executors() < 1 and time.monotonic() < deadline and not until():
        time.sleep(0.2)
    if executors() < 1:
        return False
    if read:
        slots = max(2, sc.defaultParallelism)
        spark.read.format(WARM_SOURCE_NAME).option("partitions", str(slots * 2)).load().collect()
    return True


def checkpoint_barrier(spark, phases: tuple[str, ...], config: dict, incarnation: int) -> None:
    """The query's checkpoint files through chaos/machine/jvm/CheckpointBarrier.java, which reports ``phases`` of
    the trial's checkpoint (session settings: Spark copies them into the Hadoop configuration it hands the class)."""
    from chaos.machine.jvm import checkpoint_barrier_conf

    for key, value in checkpoint_barrier_conf(config["controller"], incarnation, phases, config["checkpoint"]).items():
        spark.conf.set(key, value)


def tell(spark, config: dict, event: str, incarnation: int, **detail) -> None:
    """A driver event for the harness's controller (recorded in the history)."""
    host, port = config["controller"].rsplit(":", 1)
    barrier.request(host, int(port), {"type": "driver", "event": event, "incarnation": incarnation,
                                      "app_id": spark.sparkContext.applicationId, "pid": os.getpid(), **detail})


def tell_progress(spark, config: dict, incarnation: int, query, told: int) -> int:
    """Under asynchronous progress tracking Spark writes ``offsets/N`` and ``commits/N`` at most once an interval
    (``asyncProgressTrackingCheckpointIntervalMs``), and never for the last batches of a query that then has no
    input: the checkpoint cannot tell the harness that the input was read. The driver tells it each batch the
    query finished (its progress report's end offsets); the last batch told."""
    progress = query.lastProgress
    if not progress or progress.get("batchId", -1) <= told:
        return told
    ends = [source.get("endOffset") for source in progress.get("sources") or []]
    tell(spark, config, "progress", incarnation, batch=progress["batchId"], ends=ends)
    return progress["batchId"]


# Spark SQL evaluated by its interpreter instead of generated, Janino-compiled code: (value, Spark's default).
# The same operators and results (Spark falls back to them whenever code generation fails); for batches of a few
# hundred rows in JVMs that live for seconds, compiling cost more than it saved: standard trials, 4 A/B pairs of 4
# trials on one harness each, interleaved: 4-13 % less CPU per trial in three pairs, equal in the fourth.
INTERPRETED_SQL = {"spark.sql.codegen.wholeStage": ("false", "true"),
                   "spark.sql.codegen.factoryMode": ("NO_CODEGEN", "FALLBACK")}

RECYCLE = -1  # run()'s answer when the trial is over and this driver waits for the next one


def fresh_session(spark):
    """A new session of the same application for the next trial: its own SQL conf (a pipeline's
    ``spark.conf.set`` in the last trial stays there), temporary views, UDFs and data sources, the same
    SparkContext and executors. Made the active and default session, as ``getOrCreate`` would have."""
    from pyspark.sql import SparkSession

    from chaos.stream.source import EventLogSource, WarmSource

    new = spark.newSession()
    SparkSession._instantiatedSession = SparkSession._activeSession = new
    jvm_session = new._jvm.org.apache.spark.sql.SparkSession
    jvm_session.setDefaultSession(new._jsparkSession)
    jvm_session.setActiveSession(new._jsparkSession)
    new.dataSource.register(EventLogSource)
    new.dataSource.register(WarmSource)
    return new


def serve(spark, config: dict, incarnation: int, source=None) -> int:
    """Run ``incarnation`` of the trial in ``config``; recycled at its end, wait for the next trial and run
    its first driver in a fresh session, and so on, until a trial ends without recycling this driver."""
    from chaos.driver.spare import SPARE_KEYS, recycle_folder

    while True:
        rc = run(spark, config, incarnation, source)
        if rc != RECYCLE:
            return rc
        for sig in (signal.SIGTERM, signal.SIGUSR2):  # a spare stops at once when the harness drops it
            signal.signal(sig, signal.SIG_DFL)
        folder = recycle_folder(config["recycle"], os.getpid())
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / "spare.json", {k: config.get(k) for k in SPARE_KEYS})
        signals = Signals()
        (folder / "listening").touch()
        print(f"streamchaos: trial over, recycled as a spare in {folder}", flush=True)
        handed = await_trial(spark, folder, signals)
        if handed is None:
            return 2
        config, incarnation, standby = handed
        spark, source = fresh_session(spark), None
        if standby:  # not handed so by the harness (a recycled driver is a driver spare), but harmless
            source = stand_by(spark, config, incarnation, signals, 2)


def await_trial(spark, folder: Path, signals: Signals) -> tuple[dict, int, bool] | None:
    """As a spare in ``folder``: say ready, wait for the hand-over (SIGUSR1 after ``go.json``) and return
    the trial's config, the incarnation this driver becomes and whether as its standby; None if the trial
    needs a driver booted otherwise than this one (``spare.json``'s settings)."""
    from chaos.driver.spare import SPARE_KEYS

    spare = json.loads((folder / "spare.json").read_text())
    (folder / "ready").write_text(spark.sparkContext.applicationId)
    signals.wait(1)
    handed = json.loads((folder / "go.json").read_text())
    run_dir, incarnation = Path(handed["run_dir"]), int(handed["incarnation"])
    config = json.loads((run_dir / "driver.json").read_text())
    mismatch = [k for k in SPARE_KEYS if config.get(k) != spare.get(k)]
    if mismatch or config.get("spark_conf") or _pipeline_boot_conf(config):
        print(f"streamchaos: spare cannot run {run_dir}: it differs in {mismatch or 'boot conf'}", flush=True)
        return None
    role = "standby of" if handed.get("standby") else "runs"
    print(f"streamchaos: spare driver {role} {run_dir} as incarnation {incarnation}", flush=True)
    return config, incarnation, bool(handed.get("standby"))


def run(spark, config: dict, incarnation: int, source=None) -> int:
    from chaos.scenario.variants import applied, async_progress
    from pipelines_under_test import DriverContext, resolve

    controller = config["controller"]
    pipeline = resolve(config["pipeline"])
    if config.get("interpreted_sql") and not pipeline.interpreted_sql:  # a job as written: Spark's own defaults
        for key, value in INTERPRETED_SQL.items():
            spark.conf.set(key, value[1])
    if source is None and pipeline.source_frame and not pipeline.own_source:
        source = make_source(spark, config)

    def phase(batch: int, name: str, **detail) -> None:
        barrier.report(controller, batch, name, incarnation=incarnation, **detail)

    delta_tables.end()  # a recycled driver's last job's Delta paths are not this pipeline's
    if pipeline.checkpoint_phases:
        checkpoint_barrier(spark, pipeline.checkpoint_phases, config, incarnation)
    if "reading" in pipeline.task_phases:  # on this thread, which starts the query: its tasks carry them
        for key, value in zip(READING_KEYS, (config["controller"], str(incarnation)), strict=True):
            spark.sparkContext.setLocalProperty(key, value)
    # Registered before the query starts: batch 0's faults may need this app's executors.
    tell(spark, config, "booted", incarnation)
    ctx = DriverContext(spark, source, config["checkpoint"], Path(config["sink_dir"]), incarnation, phase,
                        sink_dsn=config.get("sink_dsn"), controller=controller, feed=config.get("feed"),
                        events=config.get("events", 0), partitions=config.get("partitions", 1),
                        events_per_batch=config["events_per_batch"], eventlog=config.get("eventlog", ""),
                        kafka=config.get("kafka"))
    try:
        with applied(spark, config.get("query_conf")), ExitStack() as stack:  # the configuration variant, if any
            if pipeline.auto_phases:
                from chaos.jobs.sink_phases import sink_phases

                stack.enter_context(sink_phases(phase, controller, incarnation))
            query = pipeline.start(ctx)
    except UserError:  # the job's own mistake (main: one line), never a variant Spark refuses
        raise
    except Exception as exc:
        if not (config.get("query_conf") or config.get("upgraded") or checkpoint_refusal(str(exc))):
            raise
        # Spark refuses the variant (a static setting, an option a stateful query cannot take) or the
        # checkpoint (see ``checkpoint_refusal``): a verdict of its own, not a crash to restart from.
        return refused(str(exc), kind=type(exc).__name__)

    stop = threading.Event()
    over = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # a clean stop (the stop-driver fault)
    signal.signal(signal.SIGUSR2, lambda *_: (over.set(), stop.set()))  # the harness's stop: the trial is over
    tell(spark, config, "running", incarnation)  # from here on, the harness's stop writes the answer
    told = -1 if async_progress(config.get("query_conf")) else None
    while not stop.is_set():
        try:
            if query.awaitTermination(0.5):
                break
        except Exception:  # it failed: query.exception() below, once the stop is ruled out, says how
            break
        if feeder := stopped_feeder(query):  # the query writing the table it reads failed: its error ends it
            query = feeder
            break
        if told is not None:
            told = tell_progress(spark, config, incarnation, query, told)
    if stop.is_set():
        t0 = time.monotonic()
        if over.is_set() and pipeline.spark_oracle:
            finish_available(query)
        query.stop()

        stop_side_queries(spark)  # a job's queries beside the one under test (a console query)
        print(f"streamchaos: query stopped in {time.monotonic() - t0:.2f}s", flush=True)
        if pipeline.state and config.get("state_dir"):
            from chaos.driver.statedump import dump_state

            done = dump_state(spark, pipeline, config["checkpoint"], Path(config["state_dir"]))
            print(f"streamchaos: state of {len(done['batches'])} batches dumped ({done.get('how', 'none')}) "
                  f"in {done['seconds']}s", flush=True)
        if over.is_set() and pipeline.spark_oracle and config.get("oracle_dir"):
            t0 = time.monotonic()
            pipeline.run_oracle(spark, config)  # the trial's expected output: the job over every record at once
            print(f"streamchaos: oracle written in {time.monotonic() - t0:.2f}s", flush=True)
        if over.is_set():
            if config.get("recycle"):
                return RECYCLE
            # The query has stopped and its state is on disk: the harness kills this process group as soon
            # as this process exits. Stopping the session first (~1 s) would only delay the next trial.
            print("streamchaos: trial over, leaving the session to the harness", flush=True)
            return 0
        t0 = time.monotonic()
        spark.stop()
        print(f"streamchaos: session stopped in {time.monotonic() - t0:.2f}s", flush=True)
        return 0
    error = query.exception()
    if error is not None:
        if said := raised_for_the_job(str(error)):  # in its foreachBatch, or a task's function
            return job_error(UserError(said))
        if query.lastProgress is None and (checkpoint_refusal(str(error)) or config.get("upgraded")):
            return refused(str(error))
        print(f"streamchaos: query failed: {error}", file=sys.stderr, flush=True)
        return 1
    return 0


# Spark's error conditions for a checkpoint it will not continue from (a missing metadata file, a stateful
# operator without its state, an incompatible state store): it stops instead of risking wrong output.
CHECKPOINT_REFUSAL = re.compile(r"\[(STREAMING_CHECKPOINT_[A-Z_]+|STREAMING_STATEFUL_OPERATOR_[A-Z_]+|"
                                r"STATE_STORE_[A-Z_]+)[].]")


def refused(message: str, kind: str = "") -> int:
    """Say why Spark refused (one line, what chaos.run.trial.Trial._refusal reads back); the driver's exit code."""
    print(f"streamchaos: refused: {kind + ': ' if kind else ''}{' '.join(message.split())[:400]}", flush=True)
    return REFUSED_RC


def checkpoint_refusal(message: str) -> str | None:
    """The error condition in ``message`` if it is Spark refusing the checkpoint, else None."""
    match = CHECKPOINT_REFUSAL.search(message)
    return match[1] if match else None


class Signals:
    """Counts SIGUSR1: installed before the slow boot, so a signal that arrives early is kept, not fatal
    (SIGUSR1's default). A standby spare gets two: the hand-over, then the takeover."""

    def __init__(self) -> None:
        self.count = 0
        signal.signal(signal.SIGUSR1, self._got)

    def _got(self, *_) -> None:
        self.count += 1

    def wait(self, count: int) -> None:
        while self.count < count:
            time.sleep(0.05)


def stand_by(spark, config: dict, incarnation: int, signals: Signals, count: int, warm_read: bool = True):
    """Warm up as ``incarnation``'s standby, say so, and wait for the ``count``-th SIGUSR1 (the active
    driver died); returns the query's source, made ahead too. ``warm_read``: its executors' Python
    workers are not started yet (a spare started them at its boot).

    Ready means booted with executors and their Python workers: a kill held at its phase waits for that.
    The standby does not run the pipeline's query ahead (docs/architecture.md): that would cut a takeover
    from 4-7 s to 2-3, but every held kill would wait for it, and trials take longer for more CPU.
    """
    from pipelines_under_test import resolve

    pipeline = resolve(config["pipeline"])
    source = make_source(spark, config) if pipeline.source_frame and not pipeline.own_source else None
    warm = warm_up(spark, read=False)
    if warm and warm_read and signals.count < count:
        warm_up(spark, wait=0)  # the Python workers, which a takeover would otherwise start after planning
    tell(spark, config, "standby-ready", incarnation)
    print(f"streamchaos: standby incarnation {incarnation} booted, {'warm' if warm else 'no executors'} "
          f"({spark.sparkContext.applicationId}), waiting for the active driver to die", flush=True)
    signals.wait(count)
    return source


def spare_main(spare_dir: Path) -> int:
    """Boot on the harness's settings, warm the executors, wait to be handed a trial (as its driver or as
    a standby), run it."""
    signals = Signals()
    (spare_dir / "listening").touch()  # the harness signals only from now on (chaos.driver.spare.Spare.hand_over)
    spare = json.loads((spare_dir / "spare.json").read_text())
    standby = spare.get("role") == "standby"
    try:
        spark = boot({**spare, "controller": ""})
        warm = warm_up(spark, until=lambda: signals.count > 0)
        print(f"streamchaos: {'standby spare' if standby else 'spare driver'} booted, "
              f"{'warm' if warm else 'not warmed'} ({spark.sparkContext.applicationId}), waiting for a trial",
              flush=True)
        handed = await_trial(spark, spare_dir, signals)
        if handed is None:
            return 2
        config, incarnation, as_standby = handed
        source = stand_by(spark, config, incarnation, signals, 2, warm_read=not warm) if as_standby else None
        return serve(spark, config, incarnation, source)
    except UserError as exc:
        return job_error(exc)
    except Exception:
        traceback.print_exc()
        return 1


def _pipeline_boot_conf(config: dict) -> dict:
    from pipelines_under_test import resolve

    return resolve(config["pipeline"]).boot_conf()


def upgraded(config: dict) -> dict:
    """``config`` for a driver on another PySpark than the harness's (stop-driver/upgrade=V): the cluster's
    master and workers run the harness's Spark, so this one runs its query in local mode, without the
    class path, class archives and Python daemon built for that Spark, and is not recycled."""
    return {**config, "master": "local[2]", "class_path": "", "class_archive": None, "executor_archive": None,
            "python_daemon": None, "cores_max": None, "recycle": None, "upgraded": True}


def job_error(exc: UserError) -> int:
    """The job's own mistake, not the harness's (a script that exits before its query starts): one line the trial
    reads back and says, and an exit code it does not retry (chaos.run.trial)."""
    print(f"{JOB_ERROR}{exc}", file=sys.stderr, flush=True)
    return JOB_ERROR_RC


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--spare":
        return spare_main(Path(argv[1]))
    run_dir, incarnation = Path(argv[0]), int(argv[1])
    standby = "--standby" in argv[2:]
    signals = Signals() if standby else None
    config = json.loads((run_dir / "driver.json").read_text())
    for arg in argv[2:]:
        if arg.startswith("--cores-max="):  # a restart after a rescale (stop-driver@N:committed/C)
            config["cores_max"] = int(arg.split("=", 1)[1])
    if "--local" in argv[2:]:
        config = upgraded(config)
    try:
        spark = boot(config, incarnation)  # imports the pipeline's module too (a standby: not after the kill)
        source = stand_by(spark, config, incarnation, signals, 1) if signals is not None else None
        return serve(spark, config, incarnation, source)
    except UserError as exc:
        return job_error(exc)
    except Exception:
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
