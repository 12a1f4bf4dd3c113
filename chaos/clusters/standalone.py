"""The Spark cluster a trial runs on (Jepsen's "db").

Three shapes, named by ``--cluster``:
* ``standalone`` (default): a master and N workers started from the pyspark wheel alone
  (``spark-class ...deploy.master.Master`` / ``...deploy.worker.Worker``), each a separate process
  group owned by the harness, bound to 127.0.0.1. Workers can be killed and restarted.
* ``local-cluster[W,C,M]``: Spark's test cluster; executors are real JVMs under the driver.
* ``spark://host:port``: a cluster the user runs; we only find our app's executors on it.

Executors are found in the process table (``CoarseGrainedExecutorBackend --executor-id N
--app-id APP``), which is how faults aim at them.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import psutil

from chaos.clusters.base import Cluster, Heal, OwnWorkers, stop_processes
from chaos.errors import HarnessError, UserError
from chaos.machine.processes import Group, Owned, wait_until
from chaos.machine.spark import (
    MASTER_CLASS,
    WORKER_CLASS,
    WORKER_DECOMMISSION_OPTS,
    free_port,
    log_tail,
    port_in_use,
    read_log,
    spark_env,
    spark_home,
)


class LocalCluster(Cluster):
    """``local-cluster[W,C,M]``: Spark's test cluster; executors are real JVMs under the driver."""

    kind = "local-cluster"


class StandaloneCluster(OwnWorkers):
    """Master + N workers from the pyspark wheel, each in its own process group."""

    kind = "standalone"

    @classmethod
    def create(cls, spec: str, owned: Owned, workdir: Path, workers: int, worker_cores: int, java_options: str,
               data_dir: Path) -> StandaloneCluster:
        # Each worker's memory fits one 512m executor per core (a standby application holds its own).
        return cls(owned, workdir, workers=workers, worker_cores=worker_cores, worker_memory=f"{worker_cores}g",
                   java_options=java_options)

    @classmethod
    def refusal(cls, fault, spec: str) -> str | None:
        if fault.target == "worker":  # its workers are the harness's processes: killed, paused, decommissioned
            return None
        return super().refusal(fault, spec)

    def __init__(
        self,
        owned: Owned,
        workdir: Path,
        workers: int = 2,
        worker_cores: int = 1,
        worker_memory: str = "1g",
        master_port: int | None = None,
        java_options: str = "",
    ) -> None:
        if master_port is not None and port_in_use(master_port):
            raise UserError(f"port {master_port} on 127.0.0.1 is in use: pick another master port or free it")
        self.port = master_port or free_port()
        super().__init__(f"spark://127.0.0.1:{self.port}")
        self.owned = owned
        self.workdir = Path(workdir)
        self.workers = workers
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.java_options = java_options
        self.master: Group | None = None
        self.worker_list: list[Group | None] = [None] * workers
        self.tmp = self.workdir / "tmp"  # the master's, workers' and executors' temporary files

    def _env(self) -> dict[str, str]:
        return spark_env(self.java_options, self.tmp)

    def _spark_class(self) -> str:
        return os.path.join(spark_home(), "bin", "spark-class")

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.tmp, ignore_errors=True)  # what killed JVMs of an earlier start left
        self.tmp.mkdir()
        log = self.workdir / "master.log"
        # Fresh, as a worker's is: readiness is read from this start's lines. An earlier harness's "ALIVE" in
        # the same runs/ directory let the workers start before this master was leader; refused as a standby
        # master's, they registered again only on their retry, 10-15 s later.
        log.write_text("")
        self.master = self.owned.spawn(
            "master",
            [self._spark_class(), MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port),
             "--webui-port", str(free_port())],
            env=self._env(),
            log_path=log,
        )
        ok = wait_until(lambda: "ALIVE" in read_log(log) or not self.master.alive(), 90, 0.2)
        if not ok or not self.master.alive():
            raise HarnessError(f"Spark master did not start; see {log}: {log_tail(log)}")
        for i in range(self.workers):
            self.start_worker(i)
        for i in range(self.workers):
            self.wait_worker(i)

    def _worker_log(self, i: int) -> Path:
        return self.workdir / f"worker-{i}.log"

    def start_worker(self, i: int) -> None:
        log = self._worker_log(i)
        log.write_text("")  # a restart's log starts fresh, so readiness reads this start's lines
        work = self.workdir / f"worker-{i}"
        work.mkdir(exist_ok=True)
        env = self._env()
        env["SPARK_WORKER_DIR"] = str(work)
        env["SPARK_WORKER_OPTS"] = WORKER_DECOMMISSION_OPTS
        self.worker_list[i] = self.owned.spawn(
            f"worker-{i}",
            [self._spark_class(), WORKER_CLASS, self.master_url, "--host", "127.0.0.1",
             "--cores", str(self.worker_cores), "--memory", self.worker_memory,
             "--work-dir", str(work), "--webui-port", str(free_port())],
            env=env,
            log_path=log,
        )

    def wait_worker(self, i: int, timeout: float = 90) -> None:
        log, group = self._worker_log(i), self.worker_list[i]
        ok = wait_until(lambda: "Successfully registered with master" in read_log(log) or not group.alive(),
                        timeout, 0.2)
        if not ok or not group.alive():
            raise HarnessError(f"Spark worker {i} did not register; see {log}: {log_tail(log)}")

    def kill_worker(self, i: int) -> int | None:
        return self.owned.end(self.worker_list[i])

    def pause_worker(self, i: int) -> tuple[int | None, Heal]:
        group = self.worker_list[i]
        if group is None:
            raise LookupError(f"worker {i} is not running")
        return group.pid, stop_processes(group.members())

    def restart_worker(self, i: int) -> None:
        self.kill_worker(i)
        self.start_worker(i)
        self.wait_worker(i)

    def decommission_worker(self, i: int) -> None:
        """SIGPWR to worker ``i`` (started with ``spark.decommission.enabled``): it decommissions its executors."""
        self.worker_list[i].signal_leader(signal.SIGPWR)

    def worker_groups(self) -> list[Group]:
        return [g for g in self.worker_list if g is not None]

    def worker_index_of(self, pid: int) -> int | None:
        """Which worker launched the process ``pid`` (an executor or its Python worker)."""
        try:
            ancestors = {p.pid for p in psutil.Process(pid).parents()} | {pid}
        except psutil.Error:
            return None
        for i, group in enumerate(self.worker_list):
            if group is not None and group.pid in ancestors:
                return i
        return None

    def healthy(self) -> bool:
        return bool(self.master and self.master.alive()) and all(
            g is not None and g.alive() for g in self.worker_list
        )

    def heal(self) -> None:
        """Between trials: restart whatever died (a killed worker, or the whole cluster)."""
        if not (self.master and self.master.alive()):
            self.stop()
            self.start()
            return
        for i, group in enumerate(self.worker_list):
            if group is None or not group.alive():
                self.restart_worker(i)

    def stop(self) -> None:
        for group in [*self.worker_list, self.master]:
            if group is not None:
                group.kill()
                self.owned.forget(group)
        self.worker_list = [None] * self.workers
        self.master = None
        shutil.rmtree(self.tmp, ignore_errors=True)

    def describe(self) -> dict:
        return {"kind": self.kind, "master": self.master_url, "workers": self.workers,
                "worker_cores": self.worker_cores, "worker_memory": self.worker_memory}

