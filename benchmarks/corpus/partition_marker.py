"""Correct twin of epoch_marker: each partition marks its (epoch, partition) done in the transaction that commits its
rows, and ``open`` skips a partition already marked: a retried or replayed partition writes once."""

import os

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


class PartitionWriter:
    def __init__(self, url: str) -> None:
        self.url = url  # read on the driver: executors do not have the driver's environment

    def open(self, partition_id, epoch_id):
        import psycopg

        self.conn = psycopg.connect(self.url)
        self.mark = (epoch_id, partition_id)
        self.write = self.conn.execute("SELECT 1 FROM partitions_done WHERE epoch = %s AND part = %s",
                                       self.mark).fetchone() is None
        return self.write  # close is called for a skipped partition too

    def process(self, row):
        self.conn.execute("INSERT INTO orders VALUES (%s, %s, %s, %s)", tuple(row))

    def close(self, error):
        if error is None and self.write:
            self.conn.execute("INSERT INTO partitions_done VALUES (%s, %s)", self.mark)
            self.conn.commit()
        self.conn.close()


def run(spark=None):
    import psycopg

    spark = spark or SparkSession.builder.getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS partitions_done "
                     "(epoch BIGINT, part BIGINT, PRIMARY KEY (epoch, part))")
        conn.execute("CREATE TABLE IF NOT EXISTS orders (order_id TEXT, customer TEXT, amount BIGINT, ts TIMESTAMP)")
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return (orders.writeStream.foreach(PartitionWriter(os.environ["DATABASE_URL"]))
            .option("checkpointLocation", "/chk/partition-marker").start())
