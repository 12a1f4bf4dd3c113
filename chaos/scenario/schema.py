"""The schema of the harness's event stream, in Spark's DDL.

A module of its own because every Python worker that reads the source imports it: from
``chaos.scenario.scenario`` it would drag in polars and numpy (~0.16 s and tens of MiB per worker).
"""

EVENT_SCHEMA = "id LONG, key STRING, value LONG, event_time TIMESTAMP, partition INT, offset LONG"
