"""Correct twin of retry_unmarked: the retry path raises the high-water mark in the transaction that inserts the
rows, as a first attempt does, so a retried batch is inserted at most once however many times it is retried."""

import os

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def write(batch, batch_id):
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("INSERT INTO attempts VALUES (%s, 1) ON CONFLICT (batch) DO UPDATE SET n = attempts.n + 1",
                     (batch_id,))
    rows = [tuple(r) for r in batch.collect()]
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:  # one transaction, first attempt or retry
        if conn.execute("UPDATE progress SET batch = %s WHERE batch < %s RETURNING batch",
                        (batch_id, batch_id)).fetchone() is not None:
            conn.cursor().executemany("INSERT INTO orders VALUES (%s, %s, %s, %s)", rows)


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS progress (batch BIGINT)")
        conn.execute("INSERT INTO progress SELECT -1 WHERE NOT EXISTS (SELECT 1 FROM progress)")
        conn.execute("CREATE TABLE IF NOT EXISTS attempts (batch BIGINT PRIMARY KEY, n INT)")
        conn.execute("CREATE TABLE IF NOT EXISTS orders (order_id TEXT, customer TEXT, amount BIGINT, ts TIMESTAMP)")
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/chk/orders-retry").start()
