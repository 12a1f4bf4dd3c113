"""Ctrl-C (and SIGTERM) that cannot be lost.

Python raises KeyboardInterrupt wherever the main thread happens to be when the signal lands. When that is a
``__del__`` (a collected ``subprocess.Popen``'s, for one) or a finalizer, Python prints "Exception ignored" and
carries on: the trial would run to its end and exit 0 as if nobody had asked it to stop. So the handler also
records the request; the trial's own loops and the CLI's exit ask for it again.
"""

from __future__ import annotations

import signal
import sys

_requested = False


def _stop(signum, frame) -> None:
    global _requested
    _requested = True
    raise KeyboardInterrupt


def install() -> None:
    """Stop on SIGINT and SIGTERM, even when the shell that started us set SIGINT to be ignored."""
    global _requested
    _requested = False
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    sys.unraisablehook = _quiet_about_stops


def _quiet_about_stops(unraisable) -> None:
    """No "Exception ignored ... Traceback" on the user's screen for their own Ctrl-C: it is asked for again."""
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)


def requested() -> bool:
    """A stop was asked for (whether or not its KeyboardInterrupt got through)."""
    return _requested


def check() -> None:
    """Raise the stop again if one was asked for: called from loops that are not cleanup (a cleanup must finish).

    Raised once: the KeyboardInterrupt that got through is already on its way out through the cleanups."""
    global _requested
    if _requested:
        _requested = False
        raise KeyboardInterrupt
