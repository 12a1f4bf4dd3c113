"""What each host of ``--cluster ssh:FILE`` must have, checked over SSH before anything starts there.

A host needs Java 17+, the driver's PySpark (the same version: executors run the driver's plan and Python
workers with the driver's pickles), iptables for partitions, and the shared storage: the same files at the
same path as on this machine. The last is checked by content, not by existence: this machine writes a probe
file with a fresh token into the shared path and each host must read that token back, so a local directory that
merely exists at the path (an NFS mount that failed) is caught. One SSH command per host gathers everything;
each problem is one line naming the host and the fix.
"""

from __future__ import annotations

import secrets
import shlex
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from chaos.clusters.ssh.client import Remote
from chaos.clusters.ssh.hostsfile import Host, HostCluster
from chaos.errors import UserError
from chaos.machine.check import Check

PROBE = """
j="${JAVA_HOME:+$JAVA_HOME/bin/}java"
printf 'java=%s\\n' "$("$j" -XX:-UsePerfData -version 2>&1 | head -n 1)"
printf 'pyspark=%s\\n' "$(PYTHON -c 'import os, pyspark as p; print(p.__version__, os.path.dirname(p.__file__))' \
  2>&1 | tail -n 1)"
printf 'iptables=%s\\n' "$(command -v iptables || ls /usr/sbin/iptables /sbin/iptables 2>/dev/null | head -n 1)"
printf 'shared=%s\\n' "$(cat PROBEFILE 2>/dev/null)"
printf 'uid=%s\\n' "$(id -u)"
"""


@dataclass(frozen=True)
class HostFacts:
    """What a host reported: each problem one line naming the host and its fix; the PySpark's home."""

    host: Host
    problems: tuple[str, ...]
    spark_home: str | None = None


def parse_facts(host: Host, text: str, token: str, version: str, cluster: HostCluster) -> HostFacts:
    facts = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    problems: list[str] = []
    java = facts.get("java", "")
    major = _java_major(java)
    if major is None:
        problems.append(f"host {host}: no Java ({java.strip() or 'java not found'}): install Java 17 "
                        "(apt-get install openjdk-17-jre-headless) or set JAVA_HOME for the user")
    elif major < 17:
        problems.append(f"host {host}: Java {major}; Spark 4 needs 17 or later: install openjdk-17-jre-headless")
    home = None
    words = facts.get("pyspark", "").split()
    if len(words) != 2 or not words[0][:1].isdigit():
        problems.append(f"host {host}: {cluster.python} cannot import pyspark ({' '.join(words) or 'no output'}): "
                        f"pip install pyspark=={version} for it, or set python in {cluster.path}")
    elif words[0] != version:
        problems.append(f"host {host}: pyspark {words[0]} differs from the driver's {version}: install "
                        f"pyspark=={version} there (or run the driver on {words[0]})")
    else:
        home = cluster.spark_home or words[1]
    if not facts.get("iptables", "").strip():
        problems.append(f"host {host}: no iptables (partitions are iptables rules): apt-get install iptables")
    if facts.get("shared", "").strip() != token:
        problems.append(f"host {host}: {cluster.shared} does not show this machine's files there: mount the "
                        "shared storage at the same path on every host and here")
    if facts.get("uid", "").strip() != "0":
        problems.append(f"host {host}: user {cluster.user!r} is not root: faults need root (iptables, signals to "
                        "every Spark process); log in as root")
    return HostFacts(host, tuple(problems), home)


def _java_major(line: str) -> int | None:
    """``openjdk version "17.0.13" 2024-10-15`` -> 17; ``"1.8.0_392"`` -> 8; anything else None."""
    if "version" not in line or '"' not in line:
        return None
    number = line.split('"')[1]
    parts = number.split(".")
    try:
        return int(parts[1]) if parts[0] == "1" and len(parts) > 1 else int(parts[0])
    except ValueError:
        return None


def probe(cluster: HostCluster, remotes: dict[str, Remote], version: str) -> list[HostFacts]:
    """Every host's facts, probed in parallel; a host SSH cannot reach raises its one line."""
    shared = Path(cluster.shared)
    if not shared.is_dir():
        raise UserError(f"{cluster.path}: shared = {cluster.shared} is not a directory on this machine: mount the "
                        "shared storage here at the same path as on the hosts")
    token = secrets.token_hex(16)
    probe_file = shared / f".streamchaos-probe-{token[:8]}"
    probe_file.write_text(token)
    try:
        script = (PROBE.replace("PYTHON", shlex.quote(cluster.python))
                  .replace("PROBEFILE", shlex.quote(str(probe_file))))

        def one(host: Host) -> HostFacts:
            ran = remotes[host.name].run(["sh", "-c", script], timeout=60)
            return parse_facts(host, ran.out, token, version, cluster)

        with ThreadPoolExecutor(max_workers=min(8, len(cluster.hosts))) as pool:
            return list(pool.map(one, cluster.hosts))
    finally:
        probe_file.unlink(missing_ok=True)


def check_master_url(cluster: HostCluster) -> None:
    """An existing cluster's master must answer on its port before the harness relies on it."""
    if not cluster.existing:
        return
    host, port = cluster.master[len("spark://"):].rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise UserError(f"{cluster.path}: master {cluster.master} does not answer ({exc.strerror or exc}): start it "
                        "or fix the URL") from None


def check_hosts(cluster: HostCluster, remotes: dict[str, Remote], version: str) -> list[HostFacts]:
    """Everything the hosts need, or the first problem as one line (the rest follow in ``streamchaos doctor``)."""
    check_master_url(cluster)
    facts = probe(cluster, remotes, version)
    problems = [p for f in facts for p in f.problems]
    if problems:
        more = f" (and {len(problems) - 1} more: streamchaos doctor --cluster ssh:{cluster.path})" \
            if len(problems) > 1 else ""
        raise UserError(problems[0] + more)
    return facts


def check_hosts_file(spec: str) -> list[Check]:
    """``--cluster ssh:FILE``: each host reached over SSH and probed (``probe``), a check per host."""
    from chaos.clusters.ssh.client import Remote
    from chaos.clusters.ssh.hostsfile import load
    from chaos.errors import UserError
    from chaos.machine.spark_versions import current_version

    cluster = load(spec)  # a bad file: one line, exit 2
    checks: list[Check] = []
    if cluster.existing:
        try:
            check_master_url(cluster)
            checks.append(Check("master", "ok", f"{cluster.master} answers"))
        except UserError as exc:
            checks.append(Check("master", "fail", str(exc)))
    remotes = {h.name: Remote(cluster, h) for h in cluster.hosts}
    try:
        reachable = []
        for host in cluster.hosts:
            try:
                remotes[host.name].client()
                reachable.append(host)
            except UserError as exc:
                checks.append(Check("ssh", "fail", str(exc)))
        if reachable:
            try:
                facts = probe(cluster, remotes, current_version())
            except UserError as exc:
                return [*checks, Check("shared storage", "fail", str(exc))]
            for fact in (f for f in facts if f.host in reachable):
                name = "ssh"
                checks += [Check(name, "fail", p) for p in fact.problems] or [
                    Check(name, "ok", f"{fact.host}: Java 17+, pyspark {current_version()} at {fact.spark_home}, "
                                      f"iptables, {cluster.shared} shared")]
    finally:
        for remote in remotes.values():
            remote.close()
    if cluster.user_database:
        checks.append(check_user_database())
    if cluster.user_kafka:
        checks.append(check_user_kafka(cluster))
    return checks


def check_user_kafka(cluster: HostCluster) -> Check:
    """``kafka = "KAFKA_BOOTSTRAP"``: the user's cluster answers this machine with the login the file and the
    environment give."""
    from chaos.clusters.kafka.login import load, read_bootstrap
    from chaos.clusters.ssh.userkafka import UserKafka
    from chaos.errors import UserError

    try:  # a probe writes nothing: its work directory is never made
        found = UserKafka(read_bootstrap(), load(cluster.kafka_properties), Path(".")).probe()
    except UserError as exc:
        return Check("kafka", "fail", str(exc))
    return Check("kafka", "ok", f"{found} with the login; the trial's topics go under streamchaos.*")


def check_user_database() -> Check:
    """``database = "DATABASE_URL"``: the user's server takes the URL's login, which may create a schema."""
    from chaos.clusters.ssh.dburl import read_url
    from chaos.clusters.ssh.userdb import UserDatabase
    from chaos.errors import UserError

    url = read_url()
    try:
        UserDatabase(url, Path(".")).probe()
    except UserError as exc:
        return Check("database", "fail", str(exc))
    return Check("database", "ok", f"{url!r}: the login works and may create the harness's schema")
