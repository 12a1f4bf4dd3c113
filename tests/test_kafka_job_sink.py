"""A job's Kafka sink as rows: the trial's exported output topic and Spark's answer's Parquet read the same way."""

from __future__ import annotations

import json

import polars as pl
import pytest

from chaos.clusters.kafka.broker import OUTPUT_RECORDS
from chaos.errors import UserError
from chaos.jobs.kafka.sink import CAPTURED, as_rows, read_rows
from chaos.jobs.reference import JobSpec


def test_json_object_values_are_read_as_their_fields_beside_the_key():
    rows = as_rows(["a", "b"], ['{"order_id": "a", "amount": 3}', '{"order_id": "b", "amount": 5}'])
    assert rows.sort("key").to_dicts() == [{"order_id": "a", "amount": 3, "key": "a"},
                                          {"order_id": "b", "amount": 5, "key": "b"}]
    plain = as_rows([None, "k"], ["x", '{"a": 1}'])  # not every value an object: one text column
    assert plain.columns == ["key", "value"] and plain["value"].to_list() == ["x", '{"a": 1}']


def test_the_topic_and_the_answers_parquet_give_the_same_rows(tmp_path):
    values = [json.dumps({"order_id": f"o{i}", "amount": i}) for i in range(3)]
    topic = pl.DataFrame({"partition": [0, 0, 1, 1], "offset": [0, 1, 0, 1],
                          "key": [b"o0", b"o1", b"o2", b"o9"],
                          "value": [v.encode() for v in values] + [b'{"order_id": "o9", "amount": 9}'],
                          "committed": [True, True, True, False]})  # an aborted transaction's record
    (tmp_path / "sink").mkdir()
    topic.write_parquet(tmp_path / "sink" / OUTPUT_RECORDS)
    (tmp_path / "oracle" / CAPTURED).mkdir(parents=True)
    pl.DataFrame({"key": ["o0", "o1", "o2"], "value": values}).write_parquet(
        tmp_path / "oracle" / CAPTURED / "part-0.parquet")
    stream, answer = read_rows(tmp_path / "sink"), read_rows(tmp_path / "oracle")
    assert stream.sort("key").equals(answer.sort("key")) and stream.height == 3
    assert read_rows(tmp_path / "nothing").is_empty()


def test_a_kafka_sink_names_a_topic_and_needs_sparks_connector():
    spec = JobSpec("job.py:run", schema="order_id STRING", sink="kafka:orders-clean", kafka="connector").validate()
    assert (spec.sink_kind, spec.table) == ("kafka", "orders-clean")
    with pytest.raises(UserError, match="a Kafka topic's name"):
        JobSpec("job.py:run", sink="kafka:orders clean", kafka="connector").validate()
    with pytest.raises(UserError, match="Spark's connector"):
        JobSpec("job.py:run", sink="kafka", kafka="stand-in").validate()
