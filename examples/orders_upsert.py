"""Per-customer order totals from Kafka into PostgreSQL, upserted by customer: a plain PySpark job.

Reads the ``orders`` topic, parses the JSON payload, drops non-positive amounts and keeps a running sum
and count per customer; every micro-batch upserts its changed customers into ``customer_totals``
(``DATABASE_URL``). A replayed batch writes the same totals again: the table ends exactly-once.

    streamchaos trial examples/orders_upsert.py:run --schema "$ORDER" --sink postgres:customer_totals \\
        --key customer --fault kill-driver@3:sink-done
"""

import os

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def write_totals(batch, batch_id):
    rows = [tuple(r) for r in batch.collect()]
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.cursor().executemany(
            "INSERT INTO customer_totals (customer, total, orders) VALUES (%s, %s, %s) "
            "ON CONFLICT (customer) DO UPDATE SET total = EXCLUDED.total, orders = EXCLUDED.orders", rows)


def run(spark=None):
    spark = spark or SparkSession.builder.appName("order-totals").getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS customer_totals "
                     "(customer TEXT PRIMARY KEY, total BIGINT, orders BIGINT)")
    totals = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092"))
        .option("subscribe", "orders")
        .load()
        .select(F.from_json(F.col("value").cast("string"), ORDER).alias("order"))
        .select("order.*")
        .where(F.col("amount") > 100)
        .withWatermark("ts", "10 minutes")
        .groupBy("customer")
        .agg(F.sum("amount").alias("total"), F.count("*").alias("orders"))
    )
    query = (totals.writeStream.outputMode("update").foreachBatch(write_totals)
             .option("checkpointLocation", "/tmp/checkpoints/order-totals").start())
    query.awaitTermination()
    return query


if __name__ == "__main__":
    run()
