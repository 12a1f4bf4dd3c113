"""Bug: rows get a generated ``uuid()`` as their idempotence key; a replayed batch gets new keys, and the
"idempotent" insert keeps both copies."""

import os

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def write(batch, batch_id):
    rows = [tuple(r) for r in batch.select(F.expr("uuid()").alias("row_key"), "customer", "amount").collect()]
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.cursor().executemany("INSERT INTO payments VALUES (%s, %s, %s) ON CONFLICT (row_key) DO NOTHING", rows)


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS payments (row_key TEXT PRIMARY KEY, customer TEXT, amount BIGINT)")
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/chk/uuid-key").start()
