"""Trades per symbol and minute from nested JSON on Kafka, timed in epoch milliseconds, into parquet.

Its payload is what a trading gateway sends: the trade nested under ``trade`` with its time as epoch
milliseconds, the client's ``IP Address`` beside it (a name with a space). The schema is declared once, as a
``StructType``, and streamchaos reads it from here: no ``--schema``. ``--time`` says the time's form, so the
stream's event times (late records included) land in its windows:

    streamchaos trial examples/trades_nested.py:run --sink parquet --time trade.trade_time:epoch-ms \\
        --late-fraction 0.05 --fault kill-driver@3:sink-done
"""

import os

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

TRADE = StructType([
    StructField("tradeId", StringType()),
    StructField("symbol", StringType()),
    StructField("qty", LongType()),
    StructField("trade_time", LongType()),  # epoch milliseconds
])
MESSAGE = StructType([StructField("trade", TRADE), StructField("IP Address", StringType())])


def run(spark=None):
    spark = spark or SparkSession.builder.appName("trades-per-minute").getOrCreate()
    trades = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", os.environ.get("KAFKA_BOOTSTRAP", "broker:29092"))
        .option("subscribe", "trades")
        .option("startingOffsets", "earliest")
        .load()
        .select(F.from_json(F.col("value").cast("string"), MESSAGE).alias("m"))
        .select("m.trade.*", F.col("m.`IP Address`").alias("client_ip"))
        .withColumn("traded_at", F.timestamp_millis("trade_time"))
    )
    per_minute = (
        trades.withWatermark("traded_at", "30 seconds")
        .groupBy(F.window("traded_at", "1 minute"), "symbol")
        .agg(F.count("*").alias("trades"), F.sum("qty").alias("qty"))
        .select(F.col("window.start").alias("minute"), "symbol", "trades", "qty")
    )
    return (per_minute.writeStream.format("parquet").outputMode("append")
            .option("path", "/data/lake/trades_per_minute")
            .option("checkpointLocation", "/data/checkpoints/trades_per_minute").start())


if __name__ == "__main__":
    run().awaitTermination()
