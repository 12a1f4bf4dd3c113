"""Secrets the harness hands its own processes through a file: 0600, in a 0700 directory of the system's temporary
directory named for the process that made it (``PREFIX<pid>-...``), outside every run directory.

The database's passfile (chaos.clusters.postgres) and a Kafka cluster's login (chaos.clusters.kafka.login) live so:
their maker removes them at its end, and a maker killed before that leaves them to the next one, which removes every
such directory whose process is gone before it writes its own.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import psutil


def private_file(prefix: str, name: str, text: str) -> Path:
    """``text`` in a new private file ``name`` of this process (its directory starts with ``prefix``), after the
    directories of dead processes with that prefix are removed."""
    reap_private(prefix)
    home = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))
    path = home / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    return path


def reap_private(prefix: str) -> None:
    """The private directories with ``prefix`` of processes that are gone (killed before they removed them)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        pid = folder.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
