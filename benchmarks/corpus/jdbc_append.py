"""Bug: each micro-batch is appended through Spark's JDBC writer (``batch.write.jdbc(mode="append")``) with no key;
a batch replayed after a crash between the write and Spark's commit is appended twice."""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
JDBC_URL = "jdbc:postgresql://localhost:5432/shop"
CONNECTION = {"user": "shop", "password": "shop", "driver": "org.postgresql.Driver"}


def write(batch, batch_id):
    batch.write.jdbc(JDBC_URL, "orders", mode="append", properties=CONNECTION)


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/chk/jdbc-append").start()
