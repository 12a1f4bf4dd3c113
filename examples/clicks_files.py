"""Page views from a directory of parquet files into a parquet table: a plain PySpark job.

Reads new files as they land in ``/data/clicks``, keeps the views of signed-in users and writes them with
Spark's file sink, whose ``_spark_metadata`` log commits each batch's files once: exactly-once for every
reader that goes through the log.

    streamchaos trial examples/clicks_files.py:run --sink parquet --fault kill-driver@3:sink-write
"""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

CLICK = "click_id LONG, page STRING, user_id LONG, signed_in BOOLEAN, at TIMESTAMP"


@F.udf("string")
def section(page):
    """The site section a page belongs to (a Python UDF: it runs in the executors' Python workers)."""
    return page.split("-")[0].upper() if page else None


def run(spark=None):
    spark = spark or SparkSession.builder.appName("clicks").getOrCreate()
    views = (
        spark.readStream.schema(CLICK).parquet("/data/clicks")
        .where(F.col("signed_in"))
        .select("click_id", "page", section("page").alias("section"), "at", F.to_date("at").alias("day"))
    )
    return (views.writeStream.format("parquet").option("path", "/data/signed_in_views")
            .option("checkpointLocation", "/data/checkpoints/signed-in-views").start())


if __name__ == "__main__":
    run()
