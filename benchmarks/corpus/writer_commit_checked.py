"""Correct twin of writer_commit_unchecked: the commit records the batch id in the same transaction as it
publishes the batch's staged rows, and publishes nothing for a batch id it recorded before: a replay adds
nothing."""

import os

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, WriterCommitMessage

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


class Staged(WriterCommitMessage):
    def __init__(self, batch: int, partition: int) -> None:
        self.batch, self.partition = batch, partition


class PublishingWriter(DataSourceStreamWriter):
    def __init__(self, url: str) -> None:
        self.url = url

    def write(self, iterator):
        import psycopg
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch, partition = int(ctx.getLocalProperty("streaming.sql.batchId")), ctx.partitionId()
        rows = [(batch, partition, *r) for r in iterator]
        with psycopg.connect(self.url) as conn:
            conn.execute("DELETE FROM staging WHERE batch = %s AND part = %s", (batch, partition))
            conn.cursor().executemany("INSERT INTO staging VALUES (%s, %s, %s, %s, %s, %s)", rows)
        return Staged(batch, partition)

    def commit(self, messages, batchId):  # noqa: N803 - Spark's parameter name
        import psycopg

        with psycopg.connect(self.url) as conn:  # one transaction: the record and the rows, or neither
            first = conn.execute("INSERT INTO published VALUES (%s) ON CONFLICT DO NOTHING RETURNING batch",
                                 (batchId,)).fetchone()
            if first is not None:
                conn.execute("INSERT INTO orders SELECT order_id, customer, amount, ts FROM staging WHERE batch = %s",
                             (batchId,))

    def abort(self, messages, batchId):  # noqa: N803
        pass


class Publishing(DataSource):
    @classmethod
    def name(cls):
        return "published_orders"

    def streamWriter(self, schema, overwrite):  # noqa: N802 - Spark's method name
        return PublishingWriter(self.options["url"])


def run(spark=None):
    import psycopg

    spark = spark or SparkSession.builder.getOrCreate()
    url = os.environ["DATABASE_URL"]
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS staging "
                     "(batch BIGINT, part INT, order_id TEXT, customer TEXT, amount BIGINT, ts TIMESTAMP)")
        conn.execute("CREATE TABLE IF NOT EXISTS orders (order_id TEXT, customer TEXT, amount BIGINT, ts TIMESTAMP)")
        conn.execute("CREATE TABLE IF NOT EXISTS published (batch BIGINT PRIMARY KEY)")
    spark.dataSource.register(Publishing)
    orders = (spark.readStream.format("kafka").option("subscribe", "orders").load()
              .select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*"))
    return (orders.writeStream.format("published_orders").option("url", url)
            .option("checkpointLocation", "/chk/writer-commit-checked").start())
