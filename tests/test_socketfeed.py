"""The socket source's line server: chunks paced by commits, lines never resent, loopback only."""

from __future__ import annotations

import socket
import time

from chaos.scenario.scenario import Scenario, generate_events
from chaos.stream.socketfeed import SocketFeed


def read_lines(sock: socket.socket, n: int, timeout: float = 10.0) -> list[str]:
    sock.settimeout(timeout)
    data = b""
    while data.count(b"\n") < n:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.decode().splitlines()


def test_one_chunk_per_commit_and_a_dead_reader_loses_what_it_was_sent():
    events = generate_events(Scenario("passthrough-append", events=30, events_per_batch=10, partitions=1))
    feed = SocketFeed(events, chunk=10)
    try:
        host, port = feed.address.rsplit(":", 1)
        assert host == "127.0.0.1"
        first = socket.create_connection((host, int(port)))
        lines = read_lines(first, 10)
        assert [int(line.split(",")[0]) for line in lines] == list(range(10))
        assert lines[0].split(",")[1] == events["key"][0]
        feed.advance()  # batch 0 committed
        assert [int(line.split(",")[0]) for line in read_lines(first, 10)] == list(range(10, 20))
        first.close()  # the driver died holding ids 10..19
        second = socket.create_connection((host, int(port)))
        assert [int(line.split(",")[0]) for line in read_lines(second, 10)] == list(range(20, 30))
        assert feed.finished_at is not None and not feed.quiet(time.time(), seconds=60)
        assert feed.quiet(0.0, seconds=0.0)
        second.close()
    finally:
        feed.close()
