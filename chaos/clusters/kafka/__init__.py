"""The harness's Kafka: Apache Kafka's broker and Spark's Kafka connector, resolved from Maven (``jars``), and a
broker the harness owns (``broker``)."""
