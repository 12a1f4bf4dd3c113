"""Hosts reached over SSH only (``--cluster ssh:FILE``): three containers of the host image, nothing of this
machine mounted but the shared volume. ``streamchaos doctor --cluster ssh:FILE`` checks each host as a trial
start will, and every bad input is one line naming the host and the fix."""

from __future__ import annotations

import pytest

from chaos.containers import configured
from tests.conftest import cli
from tests.ssh_hosts import SshHosts, keygen

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
