"""Order totals per sales region: a Kafka stream joined with a static table of accounts, a plain PySpark job.

Each order names an ``account``; ``accounts.csv`` (beside this file, a dimension table in real life) maps
accounts to regions. The job joins the stream with it, keeps a running sum per region and upserts each
batch's changed regions into ``region_totals`` (``DATABASE_URL``). Orders of an unknown account fall out of
the inner join, so the generated stream must carry real account ids: ``--values`` gives them.

    streamchaos trial examples/orders_by_region.py:run --schema "$ORDER" --sink postgres:region_totals \\
        --key region --values account=@examples/accounts.csv --fault kill-driver@3:sink-done
"""

import os
from pathlib import Path

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, account STRING, amount LONG, ts TIMESTAMP"
ACCOUNTS = Path(__file__).with_name("accounts.csv")


def write_totals(batch, batch_id):
    rows = [tuple(r) for r in batch.collect()]
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.cursor().executemany(
            "INSERT INTO region_totals (region, total, orders) VALUES (%s, %s, %s) "
            "ON CONFLICT (region) DO UPDATE SET total = EXCLUDED.total, orders = EXCLUDED.orders", rows)


def run(spark=None):
    spark = spark or SparkSession.builder.appName("orders-by-region").getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS region_totals (region TEXT PRIMARY KEY, total BIGINT, orders BIGINT)")
    accounts = spark.read.option("header", True).csv(str(ACCOUNTS)).select("account", "region")
    orders = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092"))
        .option("subscribe", "orders")
        .load()
        .select(F.from_json(F.col("value").cast("string"), ORDER).alias("order"))
        .select("order.*")
    )
    totals = (orders.join(F.broadcast(accounts), "account")
              .groupBy("region").agg(F.sum("amount").alias("total"), F.count("*").alias("orders")))
    query = (totals.writeStream.outputMode("update").foreachBatch(write_totals)
             .option("checkpointLocation", "/tmp/checkpoints/orders-by-region").start())
    query.awaitTermination()
    return query


if __name__ == "__main__":
    run()
