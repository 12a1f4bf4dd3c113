"""Bug: the job keeps its own high-water mark of batches done outside Spark and raises it, committed on its own,
before the batch's rows are computed; a batch at or below the mark is skipped. The query deduplicates orders (Spark
keeps that state), so the rows are computed, and the state store committed, after the mark: a driver that dies
while the state store commits loses the batch. A kill before the function or after it finds nothing."""

import os

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def write(batch, batch_id):
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        if conn.execute("UPDATE progress SET batch = %s WHERE batch < %s RETURNING batch",
                        (batch_id, batch_id)).fetchone() is None:
            return  # at or below the mark: done before
    rows = [tuple(r) for r in batch.collect()]  # the dedup runs, and its state commits, after the mark
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.cursor().executemany("INSERT INTO orders VALUES (%s, %s, %s, %s)", rows)


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS progress (batch BIGINT)")
        conn.execute("INSERT INTO progress SELECT -1 WHERE NOT EXISTS (SELECT 1 FROM progress)")
        conn.execute("CREATE TABLE IF NOT EXISTS orders (order_id TEXT, customer TEXT, amount BIGINT, ts TIMESTAMP)")
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*")
              .dropDuplicates(["order_id"]))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/chk/progress-first").start()
