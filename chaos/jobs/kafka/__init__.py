"""Kafka as a job reaches it: its source and sink through Spark's connector on the trial's broker and topics
(``source``, ``sink``), its own clients of every library rerouted there (``rerouting``: ``confluent``,
``confluent_admin``, ``kafka_python``, ``kafka_python_admin``, named alike by ``naming``), and Spark's answer's
topic (``answer``)."""
