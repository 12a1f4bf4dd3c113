"""Payloads in the shapes jobs declare them: event time in the job's own form (``--time``), nested STRUCT and
ARRAY fields, the schema read from the job's code, the key field's own values. No JVM."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import pytest

from chaos.errors import UserError
from chaos.jobs.declared import declared_schema
from chaos.jobs.payloads import encode, kafka_row, leaves, parse_schema, record, roles, typed
from chaos.jobs.reference import JobSpec, job_ref, parse_ref
from chaos.jobs.stand_ins import on_time
from chaos.jobs.times import format_pattern, parse_time
from chaos.jobs.values import parse_values, value_lists
from tests.conftest import cli

MS = 1_767_225_658_412  # 2026-01-01T00:00:58.412Z
TRADES = "trade_id STRING, symbol STRING, qty LONG, trade_time LONG"


@pytest.mark.parametrize("form, written, unit", [
    ("epoch-ms", MS, 1),
    ("epoch-s", MS // 1000, 1000),
    ("yyyy-MM-dd HH:mm:ss", "2026-01-01 00:00:58", 1000),
    ("dd/MM/yyyy HH:mm", "01/01/2026 00:00", 60_000),
    ("yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "2026-01-01T00:00:58.412Z", 1),
])
def test_the_event_time_is_written_in_the_jobs_form(form, written, unit):
    kind = "int" if form.startswith("epoch") else "string"
    ddl = f"trade_id STRING, symbol STRING, qty LONG, trade_time {'LONG' if kind == 'int' else 'STRING'}"
    time = parse_time(f"trade_time:{form}")
    fields = parse_schema(ddl)
    role = roles(fields, "", time)
    assert role["trade_time"] == "event_time" and role["qty"] == "value", role
    assert record(fields, role, 7, "k001", 12, MS, None, time)["trade_time"] == written
    assert time.unit_ms == unit
    spec = JobSpec("job:run", ddl, "parquet", time=f"trade_time:{form}").validate()
    assert parse_ref(spec.ref) == spec


def test_lateness_is_judged_on_the_time_the_job_reads_against_the_previous_batchs_watermark():
    # Read by batch 1: late against batch 0's watermark. At 58.412 s read as whole seconds it is 58.000: behind a
    # watermark of 58.000 it is late for the job; to the millisecond it is not.
    row = [1, "k001", 5, MS, 0, 13]
    late = [[{"0": 10}, MS - 412], [{"0": 20}, MS + 5000]]
    assert on_time([row], late) == [row]
    assert on_time([row], late, 1000) == []
    assert on_time([[*row[:5], 3]], late, 1000) == [[*row[:5], 3]]  # read by batch 0: nothing before it


def test_patterns_spark_cannot_parse_or_the_generator_cannot_write_are_one_line():
    for text, says in (("ts:yyyy-MM-dd Bogus", "not a letter"), ("ts:yyyy-ww", "cannot write"),
                       ("ts:HH:mm", "no year"), ("ts:yyyy 'T", "never closes"), (":epoch-ms", "name the field")):
        with pytest.raises(UserError, match=says):
            parse_time(text)
    assert format_pattern("EEE, dd MMM yyyy hh:mm a", datetime(2026, 1, 2, 13, 4, tzinfo=UTC)) == \
        "Fri, 02 Jan 2026 01:04 PM"


def test_a_time_that_does_not_fit_its_field_or_an_ambiguous_one_is_one_line():
    with pytest.raises(UserError, match="the field is STRING; epoch-ms goes in a INT"):
        JobSpec("job:run", "id STRING, ts STRING", "parquet", time="ts:epoch-ms").validate()
    with pytest.raises(UserError, match="no such field"):
        JobSpec("job:run", TRADES, "parquet", time="when:epoch-ms").validate()
    with pytest.raises(UserError, match="--time trade_time:epoch-ms"):  # a LONG named like a time, no TIMESTAMP
        JobSpec("job:run", TRADES, "parquet").validate()
    JobSpec("job:run", TRADES, "parquet", time="none").validate()  # a duration named like a time
    JobSpec("job:run", TRADES + ", ts TIMESTAMP", "parquet").validate()  # a TIMESTAMP says which
    with pytest.raises(UserError, match="applies to a job as written"):
        job_ref("windowed-count", time="ts:epoch-ms")


def test_nested_payloads_fill_each_leaf_and_arrays_hold_one_element():
    ddl = ("`IP Address` STRING, event STRUCT<eventId: STRING, at: TIMESTAMP, "
           "items: ARRAY<STRUCT<sku: STRING, qty: INT>>>, tags ARRAY<STRING>")
    fields = parse_schema(ddl)
    assert [f.key for f in leaves(fields)] == ["IP Address", "event.eventId", "event.at", "event.items.sku",
                                               "event.items.qty", "tags"]
    role = roles(fields)
    assert role["event.eventId"] == "id" and role["IP Address"] == "key" and role["event.at"] == "event_time"
    row = record(fields, role, 600, "k003", 454, MS)
    assert row == {"IP Address": "k003", "event": {"eventId": "eventId-600", "at": "2026-01-01T00:00:58.412Z",
                                                   "items": [{"sku": "sku-5", "qty": 454}]}, "tags": ["tags-5"]}
    spark_row = typed(fields, row)
    assert spark_row[1][1] == datetime(2026, 1, 1, 0, 0, 58, 412000, tzinfo=UTC) and spark_row[1][2] == [("sku-5", 454)]
    with pytest.raises(UserError, match="STRUCT<...> and ARRAY<...>"):
        parse_schema("attrs MAP<STRING, STRING>")


def test_values_may_set_the_key_field_and_the_kafka_record_key_follows():
    fields = parse_schema("order_id STRING, account STRING, amount LONG, ts TIMESTAMP")
    role = roles(fields)
    values = value_lists(parse_values(["account=acc-1,acc-2,acc-3"]), leaves(fields), role)
    key, value, *_ = kafka_row(fields, role, ["orders"], 7, "k004", 12, MS, 0, 0, values)
    assert json.loads(value)["account"] == "acc-2" and key == b"acc-2"  # k004: 4 mod 3


def test_the_schema_a_job_declares_is_read_from_its_code(tmp_path):
    job = tmp_path / "clicks_job.py"
    job.write_text('''
import pyspark.sql.functions as F
from pyspark.sql import SparkSession
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

ITEM = StructType([StructField("sku", StringType()), StructField("qty", LongType())])
SCHEMA = StructType([
    StructField("clickId", StringType()),
    StructField("IP Address", StringType()),
    StructField("items", ArrayType(ITEM)),
    StructField("ts", LongType()),
])
lookup = SparkSession.builder.getOrCreate().read.schema("code STRING").csv("codes.csv")  # a batch read: not it


def run(spark):
    raw = spark.readStream.format("kafka").option("subscribe", "clicks").load()
    parsed = raw.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("c")).select("c.*")
    return parsed.writeStream.format("parquet").start("/tmp/out")
''')
    found = declared_schema(job)
    assert found is not None and found.where == "clicks_job.py:18", found
    assert found.ddl == ("clickId STRING, `IP Address` STRING, items ARRAY<STRUCT<sku: STRING, qty: BIGINT>>, "
                         "ts BIGINT")
    assert [f.key for f in leaves(parse_schema(found.ddl))] == ["clickId", "IP Address", "items.sku", "items.qty",
                                                                 "ts"]
    (tmp_path / "ddl_job.py").write_text('SCHEMA = "a STRING, b LONG"\n'
                                         'def run(spark):\n    spark.readStream.schema(SCHEMA).json("/in")\n')
    assert declared_schema(tmp_path / "ddl_job.py").ddl == "a STRING, b LONG"
    (tmp_path / "opaque_job.py").write_text('import json\nSCHEMA = json.load(open("s.json"))\n'
                                            'def run(spark):\n    spark.readStream.schema(SCHEMA).json("/in")\n')
    assert declared_schema(tmp_path / "opaque_job.py") is None


def test_a_trial_of_a_job_with_an_ambiguous_time_is_one_line(tmp_path):
    job = tmp_path / "trades_job.py"
    job.write_text('def run(spark):\n    spark.readStream.schema("trade_id STRING, qty LONG, trade_time LONG")'
                   '.json("/in").writeStream.format("parquet").start("/out")\n')
    run = cli("trial", f"{job}:run", "--sink", "parquet", cwd=tmp_path)
    assert run.rc == 2 and run.stderr.count("\n") == 1 and "--time trade_time:epoch-ms" in run.stderr, run.stderr


def test_a_job_whose_output_depends_on_batching_is_inconclusive_and_names_the_campaign_row():
    from properties.verdicts import BATCH_DEPENDENT, aggregate, meets, weakest

    assert weakest(["exactly-once", BATCH_DEPENDENT, "at-least-once"]) == BATCH_DEPENDENT
    assert meets(BATCH_DEPENDENT, "exactly-once") is None
    row = aggregate([{"pipeline": "job", "declared": "exactly-once", "verdict": v}
                     for v in ("at-least-once", BATCH_DEPENDENT)])["job"]
    assert row["verdict"] == BATCH_DEPENDENT and row["meets"] is None


def test_a_kafka_value_may_be_a_csv_line_of_the_payloads_fields_in_order():
    fields = parse_schema("order_id STRING, `IP Address` STRING, amount LONG, ok BOOLEAN, ts TIMESTAMP")
    _, value, *_ = kafka_row(fields, roles(fields), ["orders"], 7, "k001", 12, MS, 0, 0, None, None, "csv")
    assert value == b"order_id-7,k001,12,false,2026-01-01T00:00:58.412Z"
    assert encode({"a": 'say "hi", then', "b": None, "c": " x"}, "csv") == b'"say \\"hi\\", then",," x"'
    spec = JobSpec("job:run", "order_id STRING, ts TIMESTAMP", "parquet", encoding="csv").validate()
    assert parse_ref(spec.ref) == spec
    with pytest.raises(UserError, match="a CSV line holds flat fields"):
        JobSpec("job:run", "o STRUCT<a: STRING>, ts TIMESTAMP", "parquet", encoding="csv").validate()
    with pytest.raises(UserError, match="--kafka-value xml: use one of json, csv"):
        JobSpec("job:run", "order_id STRING, ts TIMESTAMP", "parquet", encoding="xml").validate()


NESTED_AVRO = {"type": "record", "name": "Order", "fields": [
    {"name": "order_id", "type": "string"},
    {"name": "buyer", "type": {"type": "record", "name": "Buyer", "fields": [{"name": "name", "type": "string"}]}},
    {"name": "amount", "type": ["null", "long"]},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}


def test_a_kafka_value_may_be_avro_in_the_jobs_own_schema_file_with_or_without_a_registrys_header(tmp_path):
    """The bytes decode with the job's schema as from_avro does (the schema given, nothing in the record naming
    it): the nested record, the nullable field's union branch and the timestamp's logical type as the file says."""
    from fastavro import parse_schema as avro_schema
    from fastavro import schemaless_reader

    avsc = tmp_path / "order.avsc"
    avsc.write_text(json.dumps(NESTED_AVRO))
    fields = parse_schema("order_id STRING, buyer STRUCT<name: STRING>, amount LONG, ts TIMESTAMP")
    for form, header in (("avro", b""), ("avro-confluent", b"\x00\x00\x00\x00\x01")):
        _, value, *_ = kafka_row(fields, roles(fields), ["orders"], 7, "k001", 12, MS, 0, 0, None, None,
                                 f"{form}:{avsc}")
        assert value.startswith(header)
        got = schemaless_reader(io.BytesIO(value[len(header):]), avro_schema(NESTED_AVRO), None)
        assert got == {"order_id": "order_id-7", "buyer": {"name": "k001"}, "amount": 12,
                       "ts": datetime.fromtimestamp(MS / 1000, tz=UTC)}
    spec = JobSpec("job:run", "order_id STRING, buyer STRUCT<name: STRING>, amount LONG, ts TIMESTAMP", "parquet",
                   encoding=f"avro:{avsc}").validate()
    assert parse_ref(spec.ref) == spec


def test_an_avro_schema_under_the_working_directory_is_stored_relative_and_read_from_a_drivers_own(
        tmp_path, monkeypatch):
    """A stored scenario names the schema as --sql-init files are named (a clone replays it); a driver, started
    in a directory of its own, reads it under the harness's working directory (STREAMCHAOS_CWD)."""
    from chaos.jobs.avro_values import HARNESS_CWD, resolved, schema_file

    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "order.avsc").write_text(json.dumps(NESTED_AVRO))
    (tmp_path / "job.py").write_text("def run(spark):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    ref = job_ref("job.py:run", schema="order_id STRING, buyer STRUCT<name: STRING>, amount LONG, ts TIMESTAMP",
                  sink="parquet", encoding="avro:schemas/order.avsc")
    encoding = parse_ref(ref).encoding
    assert encoding == "avro:schemas/order.avsc"
    elsewhere = tmp_path / "driver-home"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv(HARNESS_CWD, str(tmp_path))
    assert schema_file(encoding) == tmp_path / "schemas" / "order.avsc"
    # What the driver hands the stand-in source, whose readers run in executors' own directories: absolute.
    assert resolved(encoding) == f"avro:{tmp_path / 'schemas' / 'order.avsc'}" and resolved("json") == "json"
    fields = parse_schema("order_id STRING, buyer STRUCT<name: STRING>, amount LONG, ts TIMESTAMP")
    assert encode({"order_id": "o1", "buyer": {"name": "k"}, "amount": 1, "ts": MS * 1000}, encoding, fields)


def test_an_avro_schema_file_that_is_missing_or_does_not_fit_the_payload_is_one_line(tmp_path):
    ddl = "order_id STRING, amount LONG, ts TIMESTAMP"
    (tmp_path / "other.avsc").write_text(json.dumps({"type": "record", "name": "X", "fields": [
        {"name": "order_id", "type": "string"}]}))
    (tmp_path / "broken.avsc").write_text("{not json")
    for encoding, words in [(f"avro:{tmp_path}/gone.avsc", "cannot read the job's Avro schema"),
                            (f"avro:{tmp_path}/broken.avsc", "not an Avro schema"),
                            (f"avro:{tmp_path}/other.avsc", "amount, ts missing"),
                            ("avro", "use one of json, csv, avro:FILE, avro-confluent:FILE")]:
        with pytest.raises(UserError, match=words):
            JobSpec("job:run", ddl, "parquet", encoding=encoding).validate()
    with pytest.raises(UserError, match="give --schema too"):
        JobSpec("job:run", None, "parquet", encoding=f"avro:{tmp_path}/other.avsc").validate()
