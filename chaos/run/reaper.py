"""A watch that outlives its harness by a moment: when the harness's process dies, whatever it started dies too.

A harness started by hand that is SIGKILLed leaves its processes to the next start on that machine
(``chaos.machine.processes.reap_orphans``). A harness that runs inside a Ray actor may never see a next start there: its
node is lost, or its campaign's head was killed and Ray killed the actor with it. So such a harness starts
this watch: a small process in a session of its own that polls the harness's pid and, once it is gone,
reaps every process and Docker container whose owner is no longer alive, removes the harness's scratch
directory, then exits.

    python -m chaos.run.reaper OWNER_TAG [SCRATCH_DIR]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from chaos.machine.processes import OWNER_VAR, my_tag, owner_alive, reap_orphans

POLL_S = 0.5


def watch(scratch: Path | None = None) -> None:
    """Start the watch over this process (untagged itself: nobody reaps it, it ends after its harness). It is
    not this process's child: Ray kills a dead actor's children, and the watch must outlive the actor."""
    env = {k: v for k, v in os.environ.items() if k != OWNER_VAR}
    argv = [sys.executable, "-m", "chaos.run.reaper", my_tag(), *([str(scratch)] if scratch else [])]
    # A detached grandchild: the intermediate process exits at once, so the watch is nobody's child here.
    launcher = ("import subprocess, sys; subprocess.Popen(sys.argv[1:], start_new_session=True, "
                "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)")
    subprocess.run([sys.executable, "-c", launcher, *argv], env=env, check=True, timeout=60)


def main(tag: str, scratch: str | None = None) -> int:
    while owner_alive(tag):
        time.sleep(POLL_S)
    from chaos.clusters.registry import reap_every_kind

    reap_orphans()
    reap_every_kind()
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
