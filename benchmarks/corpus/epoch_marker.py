"""Bug: a row-level ``ForeachWriter`` marks its partition of the epoch done as it opens, in a transaction of its
own, before it writes the rows; a partition retried after its executor died (or replayed after a driver crash)
finds the mark, is skipped, and its rows are never written."""

import os

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


class EarlyMarkWriter:
    def __init__(self, url: str) -> None:
        self.url = url  # read on the driver: executors do not have the driver's environment

    def open(self, partition_id, epoch_id):
        import psycopg

        self.conn = psycopg.connect(self.url)
        marked = self.conn.execute("INSERT INTO partitions_done VALUES (%s, %s) ON CONFLICT DO NOTHING "
                                   "RETURNING epoch", (epoch_id, partition_id)).fetchone()
        self.conn.commit()  # the mark is committed before any row is
        return marked is not None

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
        conn.execute("CREATE TABLE IF NOT EXISTS partitions_done "
                     "(epoch BIGINT, part BIGINT, PRIMARY KEY (epoch, part))")
        conn.execute("CREATE TABLE IF NOT EXISTS orders (order_id TEXT, customer TEXT, amount BIGINT, ts TIMESTAMP)")
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return (orders.writeStream.foreach(EarlyMarkWriter(os.environ["DATABASE_URL"]))
            .option("checkpointLocation", "/chk/epoch-marker").start())
