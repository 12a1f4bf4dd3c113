"""Bug: a retried batch takes a recovery path that is not idempotent. Each attempt of a batch is counted first; a
first attempt inserts the rows and raises the high-water mark in one transaction, a batch attempted before and
still below the mark is taken for one that died before that transaction and inserted without raising it. One crash
is survived (killed while reading: retried once; killed after the commit: skipped); a second crash after the
retry's insert, before Spark's commit, has the batch inserted again."""

import os

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def write(batch, batch_id):
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        retried = conn.execute("INSERT INTO attempts VALUES (%s, 1) ON CONFLICT (batch) DO UPDATE "
                               "SET n = attempts.n + 1 RETURNING n", (batch_id,)).fetchone()[0] > 1
    rows = [tuple(r) for r in batch.collect()]
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:  # one transaction
        if retried:  # the first attempt died before its insert: insert now (the mark is left for the next batch)
            if conn.execute("SELECT batch FROM progress").fetchone()[0] < batch_id:
                conn.cursor().executemany("INSERT INTO orders VALUES (%s, %s, %s, %s)", rows)
        elif conn.execute("UPDATE progress SET batch = %s WHERE batch < %s RETURNING batch",
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
