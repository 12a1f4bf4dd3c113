"""A recycled driver runs its next trial in ``chaos.driver.process.fresh_session``: nothing a pipeline set in the
last trial's session may reach the next one, and the pipeline code sees the new session wherever it looks."""

from __future__ import annotations

import pytest

from tests.conftest import in_process_session

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark():
    from chaos.stream.source import EventLogSource, WarmSource

    for session in in_process_session("local[1]", "streamchaos-fresh-session-test"):
        session.dataSource.register(EventLogSource)
        session.dataSource.register(WarmSource)
        yield session


def test_the_next_trial_gets_a_session_with_nothing_of_the_last_one(spark):
    from pyspark.sql import SparkSession

    from chaos.driver.process import fresh_session
    from chaos.stream.source import WARM_SOURCE_NAME

    # What catalogue pipelines do in their start(): SQL conf of their own (keyed-state's RocksDB, event-time's
    # no-data batches), plus what a user's pipeline may do: a temporary view.
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", "some.Provider")
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    spark.range(3).createOrReplaceTempView("last_trial")
    app = spark.sparkContext.applicationId

    new = fresh_session(spark)

    assert new.sparkContext.applicationId == app  # the same application: its executors stay warm
    assert new.conf.get("spark.sql.streaming.noDataMicroBatches.enabled") == "true"
    assert new.conf.get("spark.sql.streaming.stateStore.providerClass") != "some.Provider"
    assert new.conf.get("spark.sql.shuffle.partitions") == "2"  # the boot's settings stay
    assert not new.catalog.tableExists("last_trial")
    # Pipeline code that asks for "the" session (in a foreachBatch, a helper) gets the new one.
    assert SparkSession.getActiveSession() is new
    assert SparkSession.builder.getOrCreate() is new
    assert new._jvm.org.apache.spark.sql.SparkSession.getDefaultSession().get().equals(new._jsparkSession)
    # The harness's data sources are registered in it (the event log source and the warm-up read).
    assert new.read.format(WARM_SOURCE_NAME).option("partitions", "2").load().count() == 2  # one row per partition
