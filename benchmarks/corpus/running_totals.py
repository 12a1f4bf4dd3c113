"""Correct twin of increment_totals: Spark keeps the running totals in its state and each batch upserts the
absolute values; a replay writes the same totals again."""

import os

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def write(batch, batch_id):
    rows = [tuple(r) for r in batch.collect()]
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.cursor().executemany(
            "INSERT INTO totals VALUES (%s, %s, %s) ON CONFLICT (customer) DO UPDATE "
            "SET total = EXCLUDED.total, orders = EXCLUDED.orders", rows)


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS totals (customer TEXT PRIMARY KEY, total BIGINT, orders BIGINT)")
    totals = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*")
              .groupBy("customer").agg(F.sum("amount").alias("total"), F.count("*").alias("orders")))
    return (totals.writeStream.outputMode("update").foreachBatch(write)
            .option("checkpointLocation", "/chk/running-totals").start())
