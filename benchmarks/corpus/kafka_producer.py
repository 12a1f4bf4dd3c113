"""Bug: each batch is produced to Kafka from foreachBatch by a plain producer (idempotent, not transactional): a
batch replayed after the driver died between the producer's flush and Spark's commit is produced again. The
producer's idempotence only drops its own retries, never a new producer's second send."""

import json

from confluent_kafka import Producer
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
BOOTSTRAP = "kafka:9092"
TOPIC = "orders-clean"


def write(batch, batch_id):
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True})
    for row in batch.collect():
        producer.produce(TOPIC, key=row["order_id"], value=json.dumps(row.asDict(), default=str))
    if producer.flush(30):
        raise RuntimeError(f"batch {batch_id}: Kafka did not take every record")


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/checkpoints/orders-clean").start()
