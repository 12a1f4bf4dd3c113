"""An embedded fault proxy that speaks Toxiproxy's HTTP API (asyncio data path, on the harness's own addresses).

No Toxiproxy server is installable here (nor on many CI machines), so the harness carries its own.
It is driven only through the ``toxiproxy-python`` client, exactly like a real Toxiproxy, so
``TOXIPROXY_URL`` can point the harness at a real one unchanged.

API (Toxiproxy 2.x): ``GET/POST /proxies``, ``GET/POST/DELETE /proxies/{name}``,
``GET/POST /proxies/{name}/toxics``, ``GET/POST/DELETE /proxies/{name}/toxics/{toxic}``,
``POST /reset``, ``GET /version``.

Toxics and their attributes, per direction (``upstream`` = client to server, ``downstream`` = back):

* ``latency`` (latency, jitter: ms): each chunk waits latency ± jitter before it is forwarded;
* ``bandwidth`` (rate: KB/s): chunks are paced to the rate;
* ``slow_close`` (delay: ms): when one side closes, the other is closed only after the delay;
* ``timeout`` (timeout: ms): no data passes; the connection closes after ``timeout``, or, with 0,
  stays open and silent until the toxic is removed;
* ``reset_peer`` (timeout: ms): the connection is reset (RST, "connection reset by peer") after
  ``timeout`` ms (0: at once);
* ``slicer`` (average_size, size_variation: bytes; delay: µs): chunks are cut into small slices;
* ``limit_data`` (bytes): the connection closes once that many bytes have passed.

``toxicity`` (0..1) is drawn once per connection and toxic, as Toxiproxy does. Disabling a proxy
closes its listener and every connection; enabling listens again on the same address.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from chaos.machine.httpserver import QuietHTTPServer

VERSION = "2.9.0-streamchaos"
CHUNK = 32 * 1024
MONITOR_EVERY = 0.01

TOXIC_ATTRIBUTES = {
    "latency": {"latency": 0, "jitter": 0},
    "bandwidth": {"rate": 0},
    "slow_close": {"delay": 0},
    "timeout": {"timeout": 0},
    "reset_peer": {"timeout": 0},
    "slicer": {"average_size": 0, "size_variation": 0, "delay": 0},
    "limit_data": {"bytes": 0},
}
STREAMS = ("upstream", "downstream")


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Toxic:
    name: str
    type: str
    stream: str
    toxicity: float
    attributes: dict

    def to_json(self) -> dict:
        return {"name": self.name, "type": self.type, "stream": self.stream, "toxicity": self.toxicity,
                "attributes": self.attributes}


@dataclass(eq=False)
class Link:
    """One client connection and its upstream connection."""

    client_reader: asyncio.StreamReader
    client_writer: asyncio.StreamWriter
    server_reader: asyncio.StreamReader
    server_writer: asyncio.StreamWriter
    rolls: dict[str, bool] = field(default_factory=dict)  # toxicity drawn once per toxic
    seen: dict[str, float] = field(default_factory=dict)  # when a timed toxic first applied here
    passed: dict[str, int] = field(default_factory=lambda: {"upstream": 0, "downstream": 0})
    closed: bool = False
    tasks: list[asyncio.Task] = field(default_factory=list)


class ProxyState:
    def __init__(self, server: ToxiproxyServer, name: str, listen: str, upstream: str, enabled: bool) -> None:
        self.server = server
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.enabled = enabled
        self.toxics: dict[str, Toxic] = {}
        self.links: set[Link] = set()  # type: ignore[assignment]
        self._listener: asyncio.Server | None = None

    def to_json(self) -> dict:
        return {"name": self.name, "listen": self.listen, "upstream": self.upstream, "enabled": self.enabled,
                "toxics": [t.to_json() for t in self.toxics.values()]}

    # -- lifecycle (on the loop) --------------------------------------------------------------
    async def open(self) -> None:
        host, port = _split(self.listen)
        host = "127.0.0.1" if host == "localhost" else host
        if host not in self.server.proxy_hosts:
            raise ApiError(400, f"listen address {self.listen} is neither loopback nor the host's end of a network "
                                "of the harness's own: streamchaos binds only those")
        try:
            self._listener = await asyncio.start_server(self._accept, host, port, reuse_address=True)
        except OSError as exc:
            raise ApiError(409 if exc.errno == 98 else 500, f"cannot listen on {self.listen}: {exc}") from None
        self.listen = f"{host}:{self._listener.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            await self._listener.wait_closed()
            self._listener = None
        for link in list(self.links):
            await self._drop(link, reset=False)

    # -- data path ----------------------------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = _split(self.upstream)
        try:
            s_reader, s_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        link = Link(reader, writer, s_reader, s_writer)
        self.links.add(link)
        link.tasks = [
            asyncio.create_task(self._pump(link, "upstream", reader, s_writer)),
            asyncio.create_task(self._pump(link, "downstream", s_reader, writer)),
            asyncio.create_task(self._monitor(link)),
        ]

    def _active(self, link: Link, stream: str) -> list[Toxic]:
        out = []
        for toxic in list(self.toxics.values()):
            if toxic.stream != stream:
                continue
            if toxic.name not in link.rolls:
                link.rolls[toxic.name] = random.random() < toxic.toxicity
            if link.rolls[toxic.name]:
                out.append(toxic)
        return out

    async def _pump(self, link: Link, stream: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while not link.closed:
                data = await reader.read(CHUNK)
                if not data:
                    break
                await self._forward(link, stream, data, writer)
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass
        finally:
            if not link.closed:
                delay = max((t.attributes.get("delay", 0) for t in self._active(link, stream)
                             if t.type == "slow_close"), default=0)
                if delay:
                    await asyncio.sleep(delay / 1000)
                await self._drop(link, reset=False)

    async def _forward(self, link: Link, stream: str, data: bytes, writer: asyncio.StreamWriter) -> None:
        toxics = self._active(link, stream)
        if any(t.type == "reset_peer" for t in toxics):
            return  # the connection is about to be reset: nothing passes
        while any(t.type == "timeout" for t in toxics) and not link.closed:
            # Held, not dropped: with timeout 0 the data flows again once the toxic is removed.
            await asyncio.sleep(MONITOR_EVERY)
            toxics = self._active(link, stream)
        if link.closed:
            return
        pieces = [data]
        for t in toxics:
            a = t.attributes
            if t.type == "latency":
                jitter = a.get("jitter", 0)
                await asyncio.sleep(max(0.0, a.get("latency", 0) + random.uniform(-jitter, jitter)) / 1000)
            elif t.type == "bandwidth" and a.get("rate", 0) > 0:
                await asyncio.sleep(len(data) / (a["rate"] * 1000))
            elif t.type == "slicer" and a.get("average_size", 0) > 0:
                pieces = _slices(data, a["average_size"], a.get("size_variation", 0))
            elif t.type == "limit_data":
                room = a.get("bytes", 0) - link.passed[stream]
                if room <= len(data):
                    writer.write(data[:max(room, 0)])
                    await writer.drain()
                    link.passed[stream] += max(room, 0)
                    await self._drop(link, reset=False)
                    return
        slicer_delay = max((t.attributes.get("delay", 0) for t in toxics if t.type == "slicer"), default=0)
        for i, piece in enumerate(pieces):
            if i and slicer_delay:
                await asyncio.sleep(slicer_delay / 1_000_000)
            writer.write(piece)
            await writer.drain()
        link.passed[stream] += len(data)

    async def _monitor(self, link: Link) -> None:
        """Timed toxics act without data: close after ``timeout``, reset after ``reset_peer``'s timeout."""
        try:
            while not link.closed:
                now = time.monotonic()
                for stream in STREAMS:
                    for t in self._active(link, stream):
                        if t.type not in ("timeout", "reset_peer"):
                            continue
                        first = link.seen.setdefault(t.name, now)
                        wait = t.attributes.get("timeout", 0) / 1000
                        if t.type == "reset_peer" and now - first >= wait:
                            await self._drop(link, reset=True)
                            return
                        if t.type == "timeout" and wait > 0 and now - first >= wait:
                            await self._drop(link, reset=False)
                            return
                for name in [n for n in link.seen if n not in self.toxics]:
                    del link.seen[name]  # a removed toxic restarts its clock if added again
                await asyncio.sleep(MONITOR_EVERY)
        except asyncio.CancelledError:
            pass

    async def _drop(self, link: Link, reset: bool) -> None:
        if link.closed:
            return
        link.closed = True
        self.links.discard(link)
        if reset:
            sock = link.client_writer.get_extra_info("socket")
            if sock is not None:  # SO_LINGER 0: close sends RST, the client sees "connection reset by peer"
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        for w in (link.client_writer, link.server_writer):
            try:
                w.close()
            except Exception:  # noqa: BLE001 - already gone
                pass
        current = asyncio.current_task()
        for task in link.tasks:
            if task is not current:
                task.cancel()


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    try:
        return host or "127.0.0.1", int(port)
    except ValueError:
        raise ApiError(400, f"bad address {address!r}: use host:port") from None


def _slices(data: bytes, average: int, variation: int) -> list[bytes]:
    out, i = [], 0
    while i < len(data):
        size = max(1, average + random.randint(-variation, variation))
        out.append(data[i:i + size])
        i += size
    return out


class ToxiproxyServer:
    """The API server (stdlib HTTP, threads) and the proxies (one asyncio loop in a daemon thread)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, proxy_hosts: tuple[str, ...] = ()) -> None:
        """``proxy_hosts``: addresses besides loopback a proxy may listen on, the host's end of networks the
        harness made (Docker nodes reach the host only there); the API itself listens on loopback only."""
        if host not in ("127.0.0.1", "localhost"):
            raise ValueError("the embedded Toxiproxy binds loopback only")
        self.proxy_hosts = {"127.0.0.1", *proxy_hosts}
        self.proxies: dict[str, ProxyState] = {}
        self.lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self.loop.run_forever, name="toxiproxy-loop", daemon=True)
        self.http = QuietHTTPServer(("127.0.0.1", port), _handler(self))
        self._http_thread = threading.Thread(target=self.http.serve_forever, name="toxiproxy-api", daemon=True)

    @property
    def port(self) -> int:
        return self.http.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ToxiproxyServer:
        self._loop_thread.start()
        self._http_thread.start()
        return self

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        for proxy in list(self.proxies.values()):
            self._run(proxy.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._loop_thread.join(timeout=5)

    def __enter__(self) -> ToxiproxyServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    # -- API operations (called from HTTP threads) ----------------------------------------------
    def _proxy(self, name: str) -> ProxyState:
        try:
            return self.proxies[name]
        except KeyError:
            raise ApiError(404, "proxy not found") from None

    def create_proxy(self, body: dict) -> dict:
        name, upstream = body.get("name"), body.get("upstream")
        if not name or not upstream:
            raise ApiError(400, "missing required field: name and upstream")
        with self.lock:
            if name in self.proxies:
                raise ApiError(409, "proxy already exists")
            proxy = ProxyState(self, name, body.get("listen") or "127.0.0.1:0", upstream,
                               body.get("enabled", True))
            if proxy.enabled:
                self._run(proxy.open())
            self.proxies[name] = proxy
            return proxy.to_json()

    def update_proxy(self, name: str, body: dict) -> dict:
        with self.lock:
            proxy = self._proxy(name)
            if "upstream" in body:
                proxy.upstream = body["upstream"]
            enabled = body.get("enabled", proxy.enabled)
            if proxy.enabled and not enabled:
                self._run(proxy.close())
            elif enabled and not proxy.enabled:
                self._run(proxy.open())
            proxy.enabled = enabled
            return proxy.to_json()

    def delete_proxy(self, name: str) -> None:
        with self.lock:
            proxy = self._proxy(name)
            self._run(proxy.close())
            del self.proxies[name]

    def add_toxic(self, name: str, body: dict) -> dict:
        proxy = self._proxy(name)
        kind = body.get("type")
        if kind not in TOXIC_ATTRIBUTES:
            raise ApiError(400, f"invalid toxic type: {kind!r}")
        stream = body.get("stream") or "downstream"
        if stream not in STREAMS:
            raise ApiError(400, f"invalid stream {stream!r}: upstream or downstream")
        toxic_name = body.get("name") or f"{kind}_{stream}"
        with self.lock:
            if toxic_name in proxy.toxics:
                raise ApiError(409, "toxic already exists")
            attributes = {**TOXIC_ATTRIBUTES[kind], **(body.get("attributes") or {})}
            toxicity = float(body.get("toxicity", 1.0) if body.get("toxicity") is not None else 1.0)
            toxic = Toxic(toxic_name, kind, stream, toxicity, attributes)
            proxy.toxics[toxic_name] = toxic
            return toxic.to_json()

    def update_toxic(self, name: str, toxic_name: str, body: dict) -> dict:
        proxy = self._proxy(name)
        with self.lock:
            toxic = proxy.toxics.get(toxic_name)
            if toxic is None:
                raise ApiError(404, "toxic not found")
            toxic.attributes.update(body.get("attributes") or {})
            if body.get("toxicity") is not None:
                toxic.toxicity = float(body["toxicity"])
            return toxic.to_json()

    def delete_toxic(self, name: str, toxic_name: str) -> None:
        proxy = self._proxy(name)
        with self.lock:
            if proxy.toxics.pop(toxic_name, None) is None:
                raise ApiError(404, "toxic not found")

    def reset(self) -> None:
        with self.lock:
            for proxy in self.proxies.values():
                proxy.toxics.clear()
                if not proxy.enabled:
                    self._run(proxy.open())
                    proxy.enabled = True


_PROXY = re.compile(r"^/proxies/(?P<name>[^/]+)$")
_TOXICS = re.compile(r"^/proxies/(?P<name>[^/]+)/toxics$")
_TOXIC = re.compile(r"^/proxies/(?P<name>[^/]+)/toxics/(?P<toxic>[^/]+)$")


def _handler(server: ToxiproxyServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def _body(self) -> dict:
            length = int(self.headers.get("Content-Length") or 0)
            if not length:
                return {}
            try:
                value = json.loads(self.rfile.read(length))
            except json.JSONDecodeError:
                raise ApiError(400, "request body is not JSON") from None
            return value if isinstance(value, dict) else {}

        def _send(self, status: int, payload=None, text: str | None = None) -> None:
            body = text.encode() if text is not None else (b"" if payload is None else json.dumps(payload).encode())
            self.send_response(status)
            self.send_header("Content-Type", "text/plain" if text is not None else "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _route(self, method: str) -> None:
            path = self.path.split("?", 1)[0].rstrip("/") or "/"
            try:
                body = self._body() if method == "POST" else {}
                if path == "/version" and method == "GET":
                    return self._send(200, text=VERSION)
                if path == "/reset" and method == "POST":
                    server.reset()
                    return self._send(204)
                if path == "/proxies":
                    if method == "GET":
                        return self._send(200, {n: p.to_json() for n, p in server.proxies.items()})
                    if method == "POST":
                        return self._send(201, server.create_proxy(body))
                if m := _PROXY.match(path):
                    if method == "GET":
                        return self._send(200, server._proxy(m["name"]).to_json())
                    if method == "POST":
                        return self._send(200, server.update_proxy(m["name"], body))
                    if method == "DELETE":
                        server.delete_proxy(m["name"])
                        return self._send(204)
                if m := _TOXICS.match(path):
                    if method == "GET":
                        return self._send(200, [t.to_json() for t in server._proxy(m["name"]).toxics.values()])
                    if method == "POST":
                        return self._send(200, server.add_toxic(m["name"], body))
                if m := _TOXIC.match(path):
                    if method == "GET":
                        toxic = server._proxy(m["name"]).toxics.get(m["toxic"])
                        if toxic is None:
                            raise ApiError(404, "toxic not found")
                        return self._send(200, toxic.to_json())
                    if method == "POST":
                        return self._send(200, server.update_toxic(m["name"], m["toxic"], body))
                    if method == "DELETE":
                        server.delete_toxic(m["name"], m["toxic"])
                        return self._send(204)
                raise ApiError(404, f"no route {method} {path}")
            except ApiError as exc:
                self._send(exc.status, {"error": str(exc), "status": exc.status})

        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            self._route("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._route("POST")

        def do_DELETE(self) -> None:  # noqa: N802
            self._route("DELETE")

    return Handler
