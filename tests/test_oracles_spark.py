"""Differential test: every catalogue pipeline's logic run as a Spark *batch* query agrees with its oracle.

The streaming trial judges Spark's output with the polars oracle; this test judges the oracle with
Spark. Same events (drawn by the public strategies), same ``transform`` the streaming query uses,
run once as a batch: the judged verdict must be exactly-once with nothing unexpected, and a
stateful pipeline's expected state must equal the batch aggregate.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from chaos.scenario.scenario import EVENT_SCHEMA
from pipelines_under_test import CATALOGUE
from properties.check import judge
from properties.consistent_cut import compare_state
from properties.strategies import event_streams
from tests.conftest import in_process_session

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark():
    yield from in_process_session("local[2]", "streamchaos-oracle-test")


def as_spark(spark, events):
    columns = [c.split()[0] for c in EVENT_SCHEMA.split(", ")]
    return spark.createDataFrame(events.select(columns).to_pandas(), schema=EVENT_SCHEMA)


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_oracle_agrees_with_spark_batch(spark, name):
    pipeline = CATALOGUE[name]
    # A batch transformWithState fires no timer (no watermark, no next batch): a processor that emits from timers
    # emits nothing, which one example says.
    examples = 1 if name in ("keyed-state-timers", "keyed-state-expiry") else 4

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(event_streams(max_events=400, late=True, resent=True))
    def check(spec):
        events = spec.frame()
        output = pipeline.batch_output(pipeline.transform(as_spark(spark, events)))
        judged = judge(pipeline, events, output)
        assert judged.verdict == "exactly-once", judged.to_dict(sample=5)
        assert judged.unexpected == []
        if pipeline.state:
            assert compare_state(pipeline.expected_state(events), output.select("key", "n", "total")) == []

    check()
