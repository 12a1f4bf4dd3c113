"""Orders from Kafka appended to PostgreSQL: a plain PySpark job with an at-least-once sink.

Each micro-batch INSERTs its orders into ``orders``. A driver that dies after the insert committed and
before Spark recorded the batch replays it on restart: its rows are inserted again (duplicates).

    streamchaos trial examples/orders_append.py:run --schema "$ORDER" --sink postgres:orders \\
        --fault kill-driver@3:sink-done
"""

import os

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def append_orders(batch, batch_id):
    rows = [tuple(r) for r in batch.collect()]
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.cursor().executemany(
            "INSERT INTO orders (order_id, customer, amount, ts) VALUES (%s, %s, %s, %s)", rows)


def run(spark=None):
    spark = spark or SparkSession.builder.appName("orders-append").getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders "
                     "(order_id TEXT, customer TEXT, amount BIGINT, ts TIMESTAMP)")
    orders = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092"))
        .option("subscribe", "orders")
        .load()
        .select(F.from_json(F.col("value").cast("string"), ORDER).alias("order"))
        .select("order.*")
    )
    return (orders.writeStream.foreachBatch(append_orders)
            .option("checkpointLocation", "/tmp/checkpoints/orders-append").start())


if __name__ == "__main__":
    run()
