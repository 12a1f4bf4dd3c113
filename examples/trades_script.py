"""Large trades from a directory of JSON files to parquet partitioned by day and symbol: a script, as jobs in
repositories are written and started (``spark-submit trades_script.py --input DIR --output DIR``), its query
built at module level from argparse options.

Spark's file sink commits each batch's files in ``_spark_metadata`` with the batch: exactly-once. Run as written,
its arguments after ``--``:

    streamchaos trial examples/trades_script.py --schema "$TRADE" --sink parquet \\
        --fault kill-driver@3:sink-done -- --input /data/trades --output /data/large-trades --min-qty 10
"""

import argparse
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

TRADE = "trade_id STRING, symbol STRING, qty LONG, price DOUBLE, ts TIMESTAMP"

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--input", required=True, help="directory the trades arrive in, one JSON record a line")
parser.add_argument("--output", required=True, help="parquet table of the large trades")
parser.add_argument("--checkpoint", default="/tmp/checkpoints/large-trades")
parser.add_argument("--min-qty", type=int, default=100)
args = parser.parse_args()

spark = SparkSession.builder.appName("large-trades").getOrCreate()
trades = spark.readStream.schema(TRADE).json(args.input)
large = (trades.where(F.col("qty") >= args.min_qty)
         .withColumn("notional", F.col("qty") * F.col("price"))
         .withColumn("date", F.to_date("ts"))
         .select("trade_id", "symbol", "qty", "notional", "ts", "date"))
query = (large.writeStream.format("parquet")
         .partitionBy("date", "symbol")
         .option("path", args.output)
         .option("checkpointLocation", args.checkpoint)
         .start())
query.awaitTermination()
spark.stop()
sys.exit(0)
