"""Correct twin of jdbc_append: Spark's JDBC writer fills a staging table, then one statement moves its rows into
``orders`` keyed by the order id (``ON CONFLICT DO NOTHING``): a replayed batch's rows are already there."""

import os

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
JDBC_URL = "jdbc:postgresql://localhost:5432/shop"
CONNECTION = {"user": "shop", "password": "shop", "driver": "org.postgresql.Driver"}


def write(batch, batch_id):
    batch.write.jdbc(JDBC_URL, "orders_staging", mode="overwrite", properties=CONNECTION)
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("INSERT INTO orders SELECT order_id, customer, amount, ts FROM orders_staging "
                     "ON CONFLICT (order_id) DO NOTHING")


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders "
                     "(order_id TEXT PRIMARY KEY, customer TEXT, amount BIGINT, ts TIMESTAMP)")
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/chk/jdbc-staged").start()
