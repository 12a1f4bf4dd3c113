"""A job's own Kafka clients, of every library the harness reroutes, reach the run's broker and topic: called in the
driver before the job's module is imported, and in each executor's worker before a task's function runs, so a
client the job makes anywhere (at import, in a foreachBatch, in a partition's writer) is rerouted."""

from __future__ import annotations


def reroute() -> None:
    """confluent_kafka's producers and consumers (``confluent``) and its ``AdminClient`` (``confluent_admin``),
    kafka-python's (``kafka_python``, ``kafka_python_admin``), whichever the job has."""
    from chaos.jobs.kafka import confluent, confluent_admin, kafka_python, kafka_python_admin

    kafka_python.reroute()
    kafka_python_admin.reroute()
    confluent.reroute()
    try:
        import confluent_kafka.admin
    except ImportError:
        return
    confluent_admin.reroute_admin(confluent_kafka.admin.AdminClient)
