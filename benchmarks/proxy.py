"""Benchmark: what the embedded fault proxy costs with no toxic set, against a direct connection.

    python benchmarks/proxy.py [--pings 2000] [--megabytes 200]

Measured in the same run, on loopback, through the toxiproxy-python client like the harness:
round-trip time of small messages (median and p99) and bulk throughput (an echo server; the
payload goes there and back). Target: under 1 ms median added round trip. Prints the
process's peak RSS too.
"""

from __future__ import annotations

import argparse
import resource
import socket
import socketserver
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toxiproxy import Toxiproxy  # noqa: E402

from chaos.nemesis.toxiproxy_api import ToxiproxyServer  # noqa: E402


class Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(1 << 16):
            self.request.sendall(data)


def rtts(port: int, n: int) -> list[float]:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        out = []
        for _ in range(n):
            t = time.perf_counter()
            sock.sendall(b"x" * 64)
            got = 0
            while got < 64:
                got += len(sock.recv(64 - got))
            out.append(time.perf_counter() - t)
        return out


def throughput(port: int, megabytes: int) -> float:
    """MB/s of payload echoed back (sent by one thread, received by this one)."""
    total = megabytes * 1_000_000
    block = b"y" * (1 << 16)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        def send() -> None:
            sent = 0
            while sent < total:
                chunk = block[: min(len(block), total - sent)]
                sock.sendall(chunk)
                sent += len(chunk)

        t = time.perf_counter()
        sender = threading.Thread(target=send)
        sender.start()
        got = 0
        while got < total:
            got += len(sock.recv(1 << 20))
        sender.join()
        return megabytes / (time.perf_counter() - t)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pings", type=int, default=2000)
    parser.add_argument("--megabytes", type=int, default=200)
    args = parser.parse_args()
    echo = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    echo.daemon_threads = True
    threading.Thread(target=echo.serve_forever, daemon=True).start()
    direct_port = echo.server_address[1]
    with ToxiproxyServer() as server:
        client = Toxiproxy()
        client.update_api_consumer("127.0.0.1", server.port)
        proxy = client.create(upstream=f"127.0.0.1:{direct_port}", name="bench")
        proxy_port = int(proxy.listen.rsplit(":", 1)[1])
        rtts(proxy_port, 100)  # warm up
        d, p = rtts(direct_port, args.pings), rtts(proxy_port, args.pings)
        d_med, p_med = statistics.median(d) * 1000, statistics.median(p) * 1000
        d99, p99 = (statistics.quantiles(x, n=100)[98] * 1000 for x in (d, p))
        print(f"round trip, {args.pings} x 64 B: direct median {d_med:.3f} ms (p99 {d99:.3f}), "
              f"proxy median {p_med:.3f} ms (p99 {p99:.3f}); added {p_med - d_med:.3f} ms, ratio {p_med / d_med:.1f}x")
        td, tp = throughput(direct_port, args.megabytes), throughput(proxy_port, args.megabytes)
        print(f"throughput, {args.megabytes} MB echoed: direct {td:.0f} MB/s, proxy {tp:.0f} MB/s, "
              f"ratio proxy/direct {tp / td:.2f}")
    echo.shutdown()
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print("target: under 1 ms median added round trip:", "met" if p_med - d_med < 1.0 else "MISSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
