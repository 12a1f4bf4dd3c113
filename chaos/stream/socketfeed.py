"""The line server behind the ``socket-source`` pipeline: what ``nc -lk`` is in Spark's examples.

Spark's socket source connects to it and buffers the lines it receives in the driver; the source
keeps no position the server could resume from, and Spark documents it as not fault-tolerant. The
feed sends the events as CSV lines (``id,key,value,event_ms``) in log order, one chunk of
``events_per_batch`` lines when a reader connects and the next one each time a batch commits (the
controller tells it; without a commit for 5 s it sends the next chunk anyway, as a producer does), so
a batch is one chunk, as with the replayable source. Lines go to whoever
is connected at the time and are never sent again: those a killed driver had buffered are gone.
Binds 127.0.0.1 only; one thread per connection; nothing outlives ``close``.
"""

from __future__ import annotations

import socket
import threading
import time

import polars as pl

QUIET_S = 3.0
PRODUCER_IDLE_S = 5.0  # no commit for this long after a chunk: send the next one anyway


class SocketFeed:
    def __init__(self, events: pl.DataFrame, chunk: int) -> None:
        ordered = events.sort("id")
        ms = ordered["event_time"].dt.epoch("ms").to_list()
        self.lines = [f"{i},{k},{v},{t}\n" for i, k, v, t in
                      zip(ordered["id"].to_list(), ordered["key"].to_list(), ordered["value"].to_list(), ms,
                          strict=True)]
        self.chunk = chunk
        self.sent = 0  # lines handed to a connection so far (never resent)
        self.allowed = 0  # lines the feed may have sent by now (one chunk per committed batch)
        self.connections = 0
        self.finished_at: float | None = None  # wall-clock time the last line went out
        self.current: socket.socket | None = None
        self.cond = threading.Condition()
        self.closed = False
        self.server = socket.create_server(("127.0.0.1", 0))
        self.thread = threading.Thread(target=self._accept, name="socket-feed", daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        host, port = self.server.getsockname()[:2]
        return f"{host}:{port}"

    def advance(self) -> None:
        """A batch committed: let the next chunk go."""
        with self.cond:
            self.allowed = min(len(self.lines), self.sent + self.chunk)
            self.cond.notify_all()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with self.cond:
                self.connections += 1
                self.current = conn  # like nc -lk: the newest reader is served, an older one gets nothing more
                self.allowed = max(self.allowed, min(len(self.lines), self.sent + self.chunk))
                self.cond.notify_all()
            threading.Thread(target=self._serve, args=(conn,), name="socket-feed-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                with self.cond:
                    waited = time.monotonic()
                    while not self.closed and conn is self.current and self.sent >= self.allowed:
                        self.cond.wait(0.5)
                        if time.monotonic() - waited > PRODUCER_IDLE_S and self.sent < len(self.lines):
                            # A producer does not wait for its consumer forever: the next chunk goes anyway.
                            self.allowed = min(len(self.lines), self.sent + self.chunk)
                    if self.closed or conn is not self.current:
                        return
                    batch, self.sent = self.lines[self.sent:self.allowed], self.allowed
                    if self.sent == len(self.lines) and self.finished_at is None:
                        # Stamped before the send, under the lock: a reader that already holds the last
                        # line must see it (after the send, the reader could win the race).
                        self.finished_at = time.time()
                try:
                    conn.sendall("".join(batch).encode())
                except OSError:
                    return  # the reader died: what it had not processed is lost, as with nc

    def quiet(self, last_commit_at: float, seconds: float = QUIET_S) -> bool:
        """Everything sent, and no batch for ``seconds`` since the later of the last send and the last
        commit: the source has nothing left (the drain condition of a source without replayable offsets;
        the socket source plans a batch as soon as lines arrive)."""
        if self.finished_at is None:
            return False
        return time.time() - max(self.finished_at, last_commit_at) > seconds

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        try:
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the accept() of the feed thread (close alone does not)
        except OSError:
            pass
        self.server.close()
        self.thread.join(5)
