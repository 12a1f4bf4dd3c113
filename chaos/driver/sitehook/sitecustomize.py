"""Loaded by ``site`` at the start of every Python process a harness's driver starts (its directory is on the
drivers' PYTHONPATH, ``chaos.driver.launch.driver_env``): the driver itself, its JVM's data source planners
(``python -m pyspark.daemon``, whatever ``spark.python.daemon.module`` says) and streaming source runners,
which no Spark setting lets the harness start otherwise.

Spark puts its own zips and the spark-core jar on those processes' PYTHONPATH, and each worker calls
``importlib.invalidate_caches()`` at its start, which in Python 3.11 re-reads the directory of every zip
cached as a path entry (the jar: ~6,000 entries, in pure Python). Dropping them here, when the installed
pyspark is the one they hold (chaos/driver/pydaemon.py does the same for the executors' daemons), leaves imports
unchanged and takes that cost off every planner's worker.

A ``sitecustomize`` found after this one on the path (the user's, or the Python installation's) still runs.
"""

import os
import sys


def _chain() -> None:
    """Import the next ``sitecustomize`` on the path, as if this one were not there."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    sys.path_importer_cache.pop(here, None)
    me = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401  (the next one, if any)
    except Exception as exc:  # as site does: no other one is fine, a failing one is printed and skipped
        if me is not None:
            sys.modules["sitecustomize"] = me
        if not (isinstance(exc, ImportError) and exc.name == "sitecustomize"):
            print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(exc).__name__}: {exc}",
                  file=sys.stderr)


try:
    from chaos.driver.pydaemon import prune_path
except ImportError:  # chaos not importable here: leave the path as it is
    pass
else:
    prune_path()
_chain()
