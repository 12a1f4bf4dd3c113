"""The node image's recipe and the mounts a node gets: no Docker needed."""

from __future__ import annotations

import sys
from pathlib import Path

from chaos.clusters.docker import image
from chaos.clusters.docker.nodes import host_mounts


def test_the_image_key_names_what_went_in():
    base = image.Recipe("bookworm", "http://archive.example/debian")
    assert base.tag == f"streamchaos-node:{base.key}" and len(base.key) == 12
    assert image.Recipe("bookworm", "http://archive.example/debian", tuple(reversed(image.PACKAGES))).key == base.key
    assert image.Recipe("trixie", "http://archive.example/debian").key != base.key
    assert image.Recipe("bookworm", "http://mirror.example/debian").key != base.key
    assert image.Recipe("bookworm", base.mirror, (*image.PACKAGES, "curl")).key != base.key


def test_the_mirror_is_the_one_apt_uses(tmp_path, monkeypatch):
    sources = tmp_path / "sources.list.d"
    sources.mkdir()
    (sources / "debian.sources").write_text("Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\n"
                                            "Types: deb\nURIs: http://mirror.example/debian-security\n")
    real = Path

    def fake(p, *rest):
        p = str(p)
        if p == "/etc/apt/sources.list":
            return real(tmp_path / "missing")
        if p == "/etc/apt/sources.list.d":
            return real(sources)
        return real(p, *rest)

    monkeypatch.setattr(image, "Path", fake)
    assert image.host_mirror() == "http://mirror.example/debian"
    (sources / "debian.sources").write_text("deb [arch=amd64] https://other.example/apt stable main\n"
                                            "deb http://ftp.example/debian bookworm main\n")
    assert image.host_mirror() == "http://ftp.example/debian"
    (sources / "debian.sources").write_text("")
    assert image.host_mirror() is None


def test_a_node_mounts_this_python_and_its_code_read_only_and_the_work_directory_read_write(tmp_path):
    mounts = host_mounts(tmp_path / "cluster")
    assert mounts[str((tmp_path / "cluster").resolve())] == {"bind": str((tmp_path / "cluster").resolve()),
                                                              "mode": "rw"}
    for prefix in {sys.prefix, sys.base_prefix}:  # this Python (a venv's, and the one it was made from)
        prefix = str(Path(prefix).resolve())  # a mount of its own, or inside one (a venv in the checkout: .venv)
        assert any(prefix == m or prefix.startswith(m + "/") for m, spec in mounts.items() if spec["mode"] == "ro")
    chaos_root = str(Path(image.__file__).resolve().parent.parent)
    assert any(chaos_root == m or chaos_root.startswith(m + "/") for m in mounts)  # the harness's code
    assert all(spec["bind"] == path for path, spec in mounts.items())  # each at its own path
    read_only = [Path(m) for m, spec in mounts.items() if spec["mode"] == "ro"]
    assert not any(a != b and a in b.parents for a in read_only for b in read_only)  # none inside another
    inside = host_mounts(Path(image.__file__).resolve().parent / "work")  # a work directory in the code's tree
    assert inside[str(Path(image.__file__).resolve().parent / "work")]["mode"] == "rw"
    assert any(spec["mode"] == "ro" and chaos_root.startswith(m) for m, spec in inside.items())
    assert "/" not in mounts
    jars = tmp_path / "cache" / "streamchaos"  # the JVM hooks' cache, read by executors in the nodes
    jars.mkdir(parents=True)
    assert host_mounts(tmp_path / "cluster", shared=(jars,))[str(jars.resolve())]["mode"] == "ro"


def test_no_docker_daemon_is_one_clear_line_and_nothing_to_reap(monkeypatch, tmp_path):
    import subprocess

    import pytest

    from chaos.clusters.docker.containers import client, reap_containers
    from chaos.errors import UserError

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no.sock")
    with pytest.raises(UserError, match="no Docker daemon answers at unix://.*no.sock.*start it"):
        client(timeout=5)
    assert reap_containers() == 0  # a harness without Docker starts as before
    done = subprocess.run([sys.executable, "-m", "chaos", "image", "build"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: no Docker daemon answers")
