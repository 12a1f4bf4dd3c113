"""Orders from Kafka, cleaned, back to Kafka: the shape of most streaming jobs, two ways of writing the topic.

* ``run``: Spark's Kafka sink. Its producers are not transactional: a batch replayed after the driver died between
  the batch's writes and Spark's commit is written again (Spark's Kafka guide: at-least-once).
* ``run_batch``: a foreachBatch that writes each batch with Spark's batch Kafka writer, as jobs do to add a
  per-batch step: the same replay, the same duplicates.

    streamchaos --spark 4.2.0 trial examples/orders_kafka.py:run --schema "$ORDER" \\
        --sink kafka:orders-clean --fault kill-driver@2:sink-done
"""

import os

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092")


def cleaned(spark):
    orders = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", BOOTSTRAP)
              .option("subscribe", "orders")
              .option("startingOffsets", "earliest")
              .load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o"))
              .select("o.*")
              .where(F.col("amount") > 0))
    return orders.select(F.col("order_id").alias("key"),
                         F.to_json(F.struct("order_id", "customer", "amount", "ts")).alias("value"))


def run(spark=None):
    spark = spark or SparkSession.builder.appName("orders-kafka").getOrCreate()
    return (cleaned(spark).writeStream.format("kafka")
            .option("kafka.bootstrap.servers", BOOTSTRAP)
            .option("topic", "orders-clean")
            .option("checkpointLocation", "/tmp/checkpoints/orders-kafka")
            .start())


def write_batch(batch, batch_id):
    (batch.write.format("kafka")
     .option("kafka.bootstrap.servers", BOOTSTRAP)
     .option("topic", "orders-clean")
     .save())


def run_batch(spark=None):
    spark = spark or SparkSession.builder.appName("orders-kafka-batch").getOrCreate()
    return (cleaned(spark).writeStream.foreachBatch(write_batch)
            .option("checkpointLocation", "/tmp/checkpoints/orders-kafka-batch")
            .start())
