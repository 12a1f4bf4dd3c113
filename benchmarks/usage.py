"""What every process a harness owns uses, sampled once a second: the benchmarks' memory and CPU meter.

The harness tags each process it starts with ``STREAMCHAOS_OWNER`` (chaos/machine/processes.py); the sampler adds this
process (the harness itself) and reads, for each, RSS, PSS and CPU times. Summed RSS counts a page shared by
N processes (a forked Python worker's copy-on-write pages, the class archive every driver maps, libjvm) N
times; PSS counts it once in total. Both are budgets (``docs/performance.md``). The peak sample is kept
whole, so a benchmark can say where the memory lives (``breakdown``: per role, e.g. driver JVM, executor,
executor Python, master).

Per-process sampling misses the CPU of processes that live less than a second (the Python worker each
reader task forks, the planners' forks) and the kernel's work for them (loopback sockets, the file
system): ``machine_cpu_seconds`` is what the whole machine was busy for over the same span, from
/proc/stat, minus the sampler's own thread. On an otherwise idle machine that is the harness's true
CPU, and the floor its wall time cannot go below."""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict

import psutil

from chaos.machine.processes import OWNER_VAR


def role(args: list[str]) -> str:
    """What a harness process is, from its command line."""
    line = " ".join(args)
    if "CoarseGrainedExecutorBackend" in line:
        return "executor JVM"
    if "deploy.master" in line:
        return "master JVM"
    if "deploy.worker" in line:
        return "worker JVM"
    if "SparkSubmit" in line:
        return "driver JVM"
    if "chaos.driver" in line:
        return "driver Python"
    if "python_streaming_source_runner" in line:
        return "driver: streaming source runner"
    if "pyspark.sql.worker" in line:
        return "driver: data source planners"
    if "pyspark.daemon" in line or "chaos.driver.pydaemon" in line or "pyspark.worker" in line:
        return "executor Python"
    if "postgres" in line:
        return "postgres"
    return "harness and others"


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy since boot: user, nice, system, irq and softirq time
    (not idle, I/O wait or steal), summed over its cores."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:8]]
    user, nice, system, _idle, _iowait, irq, softirq = fields
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


class Usage:
    """Samples the harness's processes (those tagged by this process, and this process) once a second:
    peak summed RSS and PSS, the sample they peaked in, and the CPU seconds all of them used (each
    process's last sample: a process that lived less than a second may be missed; the sampler's own
    thread is not counted)."""

    def __init__(self) -> None:
        self.peak = 0
        self.peak_pss = 0
        self.peak_rows: list[tuple[str, int, int]] = []  # (role, rss, pss) of each process at the RSS peak
        self._window = (0, 0)  # peak (RSS, PSS) since the last ``take_window``
        self._cpu: dict[tuple[int, float], float] = {}  # (pid, create time) -> CPU seconds at its last sample
        self._roles: dict[tuple[int, float], str] = {}
        self._own = 0.0
        self._start = 0.0
        self._busy = (0.0, 0.0)  # machine_busy() when the sampling started and when it stopped
        self._pid = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def cpu_seconds(self) -> float:
        return sum(self._cpu.values()) - self._start - self._own

    @property
    def machine_cpu_seconds(self) -> float:
        """What the machine was busy for while sampling, the sampler's own thread left out."""
        return self._busy[1] - self._busy[0] - self._own

    def cpu_by_role(self) -> list[tuple[str, int, float]]:
        """(role, processes, CPU seconds) over the whole run, largest first (the harness's own before the start
        not counted)."""
        sums: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        for key, cpu in self._cpu.items():
            name = self._roles.get(key, "harness and others")
            sums[name][0] += 1
            sums[name][1] += cpu - (self._start + self._own if key[0] == self._pid else 0.0)
        return sorted(((name, int(n), cpu) for name, (n, cpu) in sums.items()), key=lambda row: -row[2])

    def roles_seen(self) -> dict[int, str]:
        """pid -> role of every process sampled at least once (benchmarks/accounting.py attributes the kernel's
        records of each process by it)."""
        return {pid: name for (pid, _), name in self._roles.items()}

    def take_window(self) -> tuple[int, int]:
        """Peak summed (RSS, PSS) since the previous call, e.g. one trial's (a soak's drift series)."""
        window, self._window = self._window, (0, 0)
        return window

    def breakdown(self) -> list[tuple[str, int, int, int]]:
        """(role, processes, RSS MiB, PSS MiB) at the RSS peak, largest first."""
        sums: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        for name, rss, pss in self.peak_rows:
            sums[name][0] += 1
            sums[name][1] += rss
            sums[name][2] += pss
        return sorted(((name, n, rss >> 20, pss >> 20) for name, (n, rss, pss) in sums.items()),
                      key=lambda row: -row[2])

    def _run(self) -> None:
        me = psutil.Process()
        self._pid = me.pid
        prefix = f"{me.pid}:"
        times = me.cpu_times()
        self._start = times.user + times.system
        while not self._stop.wait(1.0):
            procs = [me]
            for proc in psutil.process_iter(["pid"]):
                try:
                    if proc.environ().get(OWNER_VAR, "").startswith(prefix):
                        procs.append(proc)
                except (psutil.Error, OSError):
                    continue
            rows = []
            for proc in procs:
                try:
                    full = proc.memory_full_info()
                    times = proc.cpu_times()
                    key = (proc.pid, proc.create_time())
                    self._cpu[key] = times.user + times.system
                    if key not in self._roles:
                        self._roles[key] = "harness and others" if proc.pid == me.pid else role(proc.cmdline())
                    name = self._roles[key]
                except (psutil.Error, OSError):
                    continue
                rows.append((name, full.rss, getattr(full, "pss", full.rss)))
            rss = sum(r[1] for r in rows)
            if rss > self.peak:
                self.peak, self.peak_rows = rss, rows
            pss = sum(r[2] for r in rows)
            self.peak_pss = max(self.peak_pss, pss)
            self._window = (max(self._window[0], rss), max(self._window[1], pss))
            self._own = time.thread_time()

    def __enter__(self) -> Usage:
        self._busy = (machine_busy(), 0.0)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._busy = (self._busy[0], machine_busy())
