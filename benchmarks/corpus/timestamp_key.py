"""Bug: the idempotence key is the order id plus ``current_timestamp()`` (to "version" each write); a replayed
batch writes at another time, so its rows get new keys and the insert keeps both copies."""

import os

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def write(batch, batch_id):
    key = F.concat_ws("@", "order_id", F.current_timestamp().cast("string")).alias("row_key")
    rows = [tuple(r) for r in batch.select(key, "customer", "amount").collect()]
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.cursor().executemany("INSERT INTO payments VALUES (%s, %s, %s) ON CONFLICT (row_key) DO NOTHING", rows)


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS payments (row_key TEXT PRIMARY KEY, customer TEXT, amount BIGINT)")
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/chk/timestamp-key").start()
