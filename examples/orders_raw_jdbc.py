"""Orders from Kafka appended to ``raw.orders`` in the team's PostgreSQL, written as such jobs are: the database
named in the code (a docker-compose host), the table made with psycopg at start, each micro-batch appended with
Spark's JDBC writer. The table has columns the database fills itself (``id BIGSERIAL``, ``inserted_at DEFAULT
now()``), and a console query runs beside the sink.

A driver that dies after a batch's rows were written and before Spark recorded the batch appends them again on
restart: at-least-once. Run as written, the harness makes the named database the trial's:

    streamchaos trial examples/orders_raw_jdbc.py:run --schema "$ORDER" --sink postgres:raw.orders \\
        --fault kill-driver@3:sink-done
"""

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
JDBC_URL = "jdbc:postgresql://postgres:5432/shop"
CONNECTION = {"user": "etl", "password": "etl", "driver": "org.postgresql.Driver"}

TABLE = """
CREATE SCHEMA IF NOT EXISTS raw;
CREATE TABLE IF NOT EXISTS raw.orders (
    id BIGSERIAL PRIMARY KEY,
    order_id TEXT NOT NULL,
    customer TEXT,
    amount BIGINT,
    ts TIMESTAMP,
    inserted_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""


def ensure_table():
    with psycopg.connect(host="postgres", port=5432, dbname="shop", user="etl", password="etl") as conn:
        conn.execute(TABLE)


def write_orders(batch, batch_id):
    batch.write.jdbc(JDBC_URL, "raw.orders", mode="append", properties=CONNECTION)


def run(spark=None):
    spark = spark or SparkSession.builder.appName("orders-raw-jdbc").getOrCreate()
    ensure_table()
    orders = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", "kafka:9092")
        .option("subscribe", "orders")
        .load()
        .select(F.from_json(F.col("value").cast("string"), ORDER).alias("order"))
        .select("order.*")
    )
    # A console query beside the real sink, left in from debugging: it runs too, on a checkpoint of its own.
    orders.writeStream.format("console").queryName("debug").option("truncate", "false").start()
    return (orders.writeStream.foreachBatch(write_orders)
            .option("checkpointLocation", "/tmp/checkpoints/orders-raw").start())


if __name__ == "__main__":
    run()
