"""How the harness names what it resolves from Maven for Kafka, and which connector jars join a Spark installation
(no JVM, no network)."""

from __future__ import annotations

from pathlib import Path

from chaos.clusters.kafka.jars import _artifact_name, connector, connector_jars, folder_of


def test_artifact_names_drop_only_the_version():
    assert _artifact_name(Path("kafka-clients-3.9.2.jar")) == "kafka-clients"
    assert _artifact_name(Path("spark-sql-kafka-0-10_2.13-4.2.0.jar")) == "spark-sql-kafka-0-10_2.13"
    assert _artifact_name(Path("scala-library-2.13.16.jar")) == "scala-library"
    assert _artifact_name(Path("commons-pool2-2.13.1.jar")) == "commons-pool2"


def test_the_connector_leaves_sparks_sql_to_the_cluster_and_is_keyed_by_version():
    pom = connector("4.2.0").pom()
    assert "<artifactId>spark-sql-kafka-0-10_2.13</artifactId><version>4.2.0</version>" in pom
    assert "<exclusion><groupId>org.apache.spark</groupId><artifactId>spark-sql_2.13</artifactId></exclusion>" in pom
    assert folder_of(connector("4.2.0")) != folder_of(connector("4.1.1"))


def test_only_jars_spark_does_not_ship_join_its_class_path(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = folder_of(connector("4.2.0"))
    (folder / "jars").mkdir(parents=True)
    for name in ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "kafka-clients-3.9.2.jar", "commons-pool2-2.13.1.jar",
                 "scala-library-2.13.15.jar", "snappy-java-1.1.10.5.jar"):
        (folder / "jars" / name).write_bytes(b"")
    (folder / "ready").write_text("x")
    spark_jars = tmp_path / "spark-jars"
    spark_jars.mkdir()
    for name in ("scala-library-2.13.16.jar", "snappy-java-1.1.10.8.jar", "spark-sql_2.13-4.2.0.jar"):
        (spark_jars / name).write_bytes(b"")
    assert [j.name for j in connector_jars("4.2.0", spark_jars)] == [
        "commons-pool2-2.13.1.jar", "kafka-clients-3.9.2.jar", "spark-sql-kafka-0-10_2.13-4.2.0.jar"]
