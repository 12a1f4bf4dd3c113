"""Page views per page and minute, from Kafka into PostgreSQL: an event-time job with Spark's defaults.

Counts views in one-minute event-time windows with a 30-second watermark and emits each window once, when
the watermark passes its end (append mode); every micro-batch upserts its windows by (window, page).
Views that arrive behind the watermark are dropped, as Spark promises: streamchaos judges them optional,
never lost.

    streamchaos trial examples/page_views_windowed.py:run --schema "$VIEW" --sink postgres:page_minutes \\
        --late-fraction 0.05 --fault kill-driver@3:sink-done
"""

import os

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

VIEW = "page STRING, user_id LONG, at TIMESTAMP"


def upsert_windows(batch, batch_id):
    rows = [tuple(r) for r in batch.collect()]
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.cursor().executemany(
            "INSERT INTO page_minutes (minute, page, views) VALUES (%s, %s, %s) "
            "ON CONFLICT (minute, page) DO UPDATE SET views = EXCLUDED.views", rows)


def run(spark=None):
    spark = spark or SparkSession.builder.appName("page-minutes").getOrCreate()
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS page_minutes "
                     "(minute TIMESTAMP, page TEXT, views BIGINT, PRIMARY KEY (minute, page))")
    views = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092"))
        .option("subscribe", "page-views")
        .load()
        .select(F.from_json(F.col("value").cast("string"), VIEW).alias("view"))
        .select("view.*")
    )
    per_minute = (
        views.withWatermark("at", "30 seconds")
        .groupBy(F.window("at", "1 minute"), "page")
        .count()
        .select(F.col("window.start").alias("minute"), "page", F.col("count").alias("views"))
    )
    return (per_minute.writeStream.outputMode("append").foreachBatch(upsert_windows)
            .option("checkpointLocation", "/tmp/checkpoints/page-minutes").start())


if __name__ == "__main__":
    run()
