"""The embedded Toxiproxy server, driven through the real ``toxiproxy-python`` client, toxic by toxic,
with real loopback sockets and measured effects."""

from __future__ import annotations

import socket
import socketserver
import threading
import time

import pytest
import requests
from toxiproxy import Toxiproxy
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists

from chaos.nemesis.toxiproxy_api import ToxiproxyServer


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


class _EchoOnceThenClose(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        data = self.request.recv(65536)
        self.request.sendall(data)


def _serve(handler) -> socketserver.ThreadingTCPServer:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def echo():
    server = _serve(_Echo)
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def toxi():
    with ToxiproxyServer() as server:
        client = Toxiproxy()
        client.update_api_consumer("127.0.0.1", server.port)
        yield client


def _connect(proxy) -> socket.socket:
    host, port = proxy.listen.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def _roundtrip(proxy, payload: bytes = b"ping") -> tuple[bytes, float]:
    with _connect(proxy) as sock:
        started = time.monotonic()
        sock.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
        return got, time.monotonic() - started


def test_api_surface_matches_the_client(toxi, echo):
    assert toxi.running() and toxi.version()
    proxy = toxi.create(upstream=echo, name="src")
    assert proxy.listen.startswith("127.0.0.1:") and proxy.enabled
    assert set(toxi.proxies()) == {"src"}
    with pytest.raises(ProxyExists):
        toxi.create(upstream=echo, name="src")
    assert toxi.get_proxy("nope") is None
    assert _roundtrip(proxy)[0] == b"ping"
    proxy.add_toxic(type="latency", attributes={"latency": 10})
    assert set(proxy.toxics()) == {"latency_downstream"}
    with pytest.raises(InvalidToxic):
        proxy.add_toxic(type="no-such-toxic")
    assert proxy.destroy_toxic("latency_downstream") and proxy.toxics() == {}
    with pytest.raises(NotFound):
        proxy.destroy_toxic("latency_downstream")
    assert toxi.destroy(proxy)
    assert toxi.proxies() == {}


def test_latency_adds_at_least_the_latency_each_way(toxi, echo):
    proxy = toxi.create(upstream=echo, name="lat")
    _, base = _roundtrip(proxy)
    proxy.add_toxic(type="latency", attributes={"latency": 300, "jitter": 0})
    got, slow = _roundtrip(proxy)
    assert got == b"ping" and slow >= 0.3 and slow - base >= 0.25
    proxy.add_toxic(type="latency", stream="upstream", attributes={"latency": 200})
    _, both = _roundtrip(proxy)
    assert both >= 0.5


def test_bandwidth_paces_the_transfer(toxi, echo):
    proxy = toxi.create(upstream=echo, name="bw")
    proxy.add_toxic(type="bandwidth", attributes={"rate": 100})  # KB/s
    got, took = _roundtrip(proxy, b"x" * 50_000)
    assert len(got) == 50_000 and took >= 0.45


def test_timeout_zero_holds_data_until_the_toxic_is_removed(toxi, echo):
    proxy = toxi.create(upstream=echo, name="t0")
    proxy.add_toxic(type="timeout", name="cut", attributes={"timeout": 0})
    with _connect(proxy) as sock:
        sock.sendall(b"held")
        sock.settimeout(0.8)
        with pytest.raises(TimeoutError):
            sock.recv(10)
        proxy.destroy_toxic("cut")
        sock.settimeout(5)
        assert sock.recv(10) == b"held"


def test_timeout_closes_the_connection_after_its_timeout(toxi, echo):
    proxy = toxi.create(upstream=echo, name="t1")
    proxy.add_toxic(type="timeout", attributes={"timeout": 500})
    with _connect(proxy) as sock:
        started = time.monotonic()
        sock.sendall(b"lost")
        assert sock.recv(10) == b""
        assert 0.45 <= time.monotonic() - started < 5


def test_reset_peer_resets_the_connection(toxi, echo):
    proxy = toxi.create(upstream=echo, name="rst")
    proxy.add_toxic(type="reset_peer", attributes={"timeout": 200})
    with _connect(proxy) as sock:
        started = time.monotonic()
        sock.sendall(b"x")
        with pytest.raises(ConnectionResetError):
            while sock.recv(10):
                pass
        assert time.monotonic() - started >= 0.15


def test_limit_data_closes_after_n_bytes(toxi, echo):
    proxy = toxi.create(upstream=echo, name="lim")
    proxy.add_toxic(type="limit_data", attributes={"bytes": 10})
    with _connect(proxy) as sock:
        sock.sendall(b"0123456789abcdefghij")
        got = b""
        while chunk := sock.recv(100):
            got += chunk
    assert got == b"0123456789"


def test_slicer_cuts_data_into_delayed_slices_without_changing_it(toxi, echo):
    proxy = toxi.create(upstream=echo, name="slice")
    proxy.add_toxic(type="slicer", attributes={"average_size": 10, "size_variation": 2, "delay": 10_000})
    payload = bytes(range(256)) * 4
    got, took = _roundtrip(proxy, payload)
    assert got == payload and took >= 0.6  # about 100 slices, 10 ms apart


def test_slow_close_delays_the_close():
    upstream = _serve(_EchoOnceThenClose)
    with ToxiproxyServer() as server:
        client = Toxiproxy()
        client.update_api_consumer("127.0.0.1", server.port)
        proxy = client.create(upstream=f"127.0.0.1:{upstream.server_address[1]}", name="sc")
        proxy.add_toxic(type="slow_close", attributes={"delay": 600})
        with _connect(proxy) as sock:
            started = time.monotonic()
            sock.sendall(b"bye")
            assert sock.recv(10) == b"bye"
            assert sock.recv(10) == b""
            assert time.monotonic() - started >= 0.55
    upstream.shutdown()


def test_disable_refuses_connections_and_enable_restores_them(toxi, echo):
    proxy = toxi.create(upstream=echo, name="dis")
    with proxy.down():
        with pytest.raises(ConnectionRefusedError):
            _connect(proxy)
        assert toxi.get_proxy("dis").enabled is False
    assert _roundtrip(proxy)[0] == b"ping"


def test_toxicity_zero_never_applies_and_reset_clears_everything(toxi, echo):
    proxy = toxi.create(upstream=echo, name="tox")
    proxy.add_toxic(type="latency", toxicity=0.0, attributes={"latency": 1000})
    assert _roundtrip(proxy)[1] < 0.5
    proxy.add_toxic(type="timeout", name="cut", attributes={"timeout": 0})
    proxy.disable()
    assert toxi.reset()
    assert toxi.get_proxy("tox").enabled and proxy.toxics() == {}
    assert _roundtrip(proxy)[0] == b"ping"


def test_non_loopback_listen_is_refused(toxi, echo):
    resp = requests.post(f"http://127.0.0.1:{toxi_port(toxi)}/proxies",
                         json={"name": "x", "upstream": echo, "listen": "0.0.0.0:0"}, timeout=5)
    assert resp.status_code == 400 and "loopback" in resp.json()["error"]


def test_a_proxy_listens_on_an_address_the_harness_was_given_and_on_no_other(echo):
    """The host's end of a harness's Docker network (here 127.0.0.2, an address of lo no proxy takes unasked)."""
    with ToxiproxyServer(proxy_hosts=("127.0.0.2",)) as server:
        api = f"http://127.0.0.1:{server.port}/proxies"
        resp = requests.post(api, json={"name": "g", "upstream": echo, "listen": "127.0.0.2:0"}, timeout=5)
        assert resp.status_code == 201, resp.text
        host, port = resp.json()["listen"].rsplit(":", 1)
        assert host == "127.0.0.2"
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(b"ping")
            assert sock.recv(4) == b"ping"
        refused = requests.post(api, json={"name": "h", "upstream": echo, "listen": "127.0.0.3:0"}, timeout=5)
        assert refused.status_code == 400 and "network of the harness's own" in refused.json()["error"]


def toxi_port(client: Toxiproxy) -> int:
    from toxiproxy.api import APIConsumer

    return APIConsumer.port


def test_a_client_gone_mid_answer_prints_nothing_other_errors_do(capsys):
    """Ctrl-C stops a harness's clients while a server thread still answers them: no traceback for that."""
    import socket as sockets
    from http.server import BaseHTTPRequestHandler

    from chaos.machine.httpserver import QuietHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            raise BrokenPipeError(32, "Broken pipe") if self.path == "/gone" else ValueError("a real bug")

        def log_message(self, *args):
            pass

    server = QuietHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        for path in ("/gone", "/bug"):
            with sockets.create_connection(server.server_address, timeout=5) as conn:
                conn.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
                conn.recv(1024)
        time.sleep(0.2)
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    assert err.count("Traceback") == 1 and "ValueError: a real bug" in err and "Errno 32" not in err
