"""Orders from Kafka appended to PostgreSQL through Spark's JDBC writer, the way most jobs write a database.

The connection comes from the environment, read when the module is imported (``JDBC_URL``, ``DB_USER``,
``DB_PASSWORD``); each micro-batch is appended with ``batch.write.jdbc``, which creates the table on its first
write. A driver that dies after a batch's rows were written and before Spark recorded the batch appends them
again on restart: at-least-once.

``run_staged`` writes each batch to a staging table with the same writer, then moves it into ``orders`` with
``INSERT ... ON CONFLICT (order_id) DO NOTHING``: the replayed batch's rows are already there, so it is
exactly-once.

    streamchaos trial examples/orders_jdbc.py:run --schema "$ORDER" --sink postgres:orders \\
        --fault kill-driver@3:sink-done
"""

import os

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
JDBC_URL = os.environ.get("JDBC_URL", "jdbc:postgresql://localhost:5432/shop")
CONNECTION = {"user": os.environ.get("DB_USER", "shop"), "password": os.environ.get("DB_PASSWORD", ""),
              "driver": "org.postgresql.Driver"}


def write_orders(batch, batch_id):
    batch.write.jdbc(JDBC_URL, "orders", mode="append", properties=CONNECTION)


def stage_and_insert(batch, batch_id):
    import psycopg

    batch.write.jdbc(JDBC_URL, "orders_staging", mode="overwrite", properties=CONNECTION)
    with psycopg.connect(host="localhost", dbname="shop", user=CONNECTION["user"],
                         password=CONNECTION["password"]) as conn:
        conn.execute("INSERT INTO orders SELECT order_id, customer, amount, ts FROM orders_staging "
                     "ON CONFLICT (order_id) DO NOTHING")


def orders_stream(spark):
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092"))
        .option("subscribe", "orders")
        .load()
        .select(F.from_json(F.col("value").cast("string"), ORDER).alias("order"))
        .select("order.*")
    )


def run(spark=None):
    spark = spark or SparkSession.builder.appName("orders-jdbc").getOrCreate()
    return (orders_stream(spark).writeStream.foreachBatch(write_orders)
            .option("checkpointLocation", "/tmp/checkpoints/orders-jdbc").start())


def run_staged(spark=None):
    import psycopg

    spark = spark or SparkSession.builder.appName("orders-jdbc-staged").getOrCreate()
    with psycopg.connect(host="localhost", dbname="shop", user=CONNECTION["user"],
                         password=CONNECTION["password"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders "
                     "(order_id TEXT PRIMARY KEY, customer TEXT, amount BIGINT, ts TIMESTAMP)")
    return (orders_stream(spark).writeStream.foreachBatch(stage_and_insert)
            .option("checkpointLocation", "/tmp/checkpoints/orders-jdbc-staged").start())


if __name__ == "__main__":
    run()
