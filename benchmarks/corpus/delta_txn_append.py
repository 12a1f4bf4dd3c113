"""Correct twin of delta_append: the append names the query (txnAppId) and the batch (txnVersion), so Delta skips
a batch its log already holds for that application id (Delta's idempotent writes in foreachBatch)."""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
TABLE = "/lake/bronze/orders"
APP_ID = "bronze-orders"  # fixed per query: a restarted query must name itself as before


def write(batch, batch_id):
    (batch.write.format("delta").mode("append").option("txnAppId", APP_ID).option("txnVersion", batch_id)
     .save(TABLE))


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/lake/_checkpoints/bronze").start()
