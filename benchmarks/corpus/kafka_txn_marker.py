"""Correct twin of kafka_producer: each batch is produced in one Kafka transaction that also commits the batch id
as a consumer group's offset (Kafka's exactly-once processing: ``send_offsets_to_transaction``). A restarted
driver's producer fences the dead one and aborts its open transaction; a batch whose offset is already committed
is skipped. Judged on what a read_committed consumer sees."""

import json

from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
BOOTSTRAP = "kafka:9092"
TOPIC = "orders-clean"
APP = "orders-clean-writer"  # fixed per query: the restarted query's producer fences the dead one


def write(batch, batch_id):
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "transactional.id": APP})
    producer.init_transactions(30)
    marker = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": APP, "enable.auto.commit": False,
                       "isolation.level": "read_committed"})
    try:
        [done] = marker.committed([TopicPartition(TOPIC, 0)], timeout=30)
        if done.offset > batch_id:  # written by a run that died before Spark's commit
            return
        producer.begin_transaction()
        for row in batch.collect():
            producer.produce(TOPIC, key=row["order_id"], value=json.dumps(row.asDict(), default=str))
        producer.send_offsets_to_transaction([TopicPartition(TOPIC, 0, batch_id + 1)],
                                             marker.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
    finally:
        marker.close()


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/checkpoints/orders-clean").start()
