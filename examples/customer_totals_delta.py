"""Running totals per customer in a Delta table, kept by a foreachBatch MERGE that adds each batch's sums.

A batch replayed after the driver died between the MERGE and Spark's commit would add its sums twice, so the MERGE is
made idempotent as Delta documents for DML: the session settings ``spark.databricks.delta.write.txnAppId`` and
``spark.databricks.delta.write.txnVersion`` (the batch id) make Delta skip an (app id, version) the table has
committed.

* ``run``: the settings on the batch's own session (``batch.sparkSession``), where its MERGE runs.
* ``run_outer``: the settings on the session the job built, as a job that keeps ``spark`` at hand writes it. A
  streaming query runs its batches in a session of its own (cloned from that one as the query starts), where the
  MERGE runs too: it never sees the settings, and a replayed batch adds its sums again.

    streamchaos --spark 4.2.0 trial examples/customer_totals_delta.py:run --schema "$ORDER" \\
        --sink delta:/lake/gold/customer_totals --key customer --fault kill-driver@2:sink-done
"""

import os

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
TOTALS = f"{os.environ.get('LAKE', '/lake')}/gold/customer_totals"
APP_ID = "customer-totals"  # the same at every start: a replay must name the version it committed
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


def orders(spark):
    return (spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092"))
            .option("subscribe", "orders")
            .load()
            .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o"))
            .select("o.*"))


def add_totals(batch, batch_id, settings_session):
    """The batch's sums per customer added to the table, the MERGE tagged with (APP_ID, batch id) in
    ``settings_session``."""
    sums = batch.groupBy("customer").agg(F.sum("amount").alias("total"), F.count("*").alias("orders"))
    sums.createOrReplaceTempView("batch_totals")
    settings_session.conf.set(TXN_APP_ID, APP_ID)
    settings_session.conf.set(TXN_VERSION, str(batch_id))
    batch.sparkSession.sql(f"""
        MERGE INTO delta.`{TOTALS}` AS t USING batch_totals AS s ON t.customer = s.customer
        WHEN MATCHED THEN UPDATE SET t.total = t.total + s.total, t.orders = t.orders + s.orders
        WHEN NOT MATCHED THEN INSERT (customer, total, orders) VALUES (s.customer, s.total, s.orders)""")


def start(spark, settings_on_batch_session: bool):
    spark.sql(f"CREATE TABLE IF NOT EXISTS delta.`{TOTALS}` (customer STRING, total LONG, orders LONG) USING delta")

    def each_batch(batch, batch_id):
        add_totals(batch, batch_id, batch.sparkSession if settings_on_batch_session else spark)

    return (orders(spark).writeStream.foreachBatch(each_batch)
            .option("checkpointLocation", f"{TOTALS}/_checkpoint").start())


def run(spark=None):
    return start(spark or SparkSession.builder.appName("customer-totals").getOrCreate(), True)


def run_outer(spark=None):
    return start(spark or SparkSession.builder.appName("customer-totals").getOrCreate(), False)
