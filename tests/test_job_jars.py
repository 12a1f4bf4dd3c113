"""The jars a job asks its session for, read from its code and spark-defaults.conf (chaos.jobs.job_jars)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from chaos.errors import UserError
from chaos.jobs.job_jars import asked_jars, said, wanted_jars


def job(tmp_path: Path, text: str, name: str = "job.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_builder_settings_are_read_with_their_names_and_constants(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    path = job(tmp_path, '''
        import os
        from pyspark.sql import SparkSession
        SPARK = "3.5.0"
        PACKAGES = [f"org.apache.spark:spark-sql-kafka-0-10_2.12:{SPARK}", "org.postgresql:postgresql:42.6.0"]

        def session():
            return (SparkSession.builder.appName("x")
                    .config("spark.jars.packages", ",".join(PACKAGES))
                    .config(key="spark.sql.shuffle.partitions", value="4")
                    .config("spark.jars", os.getenv("EXTRA_JARS", "/opt/bitnami/spark/jars/postgresql-42.2.5.jar"))
                    .getOrCreate())
        ''')
    asked = asked_jars(path, tmp_path)
    assert [(a.key, a.where) for a in asked] == [("spark.jars.packages", "job.py:9"), ("spark.jars", "job.py:11")]
    wanted = wanted_jars(asked, "4.3.0", tmp_path)
    assert [str(w.what) for w in wanted] == ["org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0",
                                             "org.postgresql:postgresql:42.6.0", "org.postgresql:postgresql:42.2.5"]
    lines = said(wanted, asked)
    assert lines[0] == "the job's jars (job.py:9, job.py:11) are on its session's class path"
    assert "is taken at this Spark's version: org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0" in lines[1]
    assert "is not on this machine: org.postgresql:postgresql:42.2.5 from Maven" in lines[2]


def test_a_helper_module_of_the_project_and_a_sparkconf(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    (tmp_path / "utils").mkdir()
    (tmp_path / "lib").mkdir()
    jar = tmp_path / "lib" / "udfs.jar"
    jar.write_bytes(b"PK")
    job(tmp_path, '''
        from pyspark import SparkConf
        conf = SparkConf().setAll([("spark.driver.extraClassPath", "lib/udfs.jar"), ("spark.app.name", "x")])
        ''', "utils/spark_session.py")
    job(tmp_path, 'PACKAGES = "org.postgresql:postgresql:42.6.0"\n'
                  'EXTRA = SparkConf().setAll(pairs=[("spark.jars.packages", "org.xerial:sqlite-jdbc:3.53.0.0")])\n',
        "config.py")
    path = job(tmp_path, "from utils.spark_session import conf\nfrom config import PACKAGES\n"
                         "B.config('spark.jars.packages', PACKAGES)\n")
    wanted = wanted_jars(asked_jars(path, tmp_path), "4.3.0", tmp_path)
    assert [w.path or str(w.what) for w in wanted] == ["org.postgresql:postgresql:42.6.0", jar,
                                                       "org.xerial:sqlite-jdbc:3.53.0.0"]


def test_spark_defaults_conf_beside_the_job(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "spark-defaults.conf").write_text(
        "# jars\nspark.master spark://spark-master:7077\nspark.jars.packages  io.delta:delta-core_2.12:2.4.0\n")
    asked = asked_jars(job(tmp_path, "print('x')\n"), tmp_path)
    assert [(a.key, a.value, a.where) for a in asked] == [
        ("spark.jars.packages", "io.delta:delta-core_2.12:2.4.0", "spark-defaults.conf:3")]
    (wanted,) = wanted_jars(asked, "4.2.0", tmp_path)
    assert str(wanted.what) == "io.delta:delta-spark_4.2_2.13:4.4.0"


@pytest.mark.parametrize("text, words", [
    ('B.config("spark.jars.packages", "com.datastax.spark:spark-cassandra-connector_2.12:3.5.0")',
     "is built for Scala 2.12; Spark 4.3.0 runs Scala 2.13: name its _2.13 build"),
    ('B.config("spark.jars.packages", "org.postgresql:postgresql")', "write each as group:artifact:version"),
    ('B.config("spark.jars", "/opt/jars/custom-udfs-1.0.jar")',
     "is not on this machine: put the jar there, or name its Maven coordinates"),
    ('B.config("spark.jars", "https://example.org/x.jar")', "is not on this machine"),
    ('def s(p):\n    return B.config("spark.jars.packages", p)',
     "job.py:2: the job's spark.jars.packages is computed when it runs"),
])
def test_what_cannot_run_here_is_one_line(tmp_path, monkeypatch, text, words):
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    path = job(tmp_path, text + "\n")
    with pytest.raises(UserError, match=None) as raised:
        wanted_jars(asked_jars(path, tmp_path), "4.3.0", tmp_path)
    assert words in str(raised.value) and "\n" not in str(raised.value)


def test_no_jars_no_lines(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    path = job(tmp_path, 'B.config("spark.sql.shuffle.partitions", "2")\nr.set("k", v)\n')
    assert asked_jars(path, tmp_path) == [] and said([], []) == ()


def test_a_jar_that_is_not_here_stops_the_trial_in_one_line_before_anything_starts(tmp_path):
    from tests.conftest import cli

    job(tmp_path, 'from pyspark.sql import SparkSession\n\ndef run():\n'
                  '    return SparkSession.builder.config("spark.jars", "/opt/jars/udfs-1.0.jar").getOrCreate()\n')
    run = cli("trial", "job.py:run", "--sink", "parquet", cwd=tmp_path)
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert run.rc == 2 and len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert "spark.jars /opt/jars/udfs-1.0.jar (job.py:4) is not on this machine" in lines[0]
    assert not (tmp_path / "runs").exists()


def test_a_job_read_as_avro_gets_sparks_avro_functions_unless_it_asks_for_them_itself(tmp_path):
    """--kafka-value avro:FILE adds spark-avro at the running Spark's version (what spark-submit --packages would);
    a job that names it in spark.jars.packages keeps its own setting, taken at the running Spark's version."""
    import json

    from chaos.jobs.reference import job_ref
    from pipelines_under_test import resolve

    avsc = tmp_path / "order.avsc"
    avsc.write_text(json.dumps({"type": "record", "name": "O", "fields": [{"name": "order_id", "type": "string"}]}))
    job(tmp_path, 'def run(spark):\n    return spark.readStream.format("kafka").load()\n')
    job(tmp_path, 'from pyspark.sql import SparkSession\n\ndef run():\n    return SparkSession.builder.config('
                  '"spark.jars.packages", "org.apache.spark:spark-avro_2.13:3.5.0").getOrCreate()\n', "own.py")
    for entry, asked in (("job.py", "--kafka-value avro"), ("own.py", "spark.jars.packages")):
        ref = job_ref(f"{tmp_path / entry}:run", "order_id STRING", "parquet", kafka="stand-in",
                      encoding=f"avro:{avsc}")
        [wanted] = [w for w in resolve(ref)._jars_wanted if w.what and w.what.artifact.startswith("spark-avro")]
        import pyspark

        assert wanted.what.artifact == "spark-avro_2.13" and wanted.what.version == pyspark.__version__
        assert asked in wanted.refusal and wanted.spark
