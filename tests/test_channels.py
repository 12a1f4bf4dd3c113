"""Channel faults -> toxics on the embedded proxy, and their heals, measured on a real socket."""

from __future__ import annotations

import socket
import time

import pytest

from chaos.nemesis.channels import Channels
from chaos.scenario.faults import parse_fault
from tests.test_toxiproxy_server import _Echo, _serve


@pytest.fixture
def source():
    echo = _serve(_Echo)
    channels = Channels(url="")  # "" = embedded even when TOXIPROXY_URL is set
    listen = channels.open("source", f"127.0.0.1:{echo.server_address[1]}")
    yield channels, listen
    channels.close()
    echo.shutdown()


def _ping(listen: str, timeout: float = 10) -> tuple[bytes, float]:
    host, port = listen.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        started = time.monotonic()
        sock.sendall(b"ping")
        return sock.recv(10), time.monotonic() - started


def test_delay_adds_latency_both_ways_until_healed(source):
    channels, listen = source
    heal = channels.apply(parse_fault("delay-source@1:reading/latency=200/jitter=0"))
    got, took = _ping(listen)
    assert got == b"ping" and took >= 0.4  # 200 ms up + 200 ms down
    heal()
    assert _ping(listen)[1] < 0.2


@pytest.mark.parametrize("spec, error, timeout", [
    ("down-source@1:planned/2s", ConnectionRefusedError, 10),  # proxy disabled: connections refused
    ("cut-source@1:reading/3s", TimeoutError, 0.5),  # data held: no answer
    ("reset-source@1:reading/3s", ConnectionResetError, 10),  # every connection reset
])
def test_fault_breaks_the_channel_until_healed(source, spec, error, timeout):
    channels, listen = source
    heal = channels.apply(parse_fault(spec))
    with pytest.raises(error):
        _ping(listen, timeout=timeout)
    heal()
    assert _ping(listen)[0] == b"ping"


def test_a_channel_the_pipeline_lacks_is_a_lookup_error(source):
    channels, _ = source
    with pytest.raises(LookupError):
        channels.apply(parse_fault("delay-sink@1:sink-write"))


def test_until_phase_heals_at_that_phase_of_the_batch_or_a_later_one(source, tmp_path):
    from chaos.nemesis.actions import Nemesis
    from chaos.nemesis.controller import History

    channels, listen = source
    history = History(tmp_path / "history.jsonl")
    nemesis = Nemesis(None, lambda: None, lambda: None, tmp_path, history, channels)
    fault = parse_fault("delay-source@2:reading/latency=300/until=committed")
    assert fault.until == "committed"
    outcome = nemesis.fire(fault, {})
    assert outcome["until"] == "committed" and outcome["latency"] == 300
    nemesis.on_phase(2, "sink-done")
    nemesis.on_phase(1, "committed")  # an earlier batch's commit does not end it
    assert _ping(listen)[1] >= 0.6
    nemesis.on_phase(2, "committed")
    nemesis.wait_heals(timeout=10)
    assert _ping(listen)[1] < 0.2
    heals = [r for r in history.snapshot() if r["kind"] == "heal"]
    assert [h["detail"]["spec"] for h in heals] == [fault.spec] and heals[0]["detail"]["until"] == "committed"
    history.close()


def test_two_channels_in_one_process_each_reach_their_own_proxy(source):
    """toxiproxy-python keeps the API's address in one class attribute for the whole process: a second
    Channels (another harness, a test's own proxy), opened and closed, must not leave the first one talking
    to its stopped server."""
    channels, listen = source
    echo = _serve(_Echo)
    other = Channels(url="")
    other.open("source", f"127.0.0.1:{echo.server_address[1]}")
    other.close()
    echo.shutdown()
    heal = channels.apply(parse_fault("down-source@1:reading"))
    with pytest.raises(OSError):
        _ping(listen, timeout=2)
    heal()
    channels.reset()
    assert _ping(listen)[0] == b"ping"
