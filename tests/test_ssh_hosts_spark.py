"""Hosts reached over SSH only (``--cluster ssh:FILE``): three containers of the host image, nothing of this
machine mounted but the shared volume. ``streamchaos doctor --cluster ssh:FILE`` checks each host as a trial
start will, and every bad input is one line naming the host and the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from chaos.clusters.docker.containers import configured
from chaos.clusters.ssh.client import Remote
from chaos.clusters.ssh.hostsfile import load
from chaos.clusters.ssh.remote import OWNED_DIRS, OWNER_FILE, HostProcs, HostRules, reap
from chaos.clusters.ssh.shipping import VENVS, ship, wheels
from chaos.machine.processes import my_tag, wait_until
from chaos.machine.spark import MASTER_CLASS, WORKER_CLASS
from chaos.run.admission import trial_scenario
from chaos.run.harness import Harness
from chaos.run.judge import run_trial
from tests.conftest import cli, left_by
from tests.ssh_hosts import SshHosts, keygen
from tests.users_database import SECRET, USERS_ROW, database_url, harness_schemas, users_rows, users_server

pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(not configured(), reason="no Docker daemon (the hosts are containers)")]


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    with SshHosts(tmp_path_factory.mktemp("ssh-hosts")) as made:
        yield made


def doctor(path, cwd):
    return cli("doctor", "--cluster", f"ssh:{path}", cwd=cwd)


def fails(run) -> list[str]:
    return [line for line in run.stdout.splitlines() if line.startswith("FAIL")]


def test_doctor_finds_java_pyspark_iptables_and_the_shared_storage_on_every_host(hosts, tmp_path):
    run = doctor(hosts.file, tmp_path)
    assert run.rc == 0, run.stdout + run.stderr
    ok = [line for line in run.stdout.splitlines() if line.startswith("ok")]
    assert len(ok) == 3 and all("pyspark 4.3.0" in line and str(hosts.shared) in line for line in ok), run.stdout
    assert not list(hosts.shared.glob(".streamchaos-probe-*"))  # the probe file is gone


def test_each_bad_input_is_one_line_naming_the_host_and_the_fix(hosts, tmp_path):
    a1, a2, a3 = hosts.addresses
    other = keygen(tmp_path / "other")  # a key no host knows
    assert other
    (tmp_path / "empty_known_hosts").write_text("")
    elsewhere = tmp_path / "not-shared"
    elsewhere.mkdir()
    secrets = [line for key in (hosts.keys / "id_ed25519", tmp_path / "other")
               for line in key.read_text().splitlines()[1:-1]]
    cases = {
        "unreachable": ({"hosts": [("host1", a1, 2)]}, f"host1 ({a1}:2) is unreachable over SSH"),
        "wrong user": ({"user": "nobody"}, "user 'nobody' was refused with key"),
        "wrong key": ({"key": str(tmp_path / "other")}, "was refused with key"),
        "unknown host key": ({"known_hosts": str(tmp_path / "empty_known_hosts")}, "its host key is not in"),
        "no pyspark": ({"python": "/usr/bin/python3.missing"}, "cannot import pyspark"),
        "shared missing": ({"shared": str(elsewhere)}, "does not show this machine's files"),
        "master silent": ({"master": f"spark://{a2}:7077"}, f"master spark://{a2}:7077 does not answer"),
    }
    for name, (fields, says) in cases.items():
        run = doctor(hosts.write(f"{name.replace(' ', '-')}.toml", **fields), tmp_path)
        failed = fails(run)
        every = 1 if name in ("unreachable", "master silent") else 3  # the file's one host, or the master
        assert run.rc == 1 and len(failed) == every, (name, run.stdout, run.stderr)
        assert all(says in line for line in failed) and "Traceback" not in run.stderr, (name, run.stdout)
        assert not any(line in run.stdout + run.stderr for line in secrets), name  # a key by its path only
    # A trial on such a file: the first problem in one line, exit 2, nothing started here or there.
    for fields, says in (({"known_hosts": str(tmp_path / "empty_known_hosts")}, "its host key is not in"),
                         ({"shared": str(elsewhere)}, "is not on the shared storage")):
        file = hosts.write("trial-bad.toml", **fields)
        run = cli("trial", "key-count", "--cluster", f"ssh:{file}", "--keep", str(hosts.shared / "runs" / "bad"),
                  cwd=tmp_path)
        assert run.rc == 2 and says in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
        assert left_by(run.pid) == [] and not (hosts.shared / "runs" / "bad").exists()
    # Java and iptables missing on one host: that host's lines, the others ok.
    third = hosts.containers[2]
    for tool in ("java", "iptables"):
        path = third.exec_run(["sh", "-c", f"command -v {tool}"]).output.decode().strip()
        third.exec_run(["mv", path, f"{path}.off"])
        try:
            run = doctor(hosts.file, tmp_path)
        finally:
            third.exec_run(["mv", f"{path}.off", path])
        failed = fails(run)
        assert run.rc == 1 and len(failed) == 1 and f"host host3 ({a3}:22)" in failed[0], run.stdout
        assert ("no Java" if tool == "java" else "no iptables") in failed[0]


def remote(hosts, n: int):
    cluster = load(hosts.file)
    return Remote(cluster, cluster.hosts[n - 1])


CONNECTS = "import socket, sys; socket.create_connection((sys.argv[1], 22), timeout=3).close()"


def test_the_code_travels_as_wheels_into_a_venv_that_sees_the_hosts_pyspark(hosts):
    host1 = remote(hosts, 1)
    try:
        files = wheels()
        t0 = time.monotonic()
        python = ship(host1, "/usr/bin/python3", files)
        first = time.monotonic() - t0
        probe = host1.run([python, "-c", "import chaos.stream.source, pipelines_under_test.postgres, psycopg, polars, "
                                         "pyspark; print(chaos.__file__, pyspark.__version__)"], check=True)
        where, version = probe.out.split()
        assert where.startswith(VENVS) and version == "4.3.0", probe.out
        t0 = time.monotonic()
        assert ship(host1, "/usr/bin/python3", files) == python  # the same code: the venv is found ready
        print(f"shipped {len(files)} wheels in {first:.1f}s; found again in {time.monotonic() - t0:.2f}s")
    finally:
        host1.close()


def test_tagged_processes_and_rules_are_found_signalled_healed_and_reaped(hosts, tmp_path):
    a1, a2, _ = hosts.addresses
    host1, host2, host3 = (remote(hosts, n) for n in (1, 2, 3))
    try:
        procs = HostProcs(host2)
        pid = procs.start(["sleep", "600"], log="/tmp/sleep.log")
        assert [p.pid for p in procs.tagged()] == [pid]
        procs.signal([pid], "STOP")
        assert host2.run(["ps", "-o", "stat=", "-p", str(pid)]).out.strip().startswith("T")
        procs.signal([pid], "CONT")
        assert procs.kill_all() == 1 and not procs.tagged()
        # A slowed host: a busy process of ours gets a tenth of the time while the throttle runs, all of it after.
        busy = procs.start(["python3", "-c", "while True: pass"], log="/dev/null")
        throttle = procs.throttle("python3", 0.1)
        slowed = cpu_share(host2, busy, 3.0)
        procs.unthrottle(throttle)
        free = cpu_share(host2, busy, 2.0)
        assert slowed < 0.3 and free > 0.6, (slowed, free)
        assert procs.kill_all() == 1 and not procs.tagged()
        # One way: host2 drops what host1 sends; host3 still gets through, and the heal lets host1 back in.
        rules = HostRules(host2)
        rule = rules.drop_from(a1)
        assert host1.run(["python3", "-c", CONNECTS, a2]).rc != 0
        assert host3.run(["python3", "-c", CONNECTS, a2]).rc == 0
        rules.delete(rule)
        assert host1.run(["python3", "-c", CONNECTS, a2]).rc == 0 and not rules.listed()
        # A harness SIGKILLed with a process, a rule and a data directory on host2: the next start reaps all three;
        # a process and a directory another control machine tagged are left alone.
        other = host2.run(["sh", "-c", "env STREAMCHAOS_OWNER=elsewhere/1:2.000 setsid sleep 600 >/dev/null 2>&1 "
                                       "</dev/null & echo $!"]).out.strip()
        host2.run(["sh", "-c", f"mkdir -p {OWNED_DIRS}/pg-other && echo elsewhere/1:2.000 > "
                               f"{OWNED_DIRS}/pg-other/{OWNER_FILE}"], check=True)
        killed = subprocess.run([sys.executable, "-c", ORPHAN, str(hosts.file), a1], capture_output=True, text=True,
                                timeout=60)
        assert killed.returncode == -9, killed.stderr
        assert len(HostProcs(host2).tagged("")) == 2 and len(rules.listed()) == 1
        reaped = cli("reap", "--cluster", f"ssh:{hosts.file}", cwd=tmp_path)
        assert reaped.rc == 0 and f"host host2 ({a2}:22): reaped 1 process(es) and 1 iptables rule(s)" in reaped.stdout
        assert reap(host2) == (0, 0)
        left = HostProcs(host2).tagged("")
        assert [p.tag for p in left] == ["elsewhere/1:2.000"] and str(left[0].pid) == other
        listing = host2.run(["ls", OWNED_DIRS]).out.split()
        assert "pg-orphan" not in listing and "pg-other" in listing, listing
        host2.run(["kill", "-9", other])
        host2.run(["rm", "-rf", f"{OWNED_DIRS}/pg-other"])
        for host in (host1, host2, host3):
            assert not HostProcs(host).tagged("") and not HostRules(host).listed()
    finally:
        for host in (host1, host2, host3):
            host.close()


def cpu_share(host, pid: int, seconds: float) -> float:
    """The share of ``seconds`` that process ``pid`` on ``host`` spent on a CPU (user + system ticks)."""
    def ticks() -> int:
        fields = host.run(["cat", f"/proc/{pid}/stat"]).out.rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    before, started = ticks(), time.monotonic()
    time.sleep(seconds)
    return (ticks() - before) / 100 / (time.monotonic() - started)  # USER_HZ is 100 on Linux


ORPHAN = """
import os, signal, sys
from chaos.clusters.ssh.hostsfile import load
from chaos.clusters.ssh.remote import OWNED_DIRS, OWNER_FILE, HostProcs, HostRules, remote_tag
from chaos.clusters.ssh.client import Remote
cluster = load(sys.argv[1])
host2 = Remote(cluster, cluster.hosts[1])
HostProcs(host2).start(["sleep", "600"], log="/tmp/orphan.log")
HostRules(host2).drop_from(sys.argv[2])
host2.run(["sh", "-c", f"mkdir -p {OWNED_DIRS}/pg-orphan && echo {remote_tag()} > {OWNED_DIRS}/pg-orphan/{OWNER_FILE}"])
os.kill(os.getpid(), signal.SIGKILL)
"""


# -- trials on the hosts: the driver here, master and workers there, faults over SSH ------------------------
@pytest.fixture(scope="module")
def ssh_harness(hosts):
    """One harness for the module's trials (its cluster starts once): master on host3, a worker on each host, the
    sink database on host2."""
    file = hosts.write("cluster.toml", master="host3", database="host2")
    listing = (f"ls -A /tmp /var/tmp {VENVS} 2>/dev/null | grep -v -e '^venv-' -e '^streamchaos$' -e '^{VENVS}:$' "
               "-e '^$' -e '^.lock$'; true")  # the venvs' folder and its lock are the harness's on purpose
    before = {}
    for n in (1, 2, 3):
        host = remote(hosts, n)
        before[n] = host.run(["sh", "-c", listing]).out
        host.close()
    with Harness(cluster=f"ssh:{file}", workdir=hosts.shared / "harness", data_dir=hosts.shared) as harness:
        yield harness
    for n in (1, 2, 3):  # nothing of ours on any host: no process, no rule, no new file but the venv
        host = remote(hosts, n)
        try:
            assert not HostProcs(host).tagged("") and not HostRules(host).listed()
            assert host.run(["sh", "-c", listing]).out == before[n]
        finally:
            host.close()


def host_trial(harness, hosts, name: str, pipeline: str, *faults: str, expect: str | None = None) -> dict:
    scenario = trial_scenario(pipeline, events=1000, fault=list(faults), cluster=harness.cluster_spec)
    result = run_trial(harness, scenario, hosts.shared / "runs" / name, last=False, expect=expect)
    return json.loads(json.dumps(result, default=str))


def test_a_driver_killed_after_an_append_sink_wrote_duplicates_its_batch(ssh_harness, hosts):
    r = host_trial(ssh_harness, hosts, "append", "passthrough-append", "kill-driver@3:sink-done")
    assert r["faults"][0]["fired"] and r["verdict"] == "at-least-once", r
    assert {d["batch"] for d in r["duplicated"]} == {3}
    assert r["cluster"]["kind"] == "ssh" and r["cluster"]["master"].startswith("spark://" + hosts.addresses[2])
    secret = (hosts.keys / "id_ed25519").read_text().splitlines()[1]  # a line of the private key's body
    stored = [f for f in Path(r["run_dir"]).rglob("*") if f.is_file() and secret.encode() in f.read_bytes()]
    assert stored == [], stored  # the run directory names the key by its path at most, never its content


def test_executors_killed_on_their_hosts_while_reading_and_while_the_sink_writes_and_a_worker_frozen(ssh_harness,
                                                                                                   hosts):
    r = host_trial(ssh_harness, hosts, "executor", "key-count", "kill-executor@2:reading",
                   "kill-executor@3:sink-write", "pause-worker@4:reading/1/3s")
    reading, writing, paused = r["faults"]
    assert paused["fired"] and paused["detail"]["worker"] == 1 and paused["detail"]["pid"], paused
    assert reading["fired"] and writing["fired"] and writing["detail"]["host"] in ("host1", "host2", "host3"), r
    # The reading task's executor: on the host the report came from, the reporting process's ancestor.
    records = [json.loads(line) for line in (Path(r["run_dir"]) / "history.jsonl").read_text().splitlines()]
    peer = next(x["detail"]["peer"] for x in records if x["kind"] == "phase" and x["batch"] == 2
                and x["phase"] == "reading")
    assert hosts.addresses[int(reading["detail"]["host"][-1]) - 1] == peer, (reading, peer)
    assert r["verdict"] == "exactly-once" and r["consistent_cut"]["ok"] is True, r


@pytest.mark.long
def test_the_file_sinks_phases_come_from_the_hooks_shipped_to_the_hosts(ssh_harness, hosts):
    """The file sink's commit protocol reports ``sink-write`` from the executors' JVMs on the hosts: the hooks'
    jar travels into the venv, as the wheels do; the part files land on the shared storage."""
    r = host_trial(ssh_harness, hosts, "file", "passthrough-file", "kill-executor@2:sink-write",
                   "kill-driver@3:sink-done")
    writing, done = r["faults"]
    assert writing["fired"] and writing["detail"]["host"] in ("host1", "host2", "host3") and done["fired"], r
    assert r["verdict"] == "exactly-once", r
    jar = ssh_harness.cluster.driver_conf["spark.executor.extraClassPath"]
    host1 = remote(hosts, 1)
    try:
        assert jar.startswith(VENVS) and host1.run(["test", "-f", jar]).rc == 0, jar
    finally:
        host1.close()


@pytest.mark.long
def test_a_host_cut_off_from_the_master_while_reading_keeps_key_count_exactly_once(ssh_harness, hosts):
    r = host_trial(ssh_harness, hosts, "partition", "key-count", "partition@2:reading/node=0/with=master/6s")
    fired = r["faults"][0]
    assert fired["fired"] and fired["detail"]["node"] == 0 and fired["detail"]["with"] == "master", fired
    assert r["verdict"] == "exactly-once" and r["consistent_cut"]["ok"] is True, r
    host1 = remote(hosts, 1)
    try:
        assert not HostRules(host1).listed()  # healed
    finally:
        host1.close()


@pytest.mark.long
def test_a_host_killed_one_slowed_and_another_frozen_keep_key_count_exactly_once(ssh_harness, hosts):
    r = host_trial(ssh_harness, hosts, "nodes", "key-count", "kill-node@2:reading/0", "slow-node@3:reading/2/4s",
                   "pause-node@4:reading/1/3s")
    assert all(f["fired"] for f in r["faults"]), r["faults"]
    assert [f["detail"]["node"] for f in r["faults"]] == [0, 2, 1]
    assert r["verdict"] == "exactly-once" and r["consistent_cut"]["ok"] is True, r


def test_the_database_host_killed_and_cut_off_and_a_worker_killed_keep_pg_upsert_exactly_once(ssh_harness, hosts):
    r = host_trial(ssh_harness, hosts, "pg", "pg-upsert-by-batch", "kill-sink-db@1:sink-write/2s",
                   "partition@2:sink-write/node=sink/3s", "kill-worker@4:reading/0")
    killed, cut, worker = r["faults"]
    assert all(f["fired"] for f in r["faults"]), r["faults"]
    assert cut["detail"]["node"] == "sink" and worker["detail"]["worker"] == 0, r["faults"]
    assert r["verdict"] == "exactly-once", r
    host2 = remote(hosts, 2)
    try:  # the server ran on host2, as the file's postgres user, tagged as the harness's
        ps = host2.run(["ps", "-o", "user=,args=", "-C", "postgres"]).out
        assert "postgres" in ps and f"-p {ssh_harness.database.port}" in ps, ps
        assert killed["detail"]["pid"] and not HostRules(host2).listed()  # the cut healed
    finally:
        host2.close()


@pytest.mark.long  # on the harness's own standalone workers: tests/test_decommission_spark.py
def test_a_decommissioned_executor_and_worker_hand_over_and_key_count_stays_exactly_once(ssh_harness, hosts):
    r = host_trial(ssh_harness, hosts, "decommission", "key-count", "decommission-executor@2:reading",
                   "decommission-worker@3:reading")
    executor, worker = r["faults"]
    assert executor["fired"] and worker["fired"] and worker["detail"]["worker"] in (0, 1, 2), r["faults"]
    assert r["verdict"] == "exactly-once" and r["consistent_cut"]["ok"] is True, r
    heals = [json.loads(line) for line in (Path(r["run_dir"]) / "history.jsonl").read_text().splitlines()]
    assert [h for h in heals if h["kind"] == "heal" and "error" not in h["detail"]], heals[-5:]  # a new worker


@pytest.mark.long
def test_a_cluster_and_a_database_the_user_runs_are_used_and_left_as_they_were(hosts, tmp_path):
    """A master and workers the test started (tagged apart), and the user's own PostgreSQL named by DATABASE_URL:
    the harness starts no Spark process, kills an executor of its own application by its id, writes the sink's
    tables in a schema of its own and cuts the sink's channel, and leaves cluster and database as it found them."""
    ours = f"{my_tag()}#users-cluster"
    cluster = load(hosts.file)
    master = Remote(cluster, cluster.hosts[0])
    started = []
    database = ExitStack()
    pg = database.enter_context(users_server(tmp_path / "users-db"))
    try:
        home, env = "/usr/local/lib/python3.11/dist-packages/pyspark", {"JAVA_TOOL_OPTIONS": "-XX:-UsePerfData"}
        procs = HostProcs(master, ours)
        started.append((master, procs.start([f"{home}/bin/spark-class", MASTER_CLASS, "--host", hosts.addresses[0],
                                             "--port", "7177"], log="/tmp/users-master.log", env=env)))
        assert wait_until(lambda: "ALIVE" in master.run(["cat", "/tmp/users-master.log"]).out, 120, 1)
        url = f"spark://{hosts.addresses[0]}:7177"
        for n in (2, 3):
            host = remote(hosts, n)
            started.append((host, HostProcs(host, ours).start(
                [f"{home}/bin/spark-class", WORKER_CLASS, url, "--host", hosts.addresses[n - 1], "--cores", "2",
                 "--memory", "2g"], log="/tmp/users-worker.log", env=env)))
        assert wait_until(lambda: master.run(["cat", "/tmp/users-master.log"]).out.count("Registering worker") == 2,
                          120, 1)
        file = hosts.write("existing.toml", master=url, database="DATABASE_URL")
        run = cli("trial", "pg-upsert-by-batch", "--cluster", f"ssh:{file}", "--keep",
                  str(hosts.shared / "runs" / "existing"), "--events", "600", "--fault", "kill-executor@2:reading",
                  "--fault", "down-sink@1:sink-write/2s", "--json", cwd=tmp_path, timeout=600,
                  env={**os.environ, **database_url(pg)})
        assert run.rc == 0, run.stderr[-2000:] + master.run(["sh", "-c", "tail -30 /tmp/users-master.log; ps -ef"]).out
        assert run.json["verdict"] == "exactly-once" and all(f["fired"] for f in run.json["faults"]), run.json
        assert users_rows(pg) == [USERS_ROW] and harness_schemas(pg) == set()  # its schema dropped at the stop
        kept = [f for f in Path(run.json["run_dir"]).rglob("*") if f.is_file() and SECRET.encode() in f.read_bytes()]
        assert kept == [] and SECRET not in run.stdout + run.stderr
        for host, pid in started:  # the user's master and workers run on; nothing of the trial's harness does
            tagged = HostProcs(host).tagged("")
            assert pid in {p.pid for p in tagged} and not [p for p in tagged if f"/{run.pid}:" in p.tag], tagged
    finally:
        for host, pid in started:
            host.run(["kill", "-9", str(pid)])
            # The user's cluster, the user's files: its logs, and its workers' scratch (their SPARK_LOCAL_DIRS,
            # where a killed executor's directory stays: a worker of the user's decides where and when it goes).
            host.run(["sh", "-c", "rm -rf /tmp/users-master.log /tmp/users-worker.log /tmp/spark-*"])
            host.close()
        database.close()
