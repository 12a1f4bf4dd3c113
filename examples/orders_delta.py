"""Orders from Kafka into a lakehouse's Delta tables: a plain PySpark job, three ways of writing the silver table.

* ``run``: Delta's streaming sink, partitioned by customer. Delta records the query's id and batch id in the same
  commit as the files and skips a batch it has already committed: exactly-once.
* ``run_append``: a foreachBatch that appends each batch (and an audit row per batch to a second table). A batch
  replayed after the driver died between the append and Spark's commit is appended again: at-least-once.
* ``run_merge``: a foreachBatch ``MERGE INTO`` keyed by order_id: a replay updates the rows it inserted
  (exactly-once per order).

    streamchaos --spark 4.2.0 trial examples/orders_delta.py:run --schema "$ORDER" \\
        --sink delta:/lake/silver/orders --fault kill-driver@1:sink-done
"""

import os

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
LAKE = os.environ.get("LAKE", "/lake")
SILVER = f"{LAKE}/silver/orders"
AUDIT = f"{LAKE}/audit/batches"


def orders(spark):
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092"))
        .option("subscribe", "orders")
        .load()
        .select(F.from_json(F.col("value").cast("string"), ORDER).alias("order"))
        .select("order.*")
        .withColumn("order_date", F.to_date("ts"))
    )


def run(spark=None):
    spark = spark or SparkSession.builder.appName("orders-delta").getOrCreate()
    return (orders(spark).writeStream.format("delta").outputMode("append").partitionBy("customer")
            .option("checkpointLocation", f"{LAKE}/_checkpoints/orders").start(SILVER))


def append_batch(batch, batch_id):
    batch.write.format("delta").mode("append").save(SILVER)
    audit = batch.sparkSession.createDataFrame([(batch_id, batch.count())], "batch_id LONG, orders LONG")
    audit.write.format("delta").mode("append").save(AUDIT)


def run_append(spark=None):
    spark = spark or SparkSession.builder.appName("orders-delta-append").getOrCreate()
    return (orders(spark).writeStream.foreachBatch(append_batch)
            .option("checkpointLocation", f"{LAKE}/_checkpoints/orders-append").start())


def merge_batch(batch, batch_id):
    batch.createOrReplaceTempView("updates")
    batch.sparkSession.sql(f"""
        MERGE INTO delta.`{SILVER}` AS t USING updates AS s ON t.order_id = s.order_id
        WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *""")


def run_merge(spark=None):
    spark = spark or SparkSession.builder.appName("orders-delta-merge").getOrCreate()
    spark.sql(f"CREATE TABLE IF NOT EXISTS delta.`{SILVER}` "
              "(order_id STRING, customer STRING, amount LONG, ts TIMESTAMP, order_date DATE) USING delta")
    return (orders(spark).writeStream.foreachBatch(merge_batch)
            .option("checkpointLocation", f"{LAKE}/_checkpoints/orders-merge").start())


if __name__ == "__main__":
    run()
