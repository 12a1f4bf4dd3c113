"""A user's job written as a script (``spark-submit job.py ARGS``), run unchanged in a driver as ``__main__``."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Callable

from chaos.errors import UserError
from chaos.jobs.reference import JobSpec, refuse_namesakes


def script_runner(spec: JobSpec) -> Callable[[], None]:
    """A script as ``spark-submit job.py ARGS`` runs it: the file as ``__main__`` with ``sys.argv`` its path and
    arguments, its directory first on ``sys.path``. Its ``getOrCreate()`` finds the harness's session,
    ``awaitTermination()`` and ``spark.stop()`` return at once, and a ``sys.exit`` after its query started ends
    the script, not the driver. An error before its query started is one line with the script's own frame."""
    path = spec.entry

    def run_script():
        from chaos.machine.own_packages import bind

        refuse_namesakes(path)
        bind()
        argv, syspath, stderr = sys.argv[:], sys.path[:], sys.stderr
        sys.argv = [path, *spec.args]
        sys.path.insert(0, os.path.dirname(path))
        sys.stderr = said = _LastLine(stderr)
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as stop:
            if stop.code not in (None, 0):
                last = f": {said.last}" if said.last else ""
                raise UserError(f"{path} exited with {stop.code}{last}") from None
        except UserError:
            raise
        except Exception as exc:  # the script's own error: its last frame in the script, not the harness's
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
            where = f" (line {frames[-1].lineno}: {frames[-1].line})" if frames else ""
            raise UserError(f"{path} failed{where}: {type(exc).__name__}: {exc}") \
                from None
        finally:
            sys.argv, sys.path[:], sys.stderr = argv, syspath, stderr

    return run_script


class _LastLine:
    """A script's standard error passed through, its last line kept (argparse's "error: ..." before it exits)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.last = ""

    def write(self, text: str) -> int:
        lines = [ln for ln in str(text).splitlines() if ln.strip()]
        if lines:
            self.last = lines[-1].strip()[:300]
        return self.inner.write(text)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)
