"""How the harness starts a driver process (``python -m chaos.driver``): its command line and environment,
the same for a trial's cold driver, its standbys and the spares booted ahead of a trial."""

from __future__ import annotations

import sys
from pathlib import Path

from chaos.cluster import spark_env

SITE_HOOK = Path(__file__).resolve().parent / "sitehook"  # its sitecustomize: chaos/sitehook/sitecustomize.py


def driver_argv() -> list[str]:
    return [sys.executable, "-m", "chaos.driver"]


def driver_env() -> dict[str, str]:
    """A driver imports chaos and the user's pipeline module from the harness's working directory. Every
    Python process it starts (its data source planners) runs chaos/sitehook/sitecustomize.py first."""
    env = spark_env()
    env["PYTHONPATH"] = ":".join(p for p in [str(SITE_HOOK), str(Path.cwd()), env.get("PYTHONPATH", "")] if p)
    return env
