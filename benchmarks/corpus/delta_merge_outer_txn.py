"""Bug: a foreachBatch MERGE that adds each batch's sums per customer, made idempotent with Delta's txnAppId/txnVersion
session settings, set on the session the job built. The query's batches run in a session cloned from it when the
query started, where the MERGE runs too: it never sees the settings, and a replayed batch adds its sums twice."""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
TABLE = "/lake/gold/customer_totals"
APP_ID = "customer-totals"
ON_BATCH_SESSION = False


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    spark.sql(f"CREATE TABLE IF NOT EXISTS delta.`{TABLE}` (customer STRING, total LONG) USING delta")

    def add(batch, batch_id):
        settings = batch.sparkSession if ON_BATCH_SESSION else spark
        batch.groupBy("customer").agg(F.sum("amount").alias("total")).createOrReplaceTempView("sums")
        settings.conf.set("spark.databricks.delta.write.txnAppId", APP_ID)
        settings.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        batch.sparkSession.sql(f"MERGE INTO delta.`{TABLE}` t USING sums s ON t.customer = s.customer "
                               "WHEN MATCHED THEN UPDATE SET t.total = t.total + s.total "
                               "WHEN NOT MATCHED THEN INSERT (customer, total) VALUES (s.customer, s.total)")

    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(add).option("checkpointLocation", "/lake/_checkpoints/totals").start()
