"""The Python distributions installed here and what they require, read from their metadata: what a host image
copies (PySpark and its SQL dependencies) and what ships to hosts as wheels (the harness's own requirements)."""

from __future__ import annotations

import re
from collections.abc import Collection
from importlib.metadata import PackageNotFoundError, distribution

LINUX = {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(roots: list[tuple[str, frozenset[str]]], without: Collection[str] = ()) -> dict[str, str]:
    """Every installed distribution ``roots`` (name, extras) need at run time on Linux, the roots included,
    name -> installed version; ``without``'s names (and what only they need) left out. A requirement not
    installed here is optional (an extra's, or another platform's) and skipped."""
    from packaging.requirements import Requirement

    found: dict[str, str] = {}
    todo = list(roots)
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        name = canonical(name)
        if (name, extras) in seen or name in without:
            continue
        seen.add((name, extras))
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        found[name] = dist.version
        for text in dist.requires or ():
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({**LINUX, "extra": e}) for e in (extras or {""})):
                todo.append((req.name, frozenset(req.extras)))
    return dict(sorted(found.items()))


def pyspark_sql() -> dict[str, str]:
    """PySpark with what its SQL side needs (``pyspark[sql]``: pandas, pyarrow, numpy, and theirs), as installed."""
    return closure([("pyspark", frozenset({"sql"}))])
