"""Hosts to test ``--cluster ssh:FILE`` on, as Jepsen's Docker environment made them: containers of the host
image (``streamchaos image build --hosts``: sshd, Debian's Python with PySpark, nothing of this machine
mounted), on a network of their own, sharing one Docker volume that stands in for NFS, mounted at the same path
here and on every host. The test makes each host's SSH key and the login key, so the known_hosts file it writes
vouches for exactly these hosts. After they start, the code under test reaches them over SSH only."""

from __future__ import annotations

import io
import os
import secrets
import shutil
import socket
import subprocess
import tarfile
import time
from pathlib import Path

from chaos.clusters.docker.containers import client, labels
from chaos.clusters.docker.image import build, host_recipe

SSHD = "mkdir -p /run/sshd && exec /usr/sbin/sshd -D -e"


def keygen(path: Path) -> str:
    """A fresh ed25519 key pair at ``path``; its public line."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


def tar_of(files: dict[str, tuple[bytes, int]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(name.lstrip("/"))
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class SshHosts:
    """``count`` hosts up (sshd answering), the cluster file at ``self.file``; everything removed on exit."""

    def __init__(self, tmp: Path, count: int = 3, image: str | None = None) -> None:
        self.tmp, self.count = Path(tmp), count
        self.image = image  # a host image built for another PySpark (`streamchaos --spark V image build --hosts`)
        self.token = secrets.token_hex(3)
        self.keys = self.tmp / "keys"
        # The shared storage's path: the same on this machine and on the hosts (short: it appears in messages).
        self.shared = Path(f"/tmp/scd-shared-{os.getpid()}-{self.token}")
        self.containers: list = []
        self.addresses: list[str] = []
        self.network = self.volume = None
        self.docker = None

    def __enter__(self) -> SshHosts:
        self.docker = client()
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self) -> None:
        image = self.image or build(self.docker, host_recipe(), echo=lambda text: None)
        self.keys.mkdir(parents=True)
        self.shared.mkdir()
        login = keygen(self.keys / "id_ed25519")
        prefix = f"streamchaos-{os.getpid()}-ssh{self.token}"
        self.network = self.docker.networks.create(f"{prefix}-net", driver="bridge", labels=labels("network"))
        self.volume = self.docker.volumes.create(f"{prefix}-shared", driver="local", labels=labels("volume"),
                                                 driver_opts={"type": "none", "o": "bind", "device": str(self.shared)})
        known = []
        for n in range(1, self.count + 1):
            host_key = keygen(self.keys / f"host{n}")
            container = self.docker.containers.create(
                image, ["sh", "-c", SSHD], name=f"{prefix}-host{n}", hostname=f"host{n}", network=self.network.name,
                cap_add=["NET_ADMIN"], labels=labels("ssh-host"), detach=True,
                volumes={self.volume.name: {"bind": str(self.shared), "mode": "rw"}})
            self.containers.append(container)
            container.put_archive("/", tar_of({
                "/etc/ssh/ssh_host_ed25519_key": ((self.keys / f"host{n}").read_bytes(), 0o600),
                "/etc/ssh/ssh_host_ed25519_key.pub": (f"{host_key}\n".encode(), 0o644),
                "/root/.ssh/authorized_keys": (f"{login}\n".encode(), 0o600),
            }))
            container.start()
            container.reload()
            address = container.attrs["NetworkSettings"]["Networks"][self.network.name]["IPAddress"]
            self.addresses.append(address)
            known.append(f"{address} {host_key}")
        (self.keys / "known_hosts").write_text("\n".join(known) + "\n")
        for address in self.addresses:
            self._wait_for_sshd(address)
        self.file = self.write()

    def _wait_for_sshd(self, address: str, limit: float = 30.0) -> None:
        deadline = time.monotonic() + limit
        while True:
            try:
                with socket.create_connection((address, 22), timeout=2) as conn:
                    if conn.recv(4).startswith(b"SSH-"):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"sshd at {address} did not answer in {limit:.0f}s")
            time.sleep(0.2)

    def write(self, name: str = "hosts.toml", **fields) -> Path:
        """The cluster file (``fields`` override the top-level ones; ``hosts`` a list of (name, address, port))."""
        top = {"user": "root", "key": str(self.keys / "id_ed25519"), "known_hosts": str(self.keys / "known_hosts"),
               "python": "/usr/bin/python3", "shared": str(self.shared), "master": "host1"}
        top.update(fields)
        hosts = top.pop("hosts", [(f"host{n}", a, 22) for n, a in enumerate(self.addresses, 1)])
        lines = [f'{k} = "{v}"' for k, v in top.items() if v is not None]
        for host, address, port in hosts:
            lines += ["", "[[hosts]]", f'name = "{host}"', f'address = "{address}"', f"port = {port}"]
        path = self.tmp / name
        path.write_text("\n".join(lines) + "\n")
        return path

    def __exit__(self, *exc) -> None:
        for container in self.containers:
            try:
                container.remove(force=True, v=True)
            except Exception:  # noqa: BLE001  (already gone)
                pass
        for item in (self.network, self.volume):
            if item is not None:
                try:
                    item.remove()
                except Exception:  # noqa: BLE001
                    pass
        shutil.rmtree(self.shared, ignore_errors=True)
        if self.docker is not None:
            self.docker.close()
