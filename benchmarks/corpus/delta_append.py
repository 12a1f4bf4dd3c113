"""Bug: each batch is appended to a Delta table from foreachBatch with no transaction id: a batch replayed after a
driver died between the append and Spark's commit is appended again."""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
TABLE = "/lake/bronze/orders"


def write(batch, batch_id):
    batch.write.format("delta").mode("append").save(TABLE)


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/lake/_checkpoints/bronze").start()
