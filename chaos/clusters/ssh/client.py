"""Commands on a user's hosts over SSH: the only way the harness reaches a host of ``--cluster ssh:FILE``.

paramiko, because the harness is threads and blocking calls throughout (a fault fires from a watcher thread
while the driver runs), and paramiko's client is a blocking object one thread can use while another waits; it
verifies host keys against a known_hosts file with a policy that refuses an unknown key (``RejectPolicy``),
and speaks SFTP for the files the harness ships. Host keys are always verified: a host missing from the
known_hosts file is refused, not added. The private key is read from its file by paramiko and never printed,
logged or stored: errors name its path only.
"""

from __future__ import annotations

import shlex
import threading
from dataclasses import dataclass
from pathlib import Path

import paramiko

from chaos.clusters.ssh.hostsfile import Host, HostCluster
from chaos.errors import UserError

CONNECT_TIMEOUT = 10.0


@dataclass(frozen=True)
class Ran:
    rc: int
    out: str
    err: str


class Remote:
    """One host's SSH connection, opened on first use and shared by the harness's threads (paramiko's transport
    multiplexes channels: each command is a channel of its own)."""

    def __init__(self, cluster: HostCluster, host: Host) -> None:
        self.cluster, self.host = cluster, host
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()

    def client(self) -> paramiko.SSHClient:
        with self._lock:
            if self._client is None or not self._transport_alive():
                self._client = connect(self.cluster, self.host)
            return self._client

    def _transport_alive(self) -> bool:
        transport = self._client.get_transport() if self._client is not None else None
        return transport is not None and transport.is_active()

    def run(self, command: str | list[str], timeout: float = 60.0, check: bool = False) -> Ran:
        """Run ``command`` (a list is quoted word by word) in the user's shell; its exit code and output."""
        text = command if isinstance(command, str) else shlex.join(command)
        try:
            _, stdout, stderr = self.client().exec_command(text, timeout=timeout)
            out = stdout.read().decode(errors="replace")
            err = stderr.read().decode(errors="replace")
            rc = stdout.channel.recv_exit_status()
        except TimeoutError:
            raise UserError(f"host {self.host}: `{text[:80]}` did not finish in {timeout:.0f}s over SSH") from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise UserError(f"host {self.host}: the SSH connection broke ({type(exc).__name__}: {exc}); check "
                            "that the host is up") from None
        ran = Ran(rc, out, err)
        if check and rc != 0:
            lines = (err or out).strip().splitlines()
            last = lines[-1] if lines else "no output"
            raise UserError(f"host {self.host}: `{text[:80]}` failed (exit {rc}: {last})")
        return ran

    def put(self, local: Path, remote: str) -> None:
        """Copy a file to the host (SFTP), written under a temporary name and renamed: whole or not at all."""
        partial = f"{remote}.part"
        try:
            with self.client().open_sftp() as sftp:
                sftp.put(str(local), partial)
                sftp.posix_rename(partial, remote)
        except (paramiko.SSHException, OSError) as exc:
            raise UserError(f"host {self.host}: could not copy {local.name} to {remote} ({exc}); check the "
                            "directory exists and the user may write it") from None

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


def connect(cluster: HostCluster, host: Host) -> paramiko.SSHClient:
    """An SSH client logged in to ``host``, its host key checked against the file's known_hosts; every way it
    can fail is one line naming the host and the fix."""
    client = paramiko.SSHClient()
    try:
        client.load_host_keys(str(cluster.known_hosts))
    except (OSError, paramiko.SSHException) as exc:
        raise UserError(f"{cluster.path}: known_hosts {cluster.known_hosts} cannot be read ({exc}): fix or "
                        "regenerate it") from None
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    fix_address = f"check address and port of host {host.name} in {cluster.path} and that sshd runs there"
    try:
        client.connect(host.address, port=host.port, username=cluster.user, key_filename=str(cluster.key),
                       timeout=CONNECT_TIMEOUT, banner_timeout=CONNECT_TIMEOUT, auth_timeout=CONNECT_TIMEOUT,
                       allow_agent=False, look_for_keys=False)
    except paramiko.BadHostKeyException:
        client.close()
        raise UserError(f"host {host}: its host key differs from the one in {cluster.known_hosts}: if the host was "
                        "rebuilt, check its new fingerprint and replace the line") from None
    except paramiko.AuthenticationException:
        client.close()
        raise UserError(f"host {host}: user {cluster.user!r} was refused with key {cluster.key}: check user and key "
                        f"in {cluster.path} (the key's public half in the user's ~/.ssh/authorized_keys)") from None
    except paramiko.SSHException as exc:
        client.close()
        if "not found in known_hosts" in str(exc):
            raise UserError(f"host {host}: its host key is not in {cluster.known_hosts}: check its fingerprint, then "
                            f"add it (ssh-keyscan -p {host.port} {host.address} >> {cluster.known_hosts})") from None
        raise UserError(f"host {host}: SSH failed ({exc}): {fix_address}") from None
    except TimeoutError:
        client.close()
        raise UserError(f"host {host} does not answer on SSH within {CONNECT_TIMEOUT:.0f}s: {fix_address}") from None
    except (OSError, paramiko.ssh_exception.NoValidConnectionsError) as exc:
        client.close()
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UserError(f"host {host} is unreachable over SSH ({reason}): {fix_address}") from None
    return client
