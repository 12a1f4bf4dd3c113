"""The harness's code on a host of ``--cluster ssh:FILE``: a wheel it builds, installed into a venv there.

Executors and their Python workers import the harness (its source, sinks and Python daemon) and the pipeline's
module. A host shares nothing with this machine, so the code travels: this checkout is built into a wheel, and
the distributions it needs at run time that a host does not bring itself are taken as wheels of the versions
installed here (pip's cache, else PyPI). A host brings PySpark and what Spark's SQL workers import (pyarrow,
pandas, numpy: docs/clusters.md); the venv sees them (``--system-site-packages``) and gets the rest, installed
offline from the copied wheels. The venv's directory is named by a hash of the wheels, so a host keeps one per
version of the code and a second start finds it ready (its ``ready`` file is written last).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from chaos.clusters.ssh.client import Remote
from chaos.errors import UserError
from chaos.machine.distributions import canonical, closure, pyspark_sql
from chaos.machine.jvm import cache_dir

VENVS = "/var/tmp/streamchaos"  # on each host: one venv per code version, nothing else of the harness's
REPO = Path(__file__).resolve().parents[3]  # the checkout: chaos/clusters/ssh/ is three folders down
SOURCES = ("pyproject.toml", "README.md", "chaos", "properties", "pipelines_under_test", "reports")


def runtime_requirements(root: str = "streamchaos") -> dict[str, str]:
    """The installed distributions ``root`` needs at run time on Linux (its own extras left out, the extras it
    asks of others kept: ``psycopg[binary]``), name -> version, without what a host brings (``pyspark_sql``)."""
    found = closure([(root, frozenset())], without=set(pyspark_sql()))
    found.pop(canonical(root), None)
    return found


def wheels(echo=print) -> list[Path]:
    """This checkout as a wheel, and a wheel of every run-time requirement at its installed version."""
    folder = cache_dir() / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    sources = [p for top in SOURCES for p in sorted((REPO / top).rglob("*") if (REPO / top).is_dir()
                                                    else [REPO / top])
               if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    digest = hashlib.sha256()
    for path in sources:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    own_folder = folder / f"own-{digest.hexdigest()[:12]}"  # the same code: the same wheel, the same venv
    mine = next(own_folder.glob("streamchaos-*.whl"), None)
    if mine is None:
        with tempfile.TemporaryDirectory(prefix="streamchaos-wheel-") as scratch:
            tree = Path(scratch) / "src"  # a clean copy: an in-tree build/ could carry deleted modules along
            for path in sources:
                target = tree / path.relative_to(REPO)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
            built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", scratch,
                                    str(tree)], capture_output=True, text=True)
            if built.returncode != 0:
                raise UserError(f"could not build the harness's wheel from {REPO}: {built.stderr.strip()[-300:]}")
            own_folder.mkdir(exist_ok=True)
            own = next(Path(scratch).glob("streamchaos-*.whl"))
            mine = own_folder / own.name
            shutil.move(own, mine)
    wanted = {(canonical(name), version) for name, version in runtime_requirements().items()}
    missing = sorted(wanted - set(_wheels_in(folder)))
    if missing:
        pins = [f"{name}=={version}" for name, version in missing]
        echo(f"fetching {len(pins)} wheel(s) for the hosts: {', '.join(pins)}")
        got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                              "--python-version", "3.11", "--platform", "manylinux2014_x86_64",
                              "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
                              "-d", str(folder), *pins], capture_output=True, text=True)
        if got.returncode != 0:
            raise UserError(f"could not fetch wheels for the hosts ({got.stderr.strip().splitlines()[-1:]}): "
                            "pip must reach PyPI or have them cached")
    found = _wheels_in(folder)
    if absent := sorted(wanted - set(found)):
        raise UserError(f"no wheel of {absent[0][0]}=={absent[0][1]} in {folder}: delete the folder and start again")
    return [mine, *(found[key] for key in sorted(wanted))]


def _wheels_in(folder: Path) -> dict[tuple[str, str], Path]:
    """The folder's wheels by (canonical name, version), read from their file names."""
    return {(canonical(words[0]), words[1]): path
            for path in folder.glob("*.whl") if len(words := path.name.split("-")) > 2}


def venv_home(files: list[Path]) -> str:
    """The venv's directory on a host for these wheels: the harness's own wheel keeps one file name across
    versions, so its folder (named by the sources' hash) is part of what is hashed."""
    names = sorted(f"{p.parent.name}/{p.name}" if p.name.startswith("streamchaos-") else p.name for p in files)
    return f"{VENVS}/venv-{hashlib.sha256(chr(10).join(names).encode()).hexdigest()[:12]}"


def host_jar(files: list[Path], jar: Path) -> str:
    """Where ``jar`` (one of ``files``) is on every host once shipped: in the venv's ``jars/``."""
    return f"{venv_home(files)}/jars/{jar.name}"


KEEP_VENVS = 3  # on each host, the newest venvs of the harness's code kept; older ones go once a new one is made
# Older venvs (by their ``ready`` file's age) beyond the newest KEEP_VENVS, but never one a process runs from.
PRUNE = ("ls -1t {venvs}/venv-*/ready 2>/dev/null | tail -n +$(({keep} + 1)) | while read -r f; do "
         "d=${{f%/ready}}; pgrep -f \"$d/\" >/dev/null || rm -rf \"$d\"; done; true")


def ship(remote: Remote, python: str, files: list[Path]) -> str:
    """The venv on ``remote`` with ``files`` installed (wheels; a jar goes to its ``jars/``, ``host_jar``); its
    Python. Made once per set of files, under a lock on the host: two harnesses starting at once (two campaigns
    on one cluster) make it once."""
    home = venv_home(files)
    venv_python = f"{home}/bin/python"
    if remote.run(["test", "-f", f"{home}/ready"]).rc == 0:
        return venv_python
    upload = f"{home}.wheels-{os.getpid()}-{secrets.token_hex(3)}"
    remote.run(["mkdir", "-p", upload], check=True)
    try:
        for path in files:
            remote.put(path, f"{upload}/{path.name}")
        jars = [f"{upload}/{path.name}" for path in files if path.suffix == ".jar"]
        script = (f"[ -f {home}/ready ] && exit 0; rm -rf {home} && {shlex.quote(python)} -m venv "
                  f"--system-site-packages {home} && {venv_python} -m pip install -q --no-index --no-deps "
                  f"{upload}/*.whl && mkdir -p {home}/jars"
                  + "".join(f" && cp {jar} {home}/jars/" for jar in jars) + f" && touch {home}/ready"
                  + f" && {PRUNE.format(venvs=VENVS, keep=KEEP_VENVS)}")
        remote.run(["flock", "-w", "600", f"{VENVS}/.lock", "sh", "-c", script], check=True, timeout=660)
    finally:
        remote.run(["rm", "-rf", upload])
    return venv_python


def link_python(path: str) -> None:
    """PySpark names one Python for every worker, the driver's own (a Python data source plans in one) and the
    executors': the venv's path on the hosts. Here that path starts this Python, which has the same code: a script
    that runs it by the path it was started by. Not a symbolic link: Python finds a venv by the ``pyvenv.cfg``
    beside the path it is started by, so a link to a venv's interpreter from elsewhere starts the base Python,
    without the venv's packages."""
    link = Path(path)
    script = f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n"
    if link.resolve() == Path(sys.executable).resolve() and not link.is_symlink():
        return  # this very Python (the hosts' venv path is this machine's own)
    if link.is_file() and not link.is_symlink() and link.read_text(errors="replace") == script:
        return
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    partial = link.with_name(f".{link.name}.{os.getpid()}")
    partial.write_text(script)
    partial.chmod(0o755)
    partial.replace(link)  # another harness of this machine may start it at this moment
