"""A data team's project whose own modules bear the harness's package names (``chaos/``, ``reports/``,
``properties.py``), each raising if imported, beside a plain PySpark job: what the shadowing tests run from."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARK = "the project's namesake"
JOB = "orders_sqlite.py:run"  # examples/orders_sqlite.py: per-customer counts replaced batch by batch
JOB_ARGS = ["--schema", "order_id STRING, customer STRING, amount LONG, ts TIMESTAMP",
            "--sink", "sqlite:customer_counts", "--key", "customer"]


def make_project(root: Path, chaos: bool = True) -> Path:
    """The project; ``chaos=False``: without its ``chaos/``, so that it can go on ``PYTHONPATH`` (where a
    ``chaos/`` would replace the harness's in the ``streamchaos`` command itself, before any code of ours runs)."""
    root.mkdir(parents=True, exist_ok=True)
    for package in ("chaos", "reports")[0 if chaos else 1:]:
        (root / package).mkdir()
        (root / package / "__init__.py").write_text(f"raise ImportError({MARK + ' ' + package + ' was imported'!r})\n")
    (root / "properties.py").write_text(f"raise ImportError({MARK + ' properties was imported'!r})\n")
    shutil.copy(REPO / "examples" / "orders_sqlite.py", root / "orders_sqlite.py")
    return root


def marks(*folders: Path) -> list[str]:
    """Lines of every log under ``folders`` that say a project's module was imported in the harness's place."""
    found = []
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file() and path.suffix in ("", ".log", ".txt", ".out") and path.stat().st_size < 50 << 20:
                found += [f"{path}: {line}" for line in path.read_text(errors="replace").splitlines() if MARK in line]
    return found
