"""Apache Kafka's broker and Spark's Kafka connector, from Maven (``chaos.machine.maven``).

The connector must be the running Spark's own version (Spark checks nothing, but its internal APIs move between
minor versions). Where the repositories do not serve it, the error names the ways out: a Spark version whose
connector is served (``streamchaos spark add``) or the stand-in source.
"""

from __future__ import annotations

from pathlib import Path

from chaos.machine.maven import Coordinates, available, first_error, not_served, not_shipped, resolve
from chaos.machine.spark import spark_home

# The broker: Kafka 4.x runs in KRaft mode only (no ZooKeeper), on Java 17.
BROKER_VERSION = "4.1.1"
BROKER = Coordinates("org.apache.kafka", "kafka_2.13", BROKER_VERSION)
CONNECTOR_ARTIFACT = "spark-sql-kafka-0-10_2.13"
WAY_OUT = ("run on a Spark whose connector is served (streamchaos spark add 4.2.0, then streamchaos --spark 4.2.0 "
           "...) or give --kafka stand-in")


def connector(spark_version: str) -> Coordinates:
    """Spark's Kafka connector for ``spark_version``; Spark's own SQL jars are the cluster's, never a second copy."""
    return Coordinates("org.apache.spark", CONNECTOR_ARTIFACT, spark_version,
                       exclusions=(("org.apache.spark", "spark-sql_2.13"),))


def _refusal(what: Coordinates, output: str) -> str:
    if not_served(output):
        return f"Spark's Kafka connector {what} is not served by the Maven repositories this machine reaches: {WAY_OUT}"
    return first_error(what, output)


def connector_available(spark_version: str | None = None, *, say=None) -> str | None:
    """None when Spark's Kafka connector for ``spark_version`` (default: the running PySpark's) is cached or
    resolves now, else the one line saying why not and the way out."""
    if spark_version is None:
        import pyspark

        spark_version = pyspark.__version__
    refused = available(connector(spark_version), say=say, refusal=_refusal)
    if refused is not None and "mvn is not on PATH" in refused:
        return refused + " or give --kafka stand-in"
    return refused


def spark_connector_jars(*, say=None) -> list[Path]:
    """The connector's jars for the running PySpark that its own jars do not already hold."""
    import pyspark

    return connector_jars(pyspark.__version__, Path(spark_home()) / "jars", say=say)


def connector_jars(spark_version: str, spark_jars: Path, *, say=None) -> list[Path]:
    """The connector's jars that the Spark installation at ``spark_jars`` does not already ship."""
    return not_shipped(resolve(connector(spark_version), say=say, refusal=_refusal), spark_jars)


def broker_classpath(*, say=None) -> str:
    return str(resolve(BROKER, say=say) / "jars" / "*")
