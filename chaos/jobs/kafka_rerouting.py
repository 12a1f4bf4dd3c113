"""A job's own Kafka clients, of every library the harness reroutes, reach the run's broker and topic: called in the
driver before the job's module is imported, and in each executor's worker before a task's function runs, so a
client the job makes anywhere (at import, in a foreachBatch, in a partition's writer) is rerouted."""

from __future__ import annotations


def reroute() -> None:
    """confluent_kafka's producers and consumers (chaos.jobs.kafka_clients) and its ``AdminClient``
    (chaos.jobs.kafka_admin), kafka-python's clients (chaos.jobs.kafka_python_clients), whichever the job has."""
    from chaos.jobs import kafka_admin, kafka_clients, kafka_python_clients

    kafka_python_clients.reroute()
    kafka_clients.reroute()
    try:
        import confluent_kafka.admin
    except ImportError:
        return
    kafka_admin.reroute_admin(confluent_kafka.admin.AdminClient)
