"""The harness's HTTP servers (the event log, the embedded Toxiproxy's API): threaded, and quiet when a client
goes away mid-answer. Ctrl-C stops the harness's clients (drivers, the harness's own proxy client) while a
server thread still writes to them; socketserver would print that BrokenPipeError's traceback on the user's
terminal, for an interruption the user asked for."""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer


class QuietHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # broken pipe, reset, aborted: the client is gone
            return
        super().handle_error(request, client_address)
