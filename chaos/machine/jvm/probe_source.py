"""A tiny streaming Python data source for the class archives' workload (chaos/machine/jvm/archive.py).

The archives hold the classes their dumping JVM loaded, so that workload must reach what a trial's
query reaches: a Python data source read as micro-batches (the driver's planner process, the
executors' Arrow batches), not only a rate source. Its own module, so the executors' Python workers
import it by name (the pickled reader refers to it).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

PROBE_SOURCE_NAME = "streamchaos-archive-probe"
ROWS_PER_BATCH = 20


class ProbeStreamReader(DataSourceStreamReader):
    def initialOffset(self) -> dict:
        return {"n": 0}

    def latestOffset(self, start: dict, limit) -> dict:
        return {"n": start["n"] + ROWS_PER_BATCH}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        middle = (start["n"] + end["n"]) // 2
        return [InputPartition((start["n"], middle)), InputPartition((middle, end["n"]))]

    def read(self, partition: InputPartition):
        first, last = partition.value
        for i in range(first, last):
            yield (i % 5, i)

    def commit(self, end: dict) -> None:
        """Nothing to release."""


class ProbeSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return PROBE_SOURCE_NAME

    def schema(self) -> str:
        return "k long, v long"

    def streamReader(self, schema) -> ProbeStreamReader:
        return ProbeStreamReader()
