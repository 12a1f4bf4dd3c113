"""Orders from Kafka into PostgreSQL through a Python streaming data source: a plain PySpark job.

Each task of a micro-batch INSERTs its rows (``write``, on the executors); the driver's ``commit`` has
nothing left to do. A batch replayed after a driver crash is written again: at-least-once, the way a
sink without a transaction keyed by the batch id is.

    streamchaos trial examples/orders_sink.py:run --schema "$ORDER" --sink postgres:orders \\
        --fault kill-driver@3:sink-done
"""

import os

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, WriterCommitMessage

ORDER = "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP"


class OrdersWriter(DataSourceStreamWriter):
    def __init__(self, url: str) -> None:
        self.url = url

    def write(self, iterator):
        import psycopg

        rows = [tuple(r) for r in iterator]
        with psycopg.connect(self.url) as conn:
            conn.cursor().executemany("INSERT INTO orders (order_id, customer, amount, ts) VALUES (%s, %s, %s, %s)",
                                      rows)
        return WriterCommitMessage()

    def commit(self, messages, batchId):  # noqa: N803 - Spark's parameter name
        pass

    def abort(self, messages, batchId):  # noqa: N803
        pass


class OrdersSink(DataSource):
    @classmethod
    def name(cls):
        return "orders_pg"

    def streamWriter(self, schema, overwrite):  # noqa: N802 - Spark's method name
        return OrdersWriter(self.options["url"])


def run(spark=None):
    import psycopg

    spark = spark or SparkSession.builder.appName("orders-sink").getOrCreate()
    url = os.environ["DATABASE_URL"]
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders (order_id TEXT, customer TEXT, amount BIGINT, ts TIMESTAMP)")
    spark.dataSource.register(OrdersSink)
    orders = (
        spark.readStream.format("kafka").option("subscribe", "orders").load()
        .select(F.from_json(F.col("value").cast("string"), ORDER).alias("order")).select("order.*")
    )
    return (orders.writeStream.format("orders_pg").option("url", url)
            .option("checkpointLocation", "/tmp/checkpoints/orders-sink").start())


if __name__ == "__main__":
    run()
