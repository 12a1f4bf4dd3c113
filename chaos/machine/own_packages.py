"""The harness's own packages (``chaos``, ``properties``, ``pipelines_under_test``, ``reports``) ahead of a
user's project, in every process the harness starts and in the processes that load it.

The names are common: a data team's project may hold its own ``reports/`` or ``properties.py``, and its
jobs run from its directory. So:

* every Python process the harness starts (drivers, the executors' daemons and workers, Docker nodes,
  the data source planners) has ``packages_folder()`` first on its ``PYTHONPATH``: a folder with links to
  the four packages only, not the directory that holds them (an editable install's holds ``tests/`` and
  more), so nothing else of the harness's install comes before the user's directory;
* a process that imports the harness and then a user's job binds the four names to the harness's first
  (``bind``), so putting the job's directory first on ``sys.path`` reaches the job's other modules and
  never replaces the harness's;
* a job that itself imports a module of those names from its project cannot have both in one
  interpreter: ``clashes`` names it, and the harness says so in one line.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import os
import sys
from pathlib import Path

PACKAGES = ("chaos", "properties", "pipelines_under_test", "reports")
INSTALL = Path(__file__).resolve().parents[2]  # the directory that holds the four packages


def bind(names: tuple[str, ...] = PACKAGES) -> None:
    """Import the harness's packages (their ``__init__`` only) from the install, whatever comes first on
    ``sys.path``: their submodules are then found through each package's own ``__path__``."""
    for name in names:
        if name in sys.modules:
            continue
        saved = sys.path[:]
        sys.path[:] = [str(INSTALL)] + [p for p in saved if Path(p or ".").resolve() != INSTALL]
        try:
            importlib.import_module(name)
        finally:
            sys.path[:] = saved


def packages_folder() -> Path:
    """A folder holding links to the four packages and nothing else, made once per install (the cache, keyed by
    the install's path): the first entry of every ``PYTHONPATH`` the harness sets. Checked once per process
    and cache directory."""
    from chaos.machine.jvm import cache_dir

    return _packages_folder(cache_dir())


@functools.cache
def _packages_folder(cache: Path) -> Path:
    key = hashlib.sha256(str(INSTALL).encode()).hexdigest()[:16]
    folder = cache / f"packages-{key}"
    if all((folder / name).resolve() == INSTALL / name for name in PACKAGES):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for name in PACKAGES:
        link = folder / name
        if link.is_symlink() and link.resolve() == INSTALL / name:
            continue
        temporary = folder / f".{name}.{os.getpid()}"
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(INSTALL / name, target_is_directory=True)
        temporary.replace(link)  # atomic: two harnesses starting at once both leave the same link
    return folder


def first_on_path(*rest: str) -> str:
    """A ``PYTHONPATH`` value: the harness's packages, then ``rest`` (empty entries dropped)."""
    return os.pathsep.join([str(packages_folder()), *(p for p in rest if p)])


def user_entries() -> list[str]:
    """This process's ``PYTHONPATH`` without the harness's packages folder: what follows it in a child's."""
    ours = packages_folder()
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ours]


def namesakes(project: Path) -> list[str]:
    """The harness's package names that ``project`` holds too (a module ``NAME.py`` or a package ``NAME/``)."""
    return [name for name in PACKAGES if ((project / f"{name}.py").is_file() or (project / name).is_dir())
            and (project / name).resolve() != INSTALL / name]


def clashes(job_file: Path, project: Path) -> list[str]:
    """The names of the harness's packages that the job's module imports and ``project`` also holds (a module
    ``NAME.py`` or a package ``NAME/``): the job would get the harness's instead of its own."""
    try:
        imported = _top_imports(job_file, job_file.stat().st_mtime_ns)
    except OSError:
        return []
    return [name for name in namesakes(project) if name in imported]


@functools.lru_cache(maxsize=32)
def _top_imports(job_file: Path, mtime_ns: int) -> frozenset[str]:
    """The top-level modules a file imports (parsed once per version of the file: a command checks a job on its
    way in and again where it imports it)."""
    try:
        tree = ast.parse(job_file.read_text())
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    return frozenset(imported)
