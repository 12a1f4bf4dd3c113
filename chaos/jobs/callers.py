"""Whether a call came from the job: the rerouting wrappers (a database's ``connect``, Kafka's clients) change only
what the job's own code asks for, never the harness's connections and clients made through the same functions."""

from __future__ import annotations

import sys


def from_the_job(own: tuple[str, ...]) -> bool:
    """The call that reached a rerouting wrapper came from the job's code (or a library it calls), not from the
    harness: the first frame above the wrapper's caller outside the modules ``own`` names (the client library and
    the wrapper's module) decides."""
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(own):
            return not module.startswith(("chaos.", "pipelines_under_test.", "properties."))
        frame = frame.f_back
    return True
