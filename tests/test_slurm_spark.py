"""docs/scale.md's Slurm recipe on a real Slurm (Debian's slurm-wlm and munge): a controller and one node on
this machine, inside a network namespace of the test's own (loopback and a veth pair whose both ends stay in
it, so the daemons listen on no address of this machine), `sbatch --array=1-2` of `campaign run --shard auto`,
then a job that depends on the array merges the shards: the merged plan is the unsharded plan (hash, ids,
schedules, windows) and every trial has its verdict. Verdicts themselves depend on timing and are not compared
(tests/test_shards.py checks the merge, a missing shard and another plan's refusal on fabricated trials).

Without Slurm these tests are skipped, except in CI (``CI=true``), where .ci/run installs it: there a missing
Slurm fails them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from chaos.campaign.stored import Campaign, CampaignSpec
from tests.conftest import cli

pytestmark = [pytest.mark.spark, pytest.mark.long]  # the long tier: pytest -m long

TOOLS = ("slurmctld", "slurmd", "sbatch", "squeue", "munged", "unshare", "ip")

SLURM_CONF = """ClusterName=streamchaos
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge.socket
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=8000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""

# In a fresh network namespace: Slurm resolves addresses with AI_ADDRCONFIG, which counts no loopback
# address, so a veth pair (both ends in this namespace) gives it one that nothing outside can reach.
SCRIPT = """set -u
d={d}
export SLURM_CONF=$d/slurm.conf
stop() {{
    for p in $d/slurmd.pid $d/slurmctld.pid $d/munged.pid; do
        [ -f $p ] || continue
        pid=$(cat $p); kill $pid 2>/dev/null
        for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    done
}}
trap stop EXIT
ip link set lo up
ip link add sc0 type veth peer name sc1 && ip addr add 10.254.254.1/32 dev sc0 && ip link set sc0 up \\
    && ip link set sc1 up
munged --socket=$d/munge.socket --pid-file=$d/munged.pid --seed-file=$d/munge.seed --force 2>/dev/null
slurmctld -f $SLURM_CONF -i && slurmd -f $SLURM_CONF -N localhost || exit 90
for _ in $(seq 30); do sinfo -h -o %T 2>/dev/null | grep -q idle && break; sleep 1; done
cd {work}
jobid=$(sbatch --parsable --array=1-2 --output=$d/shard-%a.out shards.sbatch) || exit 91
sbatch --wait --dependency=afterany:$jobid --output=$d/merge.out \\
    --wrap 'streamchaos campaign merge all shard-1 shard-2'
echo "merge rc $?"
"""

SBATCH = """#!/bin/bash
#SBATCH --cpus-per-task={cpus}
streamchaos campaign run --pipeline passthrough-append --trials 2 --seed 5 --events 600 --no-shrink \\
    --max-faults 1 --shard auto --out "shard-${{SLURM_ARRAY_TASK_ID}}"
"""


@pytest.fixture
def slurm_tools():
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs Slurm (slurm-wlm, munge): missing {', '.join(missing)}")
        pytest.skip(f"no Slurm here: missing {', '.join(missing)} (apt-get install slurm-wlm munge)")
    if os.geteuid() != 0:
        pytest.skip("a network namespace of the test's own needs root")


def test_a_slurm_array_runs_the_shards_and_a_dependent_job_merges_them(slurm_tools, tmp_path):
    d, work = tmp_path / "slurm", tmp_path / "work"
    for folder in (d / "state", d / "spool", work):
        folder.mkdir(parents=True)
    cpus = os.cpu_count() or 2
    (d / "slurm.conf").write_text(SLURM_CONF.format(d=d, cpus=cpus))
    (work / "shards.sbatch").write_text(SBATCH.format(cpus=cpus))  # the node's every core: one shard at a time
    proc = subprocess.run(["unshare", "--net", "bash", "-c", SCRIPT.format(d=d, work=work)],
                          capture_output=True, text=True, timeout=1500)
    logs = {p.name: p.read_text(errors="replace")[-2000:] for p in d.glob("*.out")}
    assert "merge rc 0" in proc.stdout or "merge rc 1" in proc.stdout, (proc.stdout, proc.stderr, logs)
    for i in (1, 2):
        assert f"shard {i}/2" in logs[f"shard-{i}.out"], logs
    summary = json.loads((work / "all" / "summary.json").read_text())
    assert summary["planned"] == summary["finished"] == 2 and summary["missing"] == []
    assert [m["shard"] for m in summary["merged_from"]] == [1, 2]
    assert (work / "all" / "report.html").exists()
    whole = Campaign.create(tmp_path / "whole", CampaignSpec(pipelines=["passthrough-append"], trials=2, seed=5,
                                                             events=600, shrink=False, max_faults=1))
    data = json.loads((work / "all" / "campaign.json").read_text())
    assert data["plan_hash"] == whole.data["plan_hash"] and data["plan"] == whole.plan
    assert data["windows"] == whole.data["windows"]
    for entry in whole.plan:
        verdict = json.loads((work / "all" / "trials" / entry["id"] / "verdict.json").read_text())
        assert verdict["verdict"] in ("exactly-once", "at-least-once"), verdict
    analyzed = cli("analyze", "all", cwd=work)
    assert "re-checked 2 trial(s): 2 unchanged" in analyzed.stdout, analyzed.stdout + analyzed.stderr
    left = subprocess.run(["pgrep", "-f", str(d)], capture_output=True, text=True).stdout.split()
    assert left == [], "a Slurm or munge daemon of the test is still running"
