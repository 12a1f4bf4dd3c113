"""The hosts' venvs (chaos/clusters/ssh/shipping.py): older ones pruned, the newest few and any in use kept. No SSH:
the prune is the shell line a host runs, run here on a folder of fake venvs."""

from __future__ import annotations

import os
import subprocess
import time

from chaos.clusters.ssh.shipping import KEEP_VENVS, PRUNE


def test_old_venvs_go_but_the_newest_and_one_in_use_stay(tmp_path):
    now = time.time()
    for age in range(6):  # venv-0 the newest
        ready = tmp_path / f"venv-{age}" / "ready"
        ready.parent.mkdir()
        ready.touch()
        os.utime(ready, (now - 60 * age, now - 60 * age))
    busy = subprocess.Popen(["bash", "-c", f"exec -a {tmp_path}/venv-5/bin/python sleep 30"])
    try:
        time.sleep(0.3)
        subprocess.run(["sh", "-c", PRUNE.format(venvs=tmp_path, keep=KEEP_VENVS)], check=True)
    finally:
        busy.kill()
        busy.wait()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["venv-0", "venv-1", "venv-2", "venv-5"]
