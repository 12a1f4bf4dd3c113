"""The client side of the phase barriers: runs inside the driver and the executors' Python workers.

``report`` sends one phase record to the harness's controller over loopback and blocks until the
controller answers, which it does only after any fault armed for that (batch, phase) has fired. If
the fault kills the reporting process, the answer never comes, exactly as a real crash at that
point. Kept free of Spark imports: executors import it on every task.
"""

from __future__ import annotations

import json
import os
import socket

# A pause can hold a phase for its whole duration; the controller never holds longer than that.
REPLY_TIMEOUT = 900.0


def report(address: str, batch: int, phase: str, **detail) -> dict:
    """Tell the controller that ``phase`` of micro-batch ``batch`` is reached; wait for its go."""
    host, port = address.rsplit(":", 1)
    message = {"type": "phase", "batch": int(batch), "phase": phase, "pid": os.getpid(), "detail": detail}
    return request(host, int(port), message)


def request(host: str, port: int, message: dict) -> dict:
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.settimeout(REPLY_TIMEOUT)
        sock.sendall(json.dumps(message).encode() + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("controller closed the connection without an answer")
            reply += chunk
    return json.loads(reply)
