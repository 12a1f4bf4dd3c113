"""Bug: each micro-batch replaces its own rows, deleted by the batch's order ids and appended again through Spark's
JDBC writer. A batch replayed after its driver died writes the same rows over the first attempt's: idempotent. But a
task Spark runs again after its executor died, once the task had committed its partition, appends the partition a
second time: only an executor killed inside the write finds it."""

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"
JDBC_URL = "jdbc:postgresql://localhost:5432/shop"
CONNECTION = {"user": "shop", "password": "shop", "driver": "org.postgresql.Driver"}


def write(batch, batch_id):
    ids = [r.order_id for r in batch.select("order_id").collect()]
    with psycopg.connect(host="localhost", dbname="shop", user="shop", password="shop", autocommit=True) as conn:
        conn.execute("DELETE FROM orders WHERE order_id = ANY(%s)", (ids,))
    batch.write.jdbc(JDBC_URL, "orders", mode="append", properties=CONNECTION)


def run(spark=None):
    spark = spark or SparkSession.builder.getOrCreate()
    with psycopg.connect(host="localhost", dbname="shop", user="shop", password="shop", autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders (order_id TEXT, customer TEXT, amount BIGINT, ts TIMESTAMP)")
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return orders.writeStream.foreachBatch(write).option("checkpointLocation", "/chk/replace-by-ids").start()
