"""How the harness starts a driver process (``python -m chaos.driver.process``): its command line and environment,
the same for a trial's cold driver, its standbys and the spares booted ahead of a trial."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from chaos.jobs.avro_values import HARNESS_CWD
from chaos.machine.own_packages import first_on_path, user_entries
from chaos.machine.spark import spark_env

SITE_HOOK = Path(__file__).resolve().parent / "sitehook"  # its sitecustomize: chaos/driver/sitehook/sitecustomize.py


def driver_argv() -> list[str]:
    return [sys.executable, "-m", "chaos.driver"]


def driver_env() -> dict[str, str]:
    """A driver imports the harness's packages first, then the user's pipeline module from the harness's
    working directory (chaos/machine/own_packages.py). Every Python process it starts (its data source planners) runs
    chaos/driver/sitehook/sitecustomize.py first."""
    env = spark_env()
    env["PYTHONPATH"] = os.pathsep.join([str(SITE_HOOK), first_on_path(str(Path.cwd()), *user_entries())])
    env[HARNESS_CWD] = str(Path.cwd())  # relative files a job's options name (chaos.jobs.avro_values.schema_file)
    return env
