"""Bad input: one clear line on stderr, exit 2, no traceback, nothing started."""

from __future__ import annotations

import fcntl
import os

import pytest

from tests.conftest import REPO, cli, left_by

JOB = [f"{REPO}/examples/orders_by_region.py:run", "--schema", "order_id STRING, account STRING, amount LONG, "
       "ts TIMESTAMP", "--sink", "postgres:region_totals", "--key", "region"]


@pytest.mark.parametrize(
    "args, words",
    [
        (["trial", "no-such-pipeline"], "unknown pipeline 'no-such-pipeline'"),
        (["trial", "passthrough-append", "--fault", "kill-driver@three:sink-done"], "malformed fault spec"),
        (["trial", "passthrough-append", "--fault", "kill-driver@3:flush"], "unknown phase 'flush'"),
        (["trial", "passthrough-append", "--events", "2000", "--fault", "kill-driver@12:sink-done"],
         "batches 0..9"),
        (["trial", "passthrough-append", "--cluster", "yarn"], "unknown cluster 'yarn'"),
        (["trial", "passthrough-append", "--events", "0"], "--events must be at least 1"),
        (["trial", "nosuchmodule_xyz:thing"], "cannot import pipeline module"),
        (["trial", "passthrough-append", "--bogus"], "No such option"),
        (["trial", "passthrough-append", "--fault", "kill-sink-db@1:sink-write"], "has no sink database"),
        (["trial", "key-count", "--fault", "cut-sink@1:sink-write/3s"], "has no sink channel"),
        (["trial", "socket-source", "--fault", "cut-source@1:reading/3s"], "reads a source of its own"),
        (["trial", "pg-append", "--fault", "delay-sink@1:sink-write/latency=x"], "unknown argument 'latency=x'"),
        (["trial", "rescale", "--fault", "stop-driver@1:sink-done"], "goes at :committed"),
        (["conformance", "--only", "nope"], "no conformance row for nope"),
        (["conformance", "--mix", "drain"], "--mix 'drain': use one of kill, decommission"),
        (["trial", "key-count", "--fault", "decommission-executor@1:reading/3s"], "it takes no duration"),
        (["trial", "passthrough-append", "--expect", "twice"], "--expect 'twice': use one of exactly-once"),
        (["campaign", "run", "--pipeline", "key-count", "--shard", "4/3"], "the index runs from 1"),
        (["campaign", "run", "--pipeline", "key-count", "--shard", "auto"], "found no scheduler here"),
        (["campaign", "run", "--pipeline", "windowed-count", "--late-fraction", "2"], "late_fraction must lie in"),
        (["trial", *JOB, "--values", "account=@no-such.csv"], "no-such.csv: cannot read it"),
        (["trial", *JOB, "--values", "acount=acc-1,acc-2"], "the payload has no field acount"),
        (["trial", *JOB, "--values", "order_id=1..5"], "carries each event's unique id"),
        (["trial", *JOB, "--values", "amount=1..9,12"], "'1..9' is not an int"),
        (["campaign", "run", "--pipeline", "key-count", "--values", "key=a,b"], "--values applies to a job"),
        (["campaign", "run", "--pipeline", "key-count", "--ray", "nohost"], "give the Ray head's address as HOST:PORT"),
        (["campaign", "merge", "out", "no-such-dir"], "no-such-dir is not a directory"),
        (["campaign", "run", "--pipeline", "key-count", "--recovery-timeout", "0"],
         "--recovery-timeout must be a positive number of seconds, got 0"),
        (["campaign", "run", "--pipeline", "key-count", "--faults", "kill,node"],
         "--faults node needs a cluster of nodes or hosts"),
        (["trial", "key-count", "--image", "my/spark:1"], "--image my/spark:1 names the image of Docker nodes: "
                                                          "add --cluster docker"),
        (["--spark", "3.5.1", "trial", "key-count"], "no Python data source API"),
        (["--spark", "four", "trial", "key-count"], "is not X.Y.Z"),
        (["trial", "key-count", "--spark"], "--spark needs a version"),
        (["trial", "key-count", "--spark=4.0.9"], "pyspark 4.0.9 is not added: run `streamchaos spark add 4.0.9`"),
        (["spark", "remove", "4.0.9"], "pyspark 4.0.9 was not added"),
        (["trial", "key-count", "--fault", "stop-driver@2:committed/upgrade=4.0.9"],
         "pyspark 4.0.9 is not added: run `streamchaos spark add 4.0.9`"),
        (["trial", "key-count", "--fault", "kill-driver@2:planned/upgrade=4.0.9"],
         "upgrade=VERSION only goes with stop-driver"),
        (["trial", "key-count", "--fault", "stop-driver@2:committed/1/upgrade=4.0.9"],
         "give executor cores or upgrade=VERSION, not both"),
        (["trial", "passthrough-file", "--fault", "stop-driver@2:committed/upgrade=4.3.0"],
         "has JVM hooks or a source of its own"),
        (["trial", "key-count", "--fault", "stop-driver@2:committed/upgrade=4.3.0", "--fault",
          "kill-executor@3:reading"], "runs in one local-mode driver"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, words):
    run = cli(*args, cwd=tmp_path)
    assert run.rc == 2, (run.stdout, run.stderr)
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and words in lines[0], run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "runs").exists(), "nothing is written for a rejected command"


def test_missing_java_says_how_to_fix_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    python_dir = os.path.dirname(os.path.realpath(os.sys.executable))
    env["PATH"] = python_dir  # a PATH with Python but no java
    run = cli("trial", "passthrough-append", cwd=tmp_path, env=env)
    assert run.rc == 2
    assert "no Java found" in run.stderr and "openjdk-17" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert left_by(run.pid) == []


def test_a_second_run_in_a_directory_another_run_uses_is_one_line_and_touches_nothing(tmp_path):
    """Two `streamchaos trial` in one runs/ at once: the second would empty the first's scratch folders."""
    runs = tmp_path / "runs"
    (runs / "tmp" / "driver-1").mkdir(parents=True)  # what the first run's driver keeps there
    with open(runs / ".harness.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.write("4242")
        lock.flush()
        run = cli("trial", "passthrough-append", cwd=tmp_path)
    assert run.rc == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert f"another streamchaos run (pid 4242) is using {runs}" in run.stderr
    assert (runs / "tmp" / "driver-1").is_dir()
    assert left_by(run.pid) == []


def test_check_of_a_corrupt_or_missing_run_is_one_line(tmp_path):
    run = cli("check", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert run.rc == 2 and "scenario.json" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "scenario.json").write_text('{"pipeline": "passthrough-append"}')
    (tmp_path / "run" / "result.json").write_text('{"outcome": "drai')
    run = cli("check", str(tmp_path / "run"), cwd=tmp_path)
    assert run.rc == 2 and "result.json is corrupt" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize("command", [[], ["trial"], ["campaign"], ["campaign", "run"], ["campaign", "resume"],
                                     ["replay"], ["analyze"], ["report"], ["check"], ["conformance"], ["demo"],
                                     ["doctor"], ["pipelines"]])
def test_every_help_page_renders(tmp_path, command):
    """Help texts hold brackets (``[/ARG...]``): they are plain text, never rich markup that can crash."""
    r = cli(*command, "--help", cwd=tmp_path)
    assert r.rc == 0, r.stderr
    assert "Usage" in r.stdout and "Traceback" not in r.stderr


def test_ray_without_ray_installed_says_how_to_install_it(tmp_path):
    fake = tmp_path / "site" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    run = cli("campaign", "run", "--pipeline", "key-count", "--ray", "auto", "--out", "c", cwd=tmp_path, env=env)
    assert run.rc == 2 and run.stderr.strip().splitlines() == [
        "error: --ray needs Ray, an optional extra: pip install -e '.[ray]' (or pip install 'ray>=2.9')"]
    assert not (tmp_path / "c").exists()
