"""The node image: a Debian root filesystem with Java 17, built offline from Debian's packages.

``streamchaos image build`` needs no image registry: ``debootstrap`` installs a minimal Debian (the
release and mirror this machine's apt uses) with the packages below into a directory, which ``docker
import`` turns into the image ``streamchaos-node:KEY``. KEY is a hash of what went in (release, mirror,
packages, this recipe's version): the same recipe is built once per machine and found again by its tag. The
root filesystem is kept in the cache (``rootfs_cache``): another dockerd on the machine imports it in seconds.

What a node runs comes from the host, mounted read-only at the same paths (chaos.clusters.docker.nodes): this Python
interpreter with its installed packages (PySpark and its jars, the harness, pyarrow), the harness's and
the pipelines' code. So executors and their Python workers in a node run exactly the driver's code, and
the image holds only what that Python and Spark's JVMs need from the system: Java 17, the C libraries
CPython's extension modules link (OpenSSL, libffi, SQLite, bz2, xz, zlib, ncurses, readline, libuuid,
expat) and the tools the faults use inside a node (iptables, iproute2, procps).

``streamchaos image build --hosts`` builds ``streamchaos-host:KEY`` instead: a stand-in for a user's host of
``--cluster ssh:FILE`` (chaos/clusters/ssh/hostsfile.py), which shares nothing with this machine. It adds sshd and
Debian's Python 3.11, and installs into that Python what a host must have, copied from this machine's installation at
build time: PySpark (the driver's version) with what its SQL workers import (py4j, pyarrow, pandas, numpy). Nothing is
mounted from this machine when it runs; the harness's own code reaches it over SSH. Its sshd has no host key in the
image: whoever starts a container gives it one (a known_hosts file can then vouch for it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from chaos.errors import UserError
from chaos.machine.jvm import cache_dir

REPOSITORY = "streamchaos-node"
RECIPE = 2  # bump when the recipe changes what an image holds
PACKAGES = (
    "openjdk-17-jre-headless", "procps", "iproute2", "iptables", "libssl3", "libffi8", "libsqlite3-0",
    "libbz2-1.0", "liblzma5", "zlib1g", "libuuid1", "libexpat1", "libreadline8", "libncursesw6", "libnsl2",
    "libstdc++6", "libgcc-s1",
    # What the host's PostgreSQL server binaries link, and the time zones they read: the sink database node.
    "libicu72", "libxml2", "libldap-2.5-0", "libpq5", "libgssapi-krb5-2", "libsasl2-2", "liblz4-1", "libzstd1",
    "libsystemd0", "libpam0g", "tzdata",
)
JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"  # Debian's path for Java 17 on amd64
HOST_REPOSITORY = "streamchaos-host"
# The database host's PostgreSQL server: Debian's, as a user's host has it (its cluster is not started).
HOST_PACKAGES = ("openssh-server", "python3", "python3-venv", "postgresql")
# What a host's Python must import: PySpark and what its SQL workers (Python data sources, pandas UDFs) load.
HOST_SITE = "usr/local/lib/python3.11/dist-packages"  # Debian's python3 finds packages installed here


@dataclass(frozen=True)
class Recipe:
    suite: str
    mirror: str
    packages: tuple[str, ...] = PACKAGES
    repository: str = REPOSITORY
    # Python distributions copied from this machine into the image's Python, each as name==version.
    distributions: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        text = "\n".join([str(RECIPE), self.suite, self.mirror, *sorted(self.packages), *sorted(self.distributions)])
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def tag(self) -> str:
        return f"{self.repository}:{self.key}"


def host_suite() -> str:
    """This machine's Debian release (``VERSION_CODENAME``): the packages it can install are that release's."""
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return "bookworm"


def host_mirror() -> str | None:
    """The Debian mirror this machine's apt uses (deb822 ``URIs:`` or a ``deb`` line), if it names one."""
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split()
            if words and words[0] in ("URIs:", "deb"):
                for url in (w.rstrip("/") for w in words[1:] if "://" in w):
                    if url.endswith("/debian"):
                        return url
    return None


def default_recipe() -> Recipe:
    mirror = os.environ.get("STREAMCHAOS_DEBIAN_MIRROR") or host_mirror()
    if mirror is None:
        raise UserError("this machine's apt sources name no Debian mirror (a URL ending in /debian) to build the "
                        "node image from: set STREAMCHAOS_DEBIAN_MIRROR to one")
    return Recipe(os.environ.get("STREAMCHAOS_DEBIAN_SUITE") or host_suite(), mirror)


def host_recipe() -> Recipe:
    """The SSH host image: the node image's packages, sshd and Python, and this machine's PySpark and its SQL
    dependencies at their installed versions (another PySpark here is another image)."""
    from chaos.machine.distributions import pyspark_sql

    base = default_recipe()
    found = [f"{name}=={version}" for name, version in pyspark_sql().items()]
    if not any(pin.startswith("pyspark==") for pin in found):
        raise UserError("pyspark is not installed here: the host image copies it from this machine's Python "
                        "(pip install -e .)")
    return Recipe(base.suite, base.mirror, (*PACKAGES, *HOST_PACKAGES), HOST_REPOSITORY, tuple(found))


def find(docker_client, recipe: Recipe | None = None) -> str | None:
    """The tag of the built image for ``recipe`` (the default one), if dockerd has it."""
    tag = (recipe or default_recipe()).tag
    return tag if has(docker_client, tag) else None


def has(docker_client, image: str) -> bool:
    """dockerd holds ``image`` (a tag or an id)."""
    import docker

    try:
        docker_client.images.get(image)
    except docker.errors.ImageNotFound:
        return False
    return True


def build(docker_client, recipe: Recipe | None = None, echo=print, force: bool = False) -> str:
    """Build the image for ``recipe`` unless dockerd has it already; returns its tag. A root filesystem this
    machine built before (``rootfs_cache``) is imported without running debootstrap again, unless ``force``."""
    recipe = recipe or default_recipe()
    if not force and find(docker_client, recipe):
        echo(f"{recipe.tag}: built already")
        return recipe.tag
    t0 = time.monotonic()
    cached = rootfs_cache(recipe)
    built = force or not cached.exists()
    if built:
        _debootstrap(recipe, cached, echo)
    echo(f"docker import {recipe.tag} from {cached} ({cached.stat().st_size / 2**20:.0f} MiB) ...")
    changes = [f"LABEL streamchaos.recipe={recipe.key}", f"ENV JAVA_HOME={JAVA_HOME}",
               "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 'CMD ["/bin/sh"]']
    docker_client.api.import_image_from_file(str(cached), repository=recipe.repository, tag=recipe.key,
                                             changes=changes)
    if not find(docker_client, recipe):
        raise UserError(f"docker import did not produce {recipe.tag}: see dockerd's log")
    echo(f"{recipe.tag}: {'built' if built else 'imported'} in {time.monotonic() - t0:.0f}s")
    return recipe.tag


def _debootstrap(recipe: Recipe, cached: Path, echo) -> None:
    """The root filesystem of ``recipe`` from Debian's packages, as a tarball at ``cached`` (whole or not at all)."""
    debootstrap = shutil.which("debootstrap") or ("/usr/sbin/debootstrap" if Path("/usr/sbin/debootstrap").exists()
                                                  else None)
    if debootstrap is None:
        raise UserError("debootstrap is not installed: apt-get install debootstrap (it builds the node image "
                        "from Debian's packages)")
    if os.geteuid() != 0:
        raise UserError("streamchaos image build must run as root (debootstrap installs packages into a "
                        "root filesystem): sudo streamchaos image build")
    with tempfile.TemporaryDirectory(prefix="streamchaos-image-") as scratch:
        root = Path(scratch) / "rootfs"
        try:
            echo(f"debootstrap {recipe.suite} from {recipe.mirror} with {len(recipe.packages)} packages ...")
            command = [debootstrap, "--variant=minbase", f"--include={','.join(recipe.packages)}", recipe.suite,
                       str(root), recipe.mirror]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                lines = (done.stdout + done.stderr).strip().splitlines()
                raise UserError(f"debootstrap failed ({lines[-1] if lines else f'exit {done.returncode}'}): check that "
                                f"{recipe.mirror} is reachable, or set STREAMCHAOS_DEBIAN_MIRROR")
            unmount_under(root)
            for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
                for item in (root / junk).glob("*"):
                    if item.is_file():
                        item.unlink()
            for key in (root / "etc" / "ssh").glob("ssh_host_*"):  # each container gets a host key of its own
                key.unlink()
            if recipe.distributions:
                echo(f"copying {', '.join(recipe.distributions)} into the image's Python ...")
                copy_distributions(recipe.distributions, root / HOST_SITE)
            cached.parent.mkdir(parents=True, exist_ok=True)
            partial = cached.with_name(f".{cached.name}.{os.getpid()}")
            try:  # an interrupted tar leaves no cache to import later
                subprocess.run(["tar", "-C", str(root), "--numeric-owner", "--one-file-system", "-cf", str(partial),
                                "."], check=True)
                partial.replace(cached)
            finally:
                partial.unlink(missing_ok=True)
        finally:  # a failed debootstrap leaves them too
            unmount_under(root)


def unmount_under(root: Path) -> None:
    """Unmount what debootstrap left mounted in the root filesystem (seen: its ``proc`` after a package's
    maintainer script held it): otherwise tar archives this machine's /proc and removing the tree walks into it."""
    prefix = f"{root.resolve()}/"
    try:
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    except OSError:
        return
    for point in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):  # deepest first
        subprocess.run(["umount", "-l", point], capture_output=True)


def copy_distributions(distributions: tuple[str, ...], site: Path) -> None:
    """Install this machine's copies of ``distributions`` (name==version) into ``site``, file by file from
    their installed records, as pip would from their wheels (pure Python, or built for CPython 3.11 on Linux,
    which Debian's Python 3.11 loads)."""
    from importlib.metadata import distribution

    for pinned in distributions:
        dist = distribution(pinned.split("==", 1)[0])
        for file in dist.files or ():
            if ".." in file.parts or file.suffix == ".pyc":
                continue  # scripts outside site-packages; bytecode is made again by the image's Python
            source = Path(dist.locate_file(file))
            if source.is_file():
                target = site / file
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)


def rootfs_cache(recipe: Recipe) -> Path:
    """The built root filesystem, kept so that another dockerd (a second data root, a test's own daemon)
    imports the same image in seconds instead of running debootstrap again."""
    return cache_dir() / "images" / f"{recipe.key}.tar"

