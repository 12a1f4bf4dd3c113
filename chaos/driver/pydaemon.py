"""The Python daemon of the harness's Spark applications (``spark.python.daemon.module``).

Spark starts every Python daemon (one per executor and worker module, one per planner module in the
driver) with ``PYTHONPATH`` beginning with ``$SPARK_HOME/python/lib/pyspark.zip``. That zip holds
sources only and ``zipimport`` caches no bytecode, so each daemon compiles pyspark again: measured
here, ``import pyspark.daemon`` costs 0.61 CPU-s from the zip and 0.16 from the installed package,
and a standard trial starts ~45 daemons. When the zip is the very package this interpreter has
installed (pip's pyspark, whose ``SPARK_HOME`` is the package directory), this module moves the zips
behind the installed package on ``sys.path``: the same code, imported from cached bytecode.

Spark also puts its spark-core jar on that path, and every worker's ``importlib.invalidate_caches()``
re-reads each zip's directory (``spark_jars``): this module drops Spark's own jars as well.

Spark's data source planners in the driver start their daemons as ``python -m pyspark.daemon``
whatever ``spark.python.daemon.module`` says. For those, ``import_home`` builds the drivers' working
directory: links to the installed pyspark and py4j only. ``python -m`` puts the working directory
first on ``sys.path``, ahead of ``PYTHONPATH``'s zips, so the planners import the same installed
package too (from its cached bytecode); chaos/driver/sitehook/sitecustomize.py drops the zips and jars there.

The daemon of the default worker module then imports, once and before it forks, what every reader
task's worker would import after its fork: ``pyspark.worker``, the harness's source, the Python data
source read path, pyarrow and pandas (~0.4 CPU-s per worker otherwise). ``pyspark/daemon.py`` imports
after the fork on purpose: pyarrow's jemalloc and numpy's OpenBLAS start threads at import, and a
fork copies no threads but their locks. So the daemon sets ``JE_ARROW_MALLOC_CONF`` (no jemalloc
background thread) and ``OPENBLAS_NUM_THREADS=1`` unless the user set them, checks that the process is
still single-threaded after the imports, and otherwise re-executes itself as the plain
``pyspark.daemon``: it never forks a multi-threaded process.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys
from pathlib import Path


def spark_zips(path: list[str], spark_home: str) -> list[str]:
    """The entries of ``path`` that are Spark's own zips under ``spark_home`` (pyspark, py4j sources)."""
    lib = Path(spark_home, "python", "lib").resolve() if spark_home else None
    return [p for p in path if lib is not None and p.endswith(".zip") and Path(p).resolve().parent == lib]


def prefer_installed(path: list[str], spark_home: str) -> list[str]:
    """``path`` without Spark's zips, if the installed pyspark is the one ``spark_home`` names (a zip
    left on the path would still be re-read by every ``importlib.invalidate_caches()``, which each
    worker calls when its first task adds Spark's files directory)."""
    zips = spark_zips(path, spark_home)
    if not zips:
        return path
    rest = [p for p in path if p not in zips]
    spec = importlib.machinery.PathFinder.find_spec("pyspark", rest)
    if spec is None or spec.origin is None or Path(spec.origin).resolve().parent != Path(spark_home).resolve():
        return path  # a separate Spark installation: its zip is the right pyspark
    if importlib.machinery.PathFinder.find_spec("py4j", rest) is None:
        zips = [z for z in zips if "py4j" not in Path(z).name]  # py4j only in its zip: keep it in front
        rest = [p for p in path if p not in zips]
    return rest


def spark_jars(path: list[str], spark_home: str) -> list[str]:
    """The entries of ``path`` that are jars of Spark's own (``$SPARK_HOME/jars``). Spark puts the jar of its
    Python utilities (spark-core, ~6,000 entries and not one Python file) on every Python process's PYTHONPATH.
    Python 3.11's ``importlib.invalidate_caches()``, which each worker calls at its first task (Spark's files
    directory), re-reads the directory of every zip on the path in pure Python: measured here, that was most of
    a reader task's worker's CPU."""
    jars = Path(spark_home, "jars").resolve() if spark_home else None
    return [p for p in path if jars is not None and p.endswith(".jar") and Path(p).resolve().parent == jars]


def without_spark_jars(path: list[str], spark_home: str) -> list[str]:
    """``path`` without Spark's own jars, which hold classes only: nothing imports from them."""
    jars = spark_jars(path, spark_home)
    return [p for p in path if p not in jars]


def forget_importers(dropped: set[str]) -> None:
    """Drop the cached finders of the dropped path entries and of the folders inside them (a zip's
    ``archive.jar/org`` gets its own zipimporter), which ``importlib.invalidate_caches()`` would re-read."""
    for key in list(sys.path_importer_cache):
        if any(key == d or key.startswith(d + os.sep) for d in dropped):
            del sys.path_importer_cache[key]


def prune_path() -> None:
    """This process's ``sys.path`` without Spark's zips (when the installed pyspark is the one they hold) and
    Spark's own jars, and without their cached finders: for the executors' daemons (``main``) and, through
    chaos/driver/sitehook/sitecustomize.py, every Python process a driver starts."""
    home = os.environ.get("SPARK_HOME", "")
    before = list(sys.path)
    sys.path[:] = without_spark_jars(prefer_installed(sys.path, home), home)
    forget_importers(set(before) - set(sys.path))


def import_home(folder: Path, spark_home: str) -> Path | None:
    """``folder`` with links to the installed pyspark (if it is ``spark_home``) and py4j: a driver's cwd."""
    pyspark_spec = importlib.machinery.PathFinder.find_spec("pyspark")
    py4j_spec = importlib.machinery.PathFinder.find_spec("py4j")
    if pyspark_spec is None or py4j_spec is None or pyspark_spec.origin is None or py4j_spec.origin is None:
        return None
    packages = {"pyspark": Path(pyspark_spec.origin).resolve().parent, "py4j": Path(py4j_spec.origin).resolve().parent}
    if packages["pyspark"] != Path(spark_home).resolve():
        return None
    folder.mkdir(parents=True, exist_ok=True)
    for name, target in packages.items():
        link = folder / name
        if link.is_symlink() and link.resolve() == target:
            continue
        if link.is_symlink():
            link.unlink()
        link.symlink_to(target, target_is_directory=True)
    return folder


def threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


# What a reader task's worker imports, in order; each is optional but pyspark.worker.
PRELOAD = ("pyspark.worker", "chaos.stream.source", "pyarrow", "pandas", "pyspark.sql.worker.plan_data_source_read")
# Keep the imports above from starting threads (set only where the user did not).
SINGLE_THREADED_IMPORTS = {"JE_ARROW_MALLOC_CONF": "background_thread:false", "OPENBLAS_NUM_THREADS": "1"}


def main() -> None:
    prune_path()
    worker_module = sys.argv[1] if len(sys.argv) > 1 else "pyspark.worker"
    if worker_module == "pyspark.worker":
        for key, value in SINGLE_THREADED_IMPORTS.items():
            os.environ.setdefault(key, value)
        for module in PRELOAD:
            try:
                importlib.import_module(module)
            except ImportError:
                if module == "pyspark.worker":
                    raise
    if threads() > 1:  # never fork a multi-threaded process: be the plain daemon instead
        os.execv(sys.executable, [sys.executable, "-m", "pyspark.daemon", *sys.argv[1:]])
    import pyspark
    from pyspark.daemon import manager

    # One line in the executor's stderr log: which pyspark this application's workers run.
    print(f"streamchaos: python daemon for {worker_module}, pyspark from {Path(pyspark.__file__).parent}, "
          f"{len(sys.modules)} modules loaded before forking", file=sys.stderr, flush=True)

    manager()


if __name__ == "__main__":
    main()
