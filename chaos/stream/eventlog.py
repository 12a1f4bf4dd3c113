"""A partitioned, replayable event log served over loopback HTTP (a tiny Kafka for one scenario).

The streaming source asks it for offsets and reads ranges ``[start, end)`` of a partition. Offsets
are per partition; a batch is cut in the log's global append order, so ``advance(start, B)``
always returns the same end for the same start: batch N covers the same offsets in every replay.

Endpoints: ``GET /meta``, ``GET /advance?from=<offsets json>&max=<rows>``,
``GET /read?p=<partition>&start=<offset>&end=<offset>``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

import numpy as np
import polars as pl

from chaos.machine.httpserver import QuietHTTPServer


class EventLog:
    """The log's content, indexed for offset cuts."""

    def __init__(self, events: pl.DataFrame, partitions: int) -> None:
        self.partitions = partitions
        self.total = events.height
        self.rows: list[list[list]] = []
        self.ids: list[np.ndarray] = []
        for p in range(partitions):
            part = events.filter(pl.col("partition") == p).sort("offset")
            ms = part["event_time"].dt.epoch("ms")
            self.ids.append(part["id"].to_numpy())
            self.rows.append(
                [list(r) for r in zip(part["id"], part["key"], part["value"], ms, part["partition"],
                                      part["offset"], strict=True)]
            )

    def offsets_at(self, cut: int) -> dict[str, int]:
        """Per-partition offsets of the first ``cut`` events in append order."""
        return {str(p): int(np.searchsorted(self.ids[p], cut)) for p in range(self.partitions)}

    def advance(self, start: dict[str, int], max_rows: int | None) -> dict[str, int]:
        consumed = sum(int(v) for v in start.values())
        cut = self.total if max_rows is None else min(self.total, consumed + max_rows)
        return self.offsets_at(cut)

    def read(self, partition: int, start: int, end: int) -> list[list]:
        return self.rows[partition][start:end]


class EventLogServer:
    """Serves one EventLog at a time on 127.0.0.1 (or ``host``: the host's end of the harness's own Docker
    network, ``Cluster.host``); ``load`` swaps the log between trials."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.log: EventLog | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep stderr quiet
                pass

            def do_GET(self) -> None:
                url = urlparse(self.path)
                q = {k: v[0] for k, v in parse_qs(url.query).items()}
                log = server.log
                try:
                    if log is None:
                        raise LookupError("no event log loaded")
                    if url.path == "/meta":
                        body = {"partitions": log.partitions, "total": log.total}
                    elif url.path == "/advance":
                        limit = int(q["max"]) if "max" in q else None
                        body = log.advance(json.loads(q["from"]), limit)
                    elif url.path == "/read":
                        body = log.read(int(q["p"]), int(q["start"]), int(q["end"]))
                    else:
                        self.send_error(404)
                        return
                except (LookupError, KeyError, ValueError) as exc:
                    self.send_error(400, str(exc))
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the reader was killed mid-response (a fault did that): nothing to answer

        self.httpd = QuietHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="eventlog", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def load(self, events: pl.DataFrame, partitions: int) -> None:
        self.log = EventLog(events, partitions)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
