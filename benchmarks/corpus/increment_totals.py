"""Bug: each batch's per-customer sums are added to the stored totals (total = total + delta): a replayed batch
is added twice."""

import os

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def write(batch, batch_id):
    sums = batch.groupBy("customer").agg(F.sum("amount").alias("total"), F.count("*").alias("orders"))
    rows = [tuple(r) for r in sums.collect()]
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.cursor().executemany(
            "INSERT INTO totals VALUES (%s, %s, %s) ON CONFLICT (customer) DO UPDATE "
            "SET total = totals.total + EXCLUDED.total, orders = totals.orders + EXCLUDED.orders", rows)


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS totals (customer TEXT PRIMARY KEY, total BIGINT, orders BIGINT)")
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/chk/increment-totals").start()
