"""Bug: each batch first records its id as done (committed on its own), then inserts its rows, and a batch
already recorded is skipped; a driver that dies between the two loses the batch. (Of my own: the classic
"commit the offset, then write".)"""

import os

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def write(batch, batch_id):
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        if conn.execute("INSERT INTO batches_done VALUES (%s) ON CONFLICT DO NOTHING RETURNING batch",
                        (batch_id,)).fetchone() is None:
            return  # done before
    rows = [tuple(r) for r in batch.collect()]  # a Spark job: the rows are computed after the marker
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.cursor().executemany("INSERT INTO orders VALUES (%s, %s, %s, %s)", rows)


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS batches_done (batch BIGINT PRIMARY KEY)")
        conn.execute("CREATE TABLE IF NOT EXISTS orders (order_id TEXT, customer TEXT, amount BIGINT, ts TIMESTAMP)")
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/chk/marker-before-rows").start()
