"""Bug: a row-level ``ForeachWriter`` inserts each row as it comes and ignores the epoch id ``open`` is given; a
batch replayed after a crash is inserted twice."""

import os

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


class RowWriter:
    def __init__(self, url: str) -> None:
        self.url = url  # read on the driver: executors do not have the driver's environment

    def open(self, partition_id, epoch_id):
        import psycopg

        self.conn = psycopg.connect(self.url)
        return True  # every epoch, replays included

    def process(self, row):
        self.conn.execute("INSERT INTO orders VALUES (%s, %s, %s, %s)", tuple(row))

    def close(self, error):
        if error is None:
            self.conn.commit()
        self.conn.close()


def run(spark=None):
    import psycopg

    spark = spark or SparkSession.builder.getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders (order_id TEXT, customer TEXT, amount BIGINT, ts TIMESTAMP)")
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return (orders.writeStream.foreach(RowWriter(os.environ["DATABASE_URL"]))
            .option("checkpointLocation", "/chk/foreach-writer").start())
