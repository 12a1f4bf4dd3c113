"""A watch that outlives its harness by a moment: when the harness's process dies, whatever it started dies too.

A harness started by hand that is SIGKILLed leaves its processes to the next start on that machine
(``chaos.procs.reap_orphans``). A harness that runs inside a Ray actor may never see a next start there: its
node is lost, or its campaign's head was killed and Ray killed the actor with it. So such a harness starts
this watch: a small process in a session of its own that polls the harness's pid and, once it is gone,
reaps every process and Docker container whose owner is no longer alive, then exits.

    python -m chaos.reaper OWNER_TAG
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from chaos.procs import OWNER_VAR, my_tag, owner_alive, reap_orphans

POLL_S = 0.5


def watch() -> subprocess.Popen:
    """Start the watch over this process (untagged itself: nobody reaps it, it ends after its harness)."""
    env = {k: v for k, v in os.environ.items() if k != OWNER_VAR}
    return subprocess.Popen([sys.executable, "-m", "chaos.reaper", my_tag()], env=env, start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main(tag: str) -> int:
    while owner_alive(tag):
        time.sleep(POLL_S)
    from chaos.containers import reap_containers

    reap_orphans()
    reap_containers()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
