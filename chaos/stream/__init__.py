"""The data: the replayable event log and its Spark source, the socket feed, the catalogue's sinks."""
