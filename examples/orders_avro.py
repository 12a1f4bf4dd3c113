"""Orders from Kafka in Avro, as a schema registry's serializer writes them; the paid ones appended to Parquet.

The producer's schema is ``orders.avsc`` beside this file; each record's value is the registry's five-byte header
(a zero byte and the schema's id) and the Avro bytes, which the job strips before ``from_avro``. The harness writes
the trial's records in that very schema (``--kafka-value avro-confluent:FILE``) and adds Spark's Avro functions to
the job's class path, as ``spark-submit --packages org.apache.spark:spark-avro_2.13:VERSION`` would:

    streamchaos --spark 4.2.0 trial examples/orders_avro.py:run --schema "$ORDER" --sink parquet \\
        --kafka-value avro-confluent:examples/orders.avsc --fault kill-driver@2:sink-done
"""

import os
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
ORDER_AVRO = Path(__file__).with_name("orders.avsc").read_text()
BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092")


def run(spark=None):
    spark = spark or SparkSession.builder.appName("orders-avro").getOrCreate()
    orders = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", BOOTSTRAP)
              .option("subscribe", "orders-avro")
              .option("startingOffsets", "earliest")
              .load()
              .select(from_avro(F.expr("substring(value, 6)"), ORDER_AVRO).alias("o"))
              .select("o.*")
              .where(F.col("amount") > 0))
    return (orders.writeStream.format("parquet")
            .option("path", "/data/orders-avro")
            .option("checkpointLocation", "/data/orders-avro/_checkpoint")
            .start())
