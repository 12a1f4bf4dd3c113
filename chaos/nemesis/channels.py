"""The source and sink channels: each is a Toxiproxy proxy the harness drives with toxiproxy-python.

The source channel carries the driver's and executors' HTTP calls to the event-log server; the sink
channel carries the sink's connections to its database. By default the proxies live in the
harness's embedded Toxiproxy-compatible server (``chaos.nemesis.toxiproxy_api``); set
``TOXIPROXY_URL=http://host:port`` (or ``--toxiproxy host:port``) to use a real Toxiproxy instead —
the harness only ever talks the client API, so nothing else changes.

A channel fault maps to toxics:

* ``delay-*``: ``latency`` (latency=MS, jitter=MS args; default 1000 ms) on both directions;
* ``cut-*``: ``timeout`` with timeout 0 on both directions: the channel goes silent, connections
  stay open, data waits until the heal;
* ``reset-*``: ``reset_peer`` with timeout 0: every connection is reset while the fault lasts;
* ``down-*``: the proxy is disabled: connections are closed and new ones refused.

Each lasts its duration arg (default 5 s) and is healed by removing the toxics / enabling the proxy.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from chaos.errors import UserError
from chaos.nemesis.toxiproxy_api import ToxiproxyServer
from chaos.scenario.faults import DEFAULT_LATENCY_MS, Fault

if TYPE_CHECKING:
    from toxiproxy import Toxiproxy


class Channels:
    def __init__(self, url: str | None = None, hosts: tuple[str, ...] = ()) -> None:
        """``hosts``: addresses besides loopback the embedded proxies may listen on (a Docker network's gateway)."""
        from toxiproxy import Toxiproxy

        url = url if url is not None else os.environ.get("TOXIPROXY_URL")
        self.embedded: ToxiproxyServer | None = None
        if url:
            parsed = urlparse(url if "://" in url else f"http://{url}")
            host, port = parsed.hostname or "127.0.0.1", parsed.port or 8474
        else:
            self.embedded = ToxiproxyServer(proxy_hosts=hosts).start()
            host, port = "127.0.0.1", self.embedded.port
        self.host, self.port = host, port
        self.client = Toxiproxy()
        if self.embedded is None and not self.api().running():
            raise UserError(f"no Toxiproxy answers at {host}:{port}: start it, or unset TOXIPROXY_URL "
                            "to use the embedded one")
        self.url = f"http://{host}:{port}"
        self.proxies: dict[str, object] = {}

    def api(self) -> Toxiproxy:
        """The client, pointed at this instance's server. toxiproxy-python keeps the API's address in a class
        attribute shared by every client and proxy object of the process: another ``Channels`` (a second
        harness in the same process, a test's own proxy) re-points it, so each use points it back first."""
        self.client.update_api_consumer(self.host, self.port)
        return self.client

    def open(self, name: str, upstream: str, host: str = "127.0.0.1") -> str:
        """(Re)create the proxy ``name`` in front of ``upstream`` (host:port), listening on ``host``; returns its
        listen address."""
        existing = self.api().get_proxy(name)
        if existing is not None:
            existing.destroy()
        proxy = self.client.create(upstream=upstream, name=name, listen=f"{host}:0")
        self.proxies[name] = proxy
        return proxy.listen

    def reset(self) -> None:
        """Between trials: every proxy enabled, no toxics."""
        self.api().reset()

    def apply(self, fault: Fault, proxy_names: tuple[str, ...] = ()) -> Callable[[], None]:
        """Carry out a channel fault now (on the proxies ``proxy_names``, else the one its channel names: the
        connections to each broker of a Kafka cluster have one each); return its heal."""
        if len(proxy_names) > 1:
            heals = [self.apply(fault, (name,)) for name in proxy_names]

            def heal_all() -> None:
                for heal in heals:
                    heal()

            return heal_all
        name = proxy_names[0] if proxy_names else fault.target
        proxy = self.proxies.get(name)
        if proxy is None:
            raise LookupError(f"this pipeline has no {name} channel")
        self.api()
        if fault.kind == "down":
            proxy.disable()

            def enable() -> None:
                self.api()
                proxy.enable()

            return enable
        toxics = {
            "delay": ("latency", {"latency": fault.attributes.get("latency", DEFAULT_LATENCY_MS),
                                  "jitter": fault.attributes.get("jitter", 0)}),
            "cut": ("timeout", {"timeout": 0}),
            "reset": ("reset_peer", {"timeout": 0}),
        }
        kind, attributes = toxics[fault.kind]
        names = []
        for stream in ("upstream", "downstream"):
            toxic = f"{fault.action}-{fault.batch}-{fault.phase}-{stream}"
            proxy.add_toxic(name=toxic, type=kind, stream=stream, attributes=attributes)
            names.append(toxic)

        def heal() -> None:
            self.api()
            for toxic in names:
                proxy.destroy_toxic(toxic)

        return heal

    def close(self) -> None:
        self.api()
        for proxy in self.proxies.values():
            try:
                proxy.destroy()
            except Exception:  # noqa: BLE001 - a real Toxiproxy may be gone already
                pass
        self.proxies.clear()
        if self.embedded is not None:
            self.embedded.stop()
            self.embedded = None
