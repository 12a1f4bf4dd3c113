"""Orders from Kafka through a bronze table into silver: two streaming queries in one plain PySpark job.

The first query lands Kafka's records as they come in a bronze table; the second reads bronze as a stream, parses
and cleans the orders and writes silver. The second query's offsets name versions of the bronze table (or entries
of the bronze directory's log), not Kafka's offsets.

* ``run``: bronze and silver are Delta tables (both Delta's streaming sink): exactly-once end to end.
* ``run_files``: bronze is a file sink's directory of JSON lines, silver a Parquet file sink.
* ``run_gold``: bronze as in ``run``; gold reads bronze's Delta table as a stream (``skipChangeCommits``, as a
  table others also rewrite needs) and sums each customer's orders per 10-second window of their time, a window's
  row appended to a Delta table once the watermark has passed it: Delta as the source of a stateful query.

    streamchaos --spark 4.2.0 trial examples/orders_medallion.py:run --schema "$ORDER" \\
        --sink delta:/lake/bronze/orders,delta:/lake/silver/orders --fault kill-driver@2:sink-done
    streamchaos --spark 4.2.0 trial examples/orders_medallion.py:run_gold --schema "$ORDER" \\
        --sink delta:/lake/bronze/orders,delta:/lake/gold/orders-by-window --fault kill-driver@2:state-commit
    streamchaos trial examples/orders_medallion.py:run_files --schema "$ORDER" \\
        --sink parquet:/lake/bronze/orders-json,parquet --fault kill-driver@2:sink-done
"""

import os

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
LAKE = os.environ.get("LAKE", "/lake")
BRONZE = f"{LAKE}/bronze/orders"
BRONZE_JSON = f"{LAKE}/bronze/orders-json"
SILVER = f"{LAKE}/silver/orders"
GOLD = f"{LAKE}/gold/orders-by-window"
CHECKPOINTS = f"{LAKE}/_checkpoints"


def raw_orders(spark):
    return (spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092"))
            .option("subscribe", "orders")
            .option("startingOffsets", "earliest")
            .load()
            .select(F.col("value").cast("string").alias("payload"), F.col("timestamp").alias("received_at")))


def cleaned(bronze):
    return (bronze.select(F.from_json("payload", ORDER).alias("o"), "received_at")
            .select("o.*", "received_at")
            .where(F.col("amount") > 0)
            .withColumn("order_date", F.to_date("ts")))


def run(spark=None):
    spark = spark or SparkSession.builder.appName("orders-medallion").getOrCreate()
    spark.sql(f"CREATE TABLE IF NOT EXISTS delta.`{BRONZE}` (payload STRING, received_at TIMESTAMP) USING delta")
    (raw_orders(spark).writeStream.format("delta").queryName("bronze")
     .option("checkpointLocation", f"{CHECKPOINTS}/bronze").start(BRONZE))
    silver = cleaned(spark.readStream.format("delta").load(BRONZE))
    return (silver.writeStream.format("delta").queryName("silver").outputMode("append")
            .option("checkpointLocation", f"{CHECKPOINTS}/silver").start(SILVER))


def run_gold(spark=None):
    spark = spark or SparkSession.builder.appName("orders-gold").getOrCreate()
    spark.sql(f"CREATE TABLE IF NOT EXISTS delta.`{BRONZE}` (payload STRING, received_at TIMESTAMP) USING delta")
    (raw_orders(spark).writeStream.format("delta").queryName("bronze")
     .option("checkpointLocation", f"{CHECKPOINTS}/bronze").start(BRONZE))
    orders = cleaned(spark.readStream.format("delta").option("skipChangeCommits", "true").load(BRONZE))
    by_window = (orders.withWatermark("ts", "5 seconds")
                 .groupBy(F.window("ts", "10 seconds"), "customer")
                 .agg(F.count("*").alias("orders"), F.sum("amount").alias("amount"))
                 .select(F.col("window.start").alias("window_start"), "customer", "orders", "amount"))
    return (by_window.writeStream.format("delta").queryName("gold").outputMode("append")
            .option("checkpointLocation", f"{CHECKPOINTS}/gold").start(GOLD))


def run_files(spark=None):
    spark = spark or SparkSession.builder.appName("orders-medallion-files").getOrCreate()
    (raw_orders(spark).writeStream.format("json").queryName("bronze")
     .option("checkpointLocation", f"{CHECKPOINTS}/bronze-json").start(BRONZE_JSON))
    bronze = spark.readStream.schema("payload STRING, received_at TIMESTAMP").json(BRONZE_JSON)
    return (cleaned(bronze).writeStream.format("parquet").queryName("silver")
            .option("checkpointLocation", f"{CHECKPOINTS}/silver-files").start(f"{LAKE}/silver/orders-files"))
