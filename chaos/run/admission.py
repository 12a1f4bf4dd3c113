"""What a trial may run, checked before any JVM starts: the scenario of ``streamchaos trial``'s options, and
the faults its pipeline and its cluster can carry out (each refusal one line saying what to use instead)."""

from __future__ import annotations

from chaos.clusters.registry import kind_of, refusal, with_image
from chaos.errors import UserError
from chaos.scenario.faults import Fault
from chaos.scenario.scenario import EVENTS, EVENTS_PER_BATCH, Scenario
from pipelines_under_test import Pipeline, resolve


def first_upgrade(schedule: list[Fault]) -> Fault | None:
    """The schedule's earliest stop-driver/upgrade=V: from it on, drivers run another Spark."""
    return min((f for f in schedule if f.upgrade is not None), key=lambda f: f.point, default=None)


def validate_schedule(scenario: Scenario, pipeline: Pipeline) -> None:
    """Reject faults the pipeline cannot take (no cluster needed: called before anything starts)."""
    if scenario.brokers > 1 and not pipeline.kafka:
        raise UserError(f"--brokers {scenario.brokers}: {pipeline.name} reads no Kafka through the harness's broker; "
                        "use a kafka-* pipeline or a job read with --kafka connector")
    if refused := kind_of(scenario.cluster).brokers_refusal(scenario.brokers):
        raise UserError(refused)
    for fault in scenario.faults:
        if fault.action == "delete-records" and pipeline.spark_oracle:
            raise UserError(f"{fault.spec}: {pipeline.name} is judged against Spark's answer over every record, "
                            "which deleted records would change; use a kafka-* pipeline")
        if fault.action == "add-partitions" and pipeline.kafka_fed:
            raise UserError(f"{fault.spec}: {pipeline.name} is fed its records as batches commit (real-time mode); "
                            "add-partitions needs a topic written ahead: use kafka-passthrough or "
                            "kafka-windowed-count")
        if fault.target in ("broker", "records", "partitions") and not pipeline.kafka:
            raise UserError(f"{fault.spec}: {pipeline.name} reads no Kafka through the harness's broker; use a "
                            "kafka-* pipeline or a job read with --kafka connector")
        if fault.target == "sink-db" and not pipeline.database:
            raise UserError(f"{fault.spec}: {pipeline.name} has no sink database; use a pg-* pipeline")
        if fault.channel and fault.target == "sink" and not pipeline.sink_channel:
            raise UserError(f"{fault.spec}: {pipeline.name} writes to a local file, it has no sink channel; "
                            "use a pipeline with a database sink")
        if fault.channel and fault.target == "source" and not pipeline.source_channel:
            raise UserError(f"{fault.spec}: {pipeline.name} reads a source of its own, not the harness's event log "
                            "through the source channel; use a pipeline that reads the event log")
        if fault.phase not in pipeline.phases:
            hint = (" (if its query keeps state, set state_store = True on the pipeline)"
                    if fault.phase == "state-commit" else "")
            raise UserError(f"{fault.spec}: {pipeline.name}'s batches never reach phase {fault.phase!r}; "
                            f"use one of {', '.join(pipeline.phases)}{hint}")
    schedule = scenario.faults
    upgrade = first_upgrade(schedule)
    if upgrade is not None:
        from chaos.machine.spark_versions import python_for

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
        from chaos.clusters.postgres import require_postgres

        require_postgres()


def check_cluster_faults(scenario: Scenario, spec: str) -> None:
    """Reject faults the cluster ``spec`` names cannot carry out (its kind says why: chaos/clusters/)."""
    for fault in scenario.faults:
        why = refusal(fault, spec)
        if why:
            raise UserError(why)


def trial_scenario(pipeline: str, events: int = EVENTS, seed: int = 0, fault: list[str] | None = None,
                   events_per_batch: int = EVENTS_PER_BATCH, partitions: int | None = None, keys: int | None = None,
                   skew: float | None = None, max_disorder_ms: int | None = None, late_fraction: float | None = None,
                   resent_fraction: float | None = None, cluster: str = "standalone", workers: int = 2,
                   brokers: int = 1, downtime: float = 1.0, recovery_timeout: float = 180.0,
                   conf: list[str] | None = None, image: str | None = None, schema: str | None = None,
                   sink: str | None = None, key: str | None = None, values: list[str] | None = None,
                   kafka: str | None = None, args: list[str] | None = None, id_name: str | None = None,
                   sql_init: list[str] | None = None, time_field: str | None = None,
                   kafka_value: str | None = None) -> Scenario:
    """The scenario ``streamchaos trial`` runs for these options (the pipeline's stream defaults under what is
    given, the scenario's own under both), checked before any JVM starts."""
    from chaos.jobs.reference import job_ref
    from chaos.scenario.variants import parse_conf

    cluster = with_image(cluster, image)
    pipeline = job_ref(pipeline, schema, sink, key, values, kafka, args, id_name, sql_init, time_field, kafka_value)
    chosen = resolve(pipeline)
    given = {"partitions": partitions, "late_fraction": late_fraction, "resent_fraction": resent_fraction,
             "keys": keys, "skew": skew, "max_disorder_ms": max_disorder_ms}
    stream = {**chosen.stream_defaults, **{k: v for k, v in given.items() if v is not None}}
    scenario = Scenario(
        pipeline=pipeline, events=events, seed=seed, events_per_batch=events_per_batch,
        faults=list(fault or []),
        cluster=cluster, workers=workers, brokers=brokers, driver_downtime=downtime,
        recovery_timeout=recovery_timeout, conf=parse_conf(list(conf or [])), **stream,
    )
    validate_schedule(scenario, chosen)  # unknown pipeline, impossible fault
    if refused := missing_here(chosen):  # a library or server this machine lacks: said before a cluster starts
        raise UserError(f"{pipeline}: {refused}")
    return scenario


def missing_here(pipeline) -> str | None:
    """Why ``pipeline`` cannot run on this machine (a missing server, tool or library), or None."""
    from chaos.clusters.postgres import find_bindir

    if pipeline.database and find_bindir() is None:
        return "needs PostgreSQL server binaries (initdb, pg_ctl): install postgresql or set PG_BINDIR"
    return pipeline.unavailable()
