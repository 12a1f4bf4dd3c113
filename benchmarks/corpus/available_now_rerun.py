"""Bug: a scheduled ``Trigger.AvailableNow`` job appends without a key and checkpoints to a fresh temporary
directory on every run, so each run (a retry after a crash included) reads the topic from the start again."""

import os
import tempfile

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def write(batch, batch_id):
    rows = [tuple(r) for r in batch.collect()]
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.cursor().executemany("INSERT INTO orders VALUES (%s, %s, %s, %s)", rows)


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders (order_id TEXT, customer TEXT, amount BIGINT, ts TIMESTAMP)")
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return (orders.writeStream.trigger(availableNow=True).foreachBatch(write)
            .option("checkpointLocation", tempfile.mkdtemp(prefix="orders-")).start())
