"""A cluster of hosts reached over SSH (``--cluster ssh:FILE``): the TOML file that names them, read and checked.

The file is the whole contract between the harness and a user's hosts, as a Jepsen test's node list is: who the
hosts are and how to reach them (user, key, the known_hosts file that vouches for their host keys), where Spark
and Python live on them, which host is the master (or the ``spark://`` URL of a cluster the user already runs),
which one holds the sink database, and the shared storage (NFS in real life) mounted at the same path on every
host and on this machine, where checkpoints, state and file sinks live. Every mistake in it is one line naming
the field and the fix, before anything is started on any host::

    user = "root"
    key = "keys/id_ed25519"            # relative paths are relative to this file
    known_hosts = "keys/known_hosts"   # default: ~/.ssh/known_hosts
    python = "/usr/bin/python3"        # default: python3 (PySpark importable by it)
    shared = "/mnt/streamchaos"
    master = "node1"                   # or "spark://10.0.0.5:7077": an existing cluster
    database = "node3"                 # optional: a host of the file, or "DATABASE_URL" (yours), else a local server
    kafka = "node2"                    # optional: the broker's host, or "KAFKA_BOOTSTRAP" (yours), else one here
    kafka_properties = "client.properties"  # optional, with KAFKA_BOOTSTRAP: its login (security.protocol, sasl.*)

    [[hosts]]
    name = "node1"
    address = "10.0.0.1"
    port = 22                          # optional
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from chaos.clusters.kafka import login as kafka_login
from chaos.clusters.kafka.login import BOOTSTRAP_VAR as USER_KAFKA
from chaos.clusters.ssh.dburl import VAR as USER_DATABASE
from chaos.clusters.ssh.dburl import read_url
from chaos.errors import UserError

PREFIX = "ssh:"
TOP_KEYS = {"user", "key", "known_hosts", "python", "spark_home", "shared", "master", "database", "kafka",
            "kafka_properties", "hosts"}
HOST_KEYS = {"name", "address", "port"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_MASTER_URL = re.compile(r"^spark://([^:/\s]+):(\d{1,5})$")


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    port: int = 22

    def __str__(self) -> str:
        return f"{self.name} ({self.address}:{self.port})"


@dataclass(frozen=True)
class HostCluster:
    """What ``FILE`` says. ``master`` is a host's name (the harness starts Spark there) or an existing
    cluster's ``spark://HOST:PORT``, where the harness starts no Spark process."""

    path: Path
    user: str
    key: Path
    known_hosts: Path
    hosts: tuple[Host, ...]
    master: str
    shared: str
    python: str = "python3"
    spark_home: str | None = None
    database: str | None = None
    kafka: str | None = None  # the host of the Kafka broker a job's Kafka source reads (chaos.clusters.ssh.kafka)
    kafka_properties: Path | None = None  # the login to the user's own cluster (chaos.clusters.kafka.login)

    @property
    def user_kafka(self) -> bool:
        """The broker is the user's own cluster, named by ``KAFKA_BOOTSTRAP`` (``chaos.clusters.ssh.userkafka``)."""
        return self.kafka == USER_KAFKA

    @property
    def kafka_host(self) -> str | None:
        """The host of the file the harness runs its broker on (``kafka = "HOST"``), if any."""
        return None if self.user_kafka else self.kafka

    @property
    def user_database(self) -> bool:
        """The sink database is the user's own, named by ``DATABASE_URL`` (``chaos.clusters.ssh.userdb``)."""
        return self.database == USER_DATABASE

    @property
    def existing(self) -> bool:
        return self.master.startswith("spark://")

    @property
    def master_host(self) -> Host | None:
        return None if self.existing else self.host(self.master)

    @property
    def workers(self) -> tuple[Host, ...]:
        """Every host runs a worker, the master's too, as on a small real cluster."""
        return self.hosts

    def host(self, name: str) -> Host:
        for host in self.hosts:
            if host.name == name:
                return host
        raise UserError(f"{self.path}: no host named {name!r}; the hosts are {', '.join(h.name for h in self.hosts)}")


def is_ssh(cluster: str) -> bool:
    return cluster.startswith(PREFIX)


def load(spec: str | Path) -> HostCluster:
    """``ssh:FILE`` (or FILE) -> the checked cluster; a mistake is one line naming the file, field and fix."""
    text = str(spec)
    path = Path(text[len(PREFIX):] if text.startswith(PREFIX) else text).expanduser()
    if not path.is_file():
        raise UserError(f"--cluster ssh:{path}: no such file; write the hosts' TOML file there (docs/clusters.md)")
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path} is not valid TOML ({exc}): fix the file (docs/clusters.md shows one)") from None
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise UserError(f"{path}: unknown field {unknown[0]!r}; the fields are {', '.join(sorted(TOP_KEYS))}")

    def text_field(name: str, required: bool = True) -> str | None:
        value = data.get(name)
        if value is None:
            if required:
                raise UserError(f"{path}: {name} is missing; add {name} = \"...\" (docs/clusters.md)")
            return None
        if not isinstance(value, str) or not value.strip():
            raise UserError(f"{path}: {name} must be a non-empty string, got {value!r}")
        return value.strip()

    def relative(value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else (path.parent / p).resolve()

    key = relative(text_field("key"))
    if not key.is_file():
        raise UserError(f"{path}: key {key} does not exist; give the private key that logs in as the user")
    known_hosts = relative(text_field("known_hosts", required=False) or "~/.ssh/known_hosts")
    if not known_hosts.is_file():
        raise UserError(f"{path}: known_hosts {known_hosts} does not exist; add the hosts' keys to it "
                        "(ssh-keyscan -p PORT ADDRESS >> FILE, after checking their fingerprints)")
    shared = text_field("shared")
    if re.match(r"^[a-z][a-z0-9+.-]*://", shared):
        raise UserError(f"{path}: shared = {shared!r}: a storage URL is not read yet; mount it (NFS, or HDFS or S3 "
                        "through a FUSE mount) at the same absolute path on every host and here, and give that path")
    if not shared.startswith("/"):
        raise UserError(f"{path}: shared = {shared!r} must be an absolute path, the same on every host and here")
    raw_hosts = data.get("hosts")
    if not isinstance(raw_hosts, list) or not raw_hosts:
        raise UserError(f"{path}: no [[hosts]]; add one [[hosts]] table per host with name and address")
    hosts: list[Host] = []
    for k, raw in enumerate(raw_hosts, 1):
        if not isinstance(raw, dict):
            raise UserError(f"{path}: host {k} must be a [[hosts]] table with name and address")
        if extra := sorted(set(raw) - HOST_KEYS):
            raise UserError(f"{path}: host {k}: unknown field {extra[0]!r}; a host has {', '.join(sorted(HOST_KEYS))}")
        name, address, port = raw.get("name"), raw.get("address"), raw.get("port", 22)
        if not isinstance(name, str) or not _NAME.match(name):
            raise UserError(f"{path}: host {k}: name {name!r} must be letters, digits, '.', '_' or '-'")
        if not isinstance(address, str) or not address.strip() or any(c.isspace() for c in address):
            raise UserError(f"{path}: host {name}: address {address!r} must be a host name or IP address")
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            raise UserError(f"{path}: host {name}: port {port!r} must be a number from 1 to 65535")
        if any(h.name == name for h in hosts):
            raise UserError(f"{path}: two hosts are named {name!r}: give each host its own name")
        hosts.append(Host(name, address.strip(), port))
    master = text_field("master")
    names = {h.name for h in hosts}
    if master.startswith("spark://"):
        if not _MASTER_URL.match(master):
            raise UserError(f"{path}: master = {master!r}: an existing cluster is spark://HOST:PORT")
    elif master not in names:
        raise UserError(f"{path}: master = {master!r} is neither a host of the file ({', '.join(sorted(names))}) "
                        "nor spark://HOST:PORT")
    database = text_field("database", required=False)
    if database == USER_DATABASE:
        read_url()  # set and well formed, before anything starts
    elif database is not None and database not in names:
        raise UserError(f"{path}: database = {database!r} is neither a host of the file ({', '.join(sorted(names))}) "
                        f"nor \"{USER_DATABASE}\" (your own database, whose URL the environment holds)")
    kafka = text_field("kafka", required=False)
    properties = text_field("kafka_properties", required=False)
    properties_path = relative(properties) if properties else None
    if kafka == USER_KAFKA:
        kafka_login.read_bootstrap()  # set and well formed, and the login usable, before anything starts
        kafka_login.load(properties_path)
    elif kafka is not None and kafka not in names:
        raise UserError(f"{path}: kafka = {kafka!r} is neither a host of the file ({', '.join(sorted(names))}) nor "
                        f"\"{USER_KAFKA}\" (your own cluster, whose servers the environment holds): name the host "
                        "the Kafka broker runs on, or leave kafka out for a broker on this machine")
    if properties and kafka != USER_KAFKA:
        raise UserError(f"{path}: kafka_properties is the login to your own cluster: it goes with "
                        f"kafka = \"{USER_KAFKA}\"; drop it for the harness's own broker")
    return HostCluster(path=path.resolve(), user=text_field("user"), key=key, known_hosts=known_hosts,
                       hosts=tuple(hosts), master=master, shared=shared,
                       python=text_field("python", required=False) or "python3",
                       spark_home=text_field("spark_home", required=False), database=database,
                       kafka=kafka, kafka_properties=properties_path)
