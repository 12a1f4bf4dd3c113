"""Bug: each batch keeps one order per customer (``dropDuplicates`` on a column that is not unique) and upserts
it by customer: which order a customer's row ends with depends on how the stream was cut into batches, so a
replay after a crash, or Spark's own answer over the whole stream at once, leaves another row."""

import os

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def write(batch, batch_id):
    first = batch.dropDuplicates(["customer"])
    rows = [(r["customer"], r["order_id"], r["amount"]) for r in first.collect()]
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.cursor().executemany(
            "INSERT INTO latest VALUES (%s, %s, %s) ON CONFLICT (customer) DO UPDATE "
            "SET order_id = EXCLUDED.order_id, amount = EXCLUDED.amount", rows)


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS latest (customer TEXT PRIMARY KEY, order_id TEXT, amount BIGINT)")
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/chk/upsert-nonunique").start()
