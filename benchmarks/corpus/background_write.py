"""Bug: the batch's rows are handed to a background thread that writes them a moment later, and the function
returns at once; a driver that dies after Spark committed the batch, before the thread wrote, loses it."""

import os
import threading
import time

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def insert_later(rows):
    time.sleep(2)  # a slow network, a batching client
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.cursor().executemany("INSERT INTO orders VALUES (%s, %s, %s, %s) ON CONFLICT (order_id) DO NOTHING", rows)


def write(batch, batch_id):
    rows = [tuple(r) for r in batch.collect()]
    threading.Thread(target=insert_later, args=(rows,)).start()


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders "
                     "(order_id TEXT PRIMARY KEY, customer TEXT, amount BIGINT, ts TIMESTAMP)")
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/chk/background-write").start()
