"""Per-customer order counts from Kafka into SQLite, replaced batch by batch: a plain PySpark job.

Keeps a running count and sum per customer (complete mode) and, for every micro-batch, replaces the table's
rows in one SQLite transaction. A replayed batch writes the same totals again: exactly-once.

    streamchaos trial examples/orders_sqlite.py:run --schema "$ORDER" --sink sqlite:customer_counts \\
        --key customer --fault kill-driver@3:sink-done
"""

import os
import sqlite3

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


def database() -> str:
    """The SQLite file DATABASE_URL names (sqlite:////abs/path.db)."""
    return os.environ["DATABASE_URL"].removeprefix("sqlite:///")


def replace_counts(batch, batch_id):
    rows = [tuple(r) for r in batch.collect()]
    with sqlite3.connect(database()) as db:
        db.execute("DELETE FROM customer_counts")
        db.executemany("INSERT INTO customer_counts (customer, orders, amount) VALUES (?, ?, ?)", rows)


def run(spark=None):
    spark = spark or SparkSession.builder.appName("customer-counts").getOrCreate()
    with sqlite3.connect(database()) as db:
        db.execute("CREATE TABLE IF NOT EXISTS customer_counts (customer TEXT PRIMARY KEY, orders INTEGER, "
                   "amount INTEGER)")
    counts = (
        spark.readStream.format("kafka").option("subscribe", "orders").load()
        .select(F.from_json(F.col("value").cast("string"), ORDER).alias("order")).select("order.*")
        .groupBy("customer").agg(F.count("*").alias("orders"), F.sum("amount").alias("amount"))
    )
    return (counts.writeStream.outputMode("complete").foreachBatch(replace_counts)
            .option("checkpointLocation", "/tmp/checkpoints/customer-counts").start())


if __name__ == "__main__":
    run()
