"""``streamchaos doctor``: what a trial needs from this machine, checked one by one, each with its fix."""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path

import psutil

from chaos.machine.check import Check

TRIAL_MEMORY = 3 * 2**30  # master, two workers, two executors, the driver and its standby
FREE_DISK = 2 * 2**30


def check_java() -> Check:
    from chaos.machine.java import FIX, java_binary, java_version

    binary = java_binary()
    if binary is None:
        return Check("java", "fail", "no java on PATH or in JAVA_HOME", FIX)
    version = java_version(binary)
    if version is None or version < 17:
        return Check("java", "fail", f"{binary} is Java {version or '?'}; Spark 4 needs 17+", FIX)
    return Check("java", "ok", f"{binary} (Java {version})")


def check_pyspark() -> Check:
    try:
        import pyspark
    except ImportError as exc:
        return Check("pyspark", "fail", f"cannot import pyspark ({exc})", "pip install -e . (pins pyspark 4.3)")
    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").exists() or not (home / "jars").is_dir():
        return Check("pyspark", "fail", f"pyspark {pyspark.__version__} at {home} has no bin/spark-class or jars",
                     "reinstall pyspark from PyPI (pip install --force-reinstall 'pyspark==4.3.*')")
    return Check("pyspark", "ok", f"pyspark {pyspark.__version__} with its Spark jars ({home})")


def check_worker_imports() -> Check:
    """Spark's Python workers are this interpreter started elsewhere (an executor's work directory): they
    must import the harness (``chaos.driver.pydaemon``, the pipelines) from the same place as this process, or every
    task of every trial fails and the trial only ends ``stalled``. An editable install re-pointed at another
    checkout (or removed) is the usual cause."""
    import subprocess
    import sys
    import tempfile

    import chaos
    from chaos.machine.spark import spark_env
    from chaos.machine.spark_versions import last_line

    mine = Path(chaos.__file__).resolve().parent
    probe = "import chaos.driver.pydaemon, pipelines_under_test, chaos; print(chaos.__file__)"
    with tempfile.TemporaryDirectory() as elsewhere:
        done = subprocess.run([sys.executable, "-c", probe], cwd=elsewhere, env=spark_env(), capture_output=True,
                              text=True, timeout=60)
    fix = f"pip install -e {mine.parent} (the harness's Python workers import it from site-packages)"
    if done.returncode != 0:
        return Check("worker imports", "fail", f"a Python worker started outside {mine.parent} cannot import "
                     f"the harness ({last_line(done)})", fix)
    theirs = Path(done.stdout.strip()).resolve().parent
    if theirs != mine:
        return Check("worker imports", "fail", f"Python workers would import the harness from {theirs}, "
                     f"this is {mine}", fix)
    return Check("worker imports", "ok", f"Spark's Python workers import the harness from {mine}")


def check_spark_versions() -> Check:
    """The PySpark versions added beside the installed one (``streamchaos spark add``, finished installs)."""
    from chaos.machine.spark_versions import installed

    added = installed()
    if not added:
        return Check("spark versions", "ok", "none added (streamchaos spark add VERSION runs trials on another)")
    return Check("spark versions", "ok", f"added: {', '.join(added)} (streamchaos --spark VERSION ...)")


def check_postgres() -> Check:
    from chaos.clusters.postgres import find_bindir

    found = find_bindir()
    if found is None:
        return Check("postgresql", "warn", "no server binaries (initdb, postgres): the pg-* pipelines are skipped",
                     "apt-get install postgresql (or set PG_BINDIR)")
    return Check("postgresql", "ok", f"server binaries in {found}")


def _refused(name: str, refused: str, way_out: str) -> Check:
    """A warning from a refusal line, its way out (what follows ``: ``) moved to the fix column."""
    return Check(name, "warn", refused.replace(f": {way_out}", ""), way_out if way_out in refused else "")


def check_kafka() -> Check:
    """Kafka's broker and this Spark's Kafka connector: cached, or resolved now (what a trial on a Kafka job would
    do first), so the line says whether the real connector can run here."""
    import pyspark

    from chaos.clusters.kafka.jars import BROKER, BROKER_VERSION, WAY_OUT, connector_available
    from chaos.machine.maven import available

    refused = available(BROKER) or connector_available(pyspark.__version__)
    if refused:
        return _refused("kafka", refused, WAY_OUT)
    return Check("kafka", "ok", f"broker {BROKER_VERSION} (KRaft) and Spark's connector {pyspark.__version__} cached")


def check_delta() -> Check:
    """Delta Lake's jars for this Spark: cached, or resolved now (what a trial of a delta-* pipeline does first)."""
    import pyspark

    from chaos.stream.sinks.delta import DELTA_VERSION, WAY_OUT, delta_unavailable

    refused = delta_unavailable(pyspark.__version__)
    if refused:
        return _refused("delta", refused, WAY_OUT)
    return Check("delta", "ok", f"Delta Lake {DELTA_VERSION} for Spark {pyspark.__version__} cached")


def check_jdbc() -> Check:
    """PostgreSQL's JDBC driver, which the harness adds to every application for jobs that write with Spark's JDBC
    writer: cached, or resolved now."""
    from chaos.clusters.postgres import DEBIAN_JDBC, JDBC_DRIVER
    from chaos.machine.maven import available

    refused = available(JDBC_DRIVER)
    if refused is None:
        return Check("jdbc", "ok", f"PostgreSQL's JDBC driver {JDBC_DRIVER.version} cached (for Spark's JDBC writer)")
    if DEBIAN_JDBC.is_file():
        return Check("jdbc", "ok", f"PostgreSQL's JDBC driver {DEBIAN_JDBC} (Debian's)")
    return Check("jdbc", "warn", f"{refused}: jobs writing with Spark's JDBC writer fail with 'No suitable driver'",
                 "install Maven (apt-get install maven) or apt-get install libpostgresql-jdbc-java")


def check_loopback() -> Check:
    try:
        with socket.socket() as server, socket.socket() as client:
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            client.settimeout(5)
            client.connect(server.getsockname())
        return Check("loopback ports", "ok", "127.0.0.1 accepts listeners and connections (ports are chosen free)")
    except OSError as exc:
        return Check("loopback ports", "fail", f"cannot listen on or connect to 127.0.0.1: {exc}",
                     "bring up the loopback interface (ip link set lo up)")


def check_disk(path: Path) -> Check:
    path = path if path.exists() else Path.cwd()
    free = shutil.disk_usage(path).free
    status = "ok" if free >= FREE_DISK else "fail"
    return Check("disk", status, f"{free / 2**30:.1f} GiB free at {path}",
                 "free space or run elsewhere: a trial keeps its checkpoint, logs and sink (~50-200 MB)")


def check_memory() -> Check:
    available = psutil.virtual_memory().available
    status = "ok" if available >= TRIAL_MEMORY else "warn"
    return Check("memory", status, f"{available / 2**30:.1f} GiB available (a trial needs about 3 GiB)",
                 "close other programs; trials may fail to start executors")


def check_leftovers() -> Check:
    from chaos.machine.processes import OWNER_VAR, owner_alive, tagged_processes

    orphans = []
    for proc in tagged_processes():
        try:
            if not owner_alive(proc.environ().get(OWNER_VAR, "")):
                orphans.append(proc.pid)
        except psutil.Error:
            continue
    if orphans:
        return Check("leftovers", "warn", f"{len(orphans)} process(es) of a killed harness still run",
                     "streamchaos reap (every harness start reaps them too)")
    return Check("leftovers", "ok", "no process of an earlier harness is left")


def check_javac() -> Check:
    from chaos.errors import UserError
    from chaos.machine.jvm import javac

    try:
        return Check("javac", "ok", f"{javac()} (builds the file and console sinks' phase hooks on first use)")
    except UserError:
        return Check("javac", "warn",
                     "no javac (a JRE only): the passthrough-file and continuous-map pipelines cannot run",
                     "install a JDK 17+ (apt-get install openjdk-17-jdk-headless) or point JAVA_HOME at one")


def check_class_archive() -> Check:
    """Each of the two class archives is built (size, key), failed (when, why, how to retry) or not built yet."""
    from chaos.machine.jvm.archive import MAX_TRIES, archive_path, failure
    from chaos.machine.jvm.unsigned import quick_class_path
    from chaos.machine.spark import QUICK_JVM_OPTIONS

    class_path = quick_class_path(build=False)
    states, failed = [], False
    for role in ("driver", "executor"):
        path = archive_path(QUICK_JVM_OPTIONS, role, class_path)
        key = path.stem.rsplit("-", 1)[-1]
        record = failure(path)
        if path.exists():
            states.append(f"{role}: built ({path.stat().st_size >> 20} MiB, key {key})")
        elif record is not None:
            failed = True
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(record.get("at", 0))))
            tries = int(record.get("tries", 1))
            again = (f"the next harness start on an idle machine tries again ({tries} of {MAX_TRIES} tries)"
                     if tries < MAX_TRIES else f"no more tries ({tries} of {MAX_TRIES})")
            states.append(f"{role}: FAILED at {when}: {record.get('reason', 'unknown')}; {again}")
        else:
            states.append(f"{role}: not built yet (the first harness start builds it, key {key})")
    detail = "; ".join(states)
    if failed:
        return Check("class archives", "warn", detail + ": its JVMs boot without it, about twice as slow",
                     "streamchaos doctor --rebuild-archives (clears the failure; the next harness start builds it)")
    return Check("class archives", "ok", detail + f" in {archive_path(QUICK_JVM_OPTIONS).parent}")


def clear_archive_failures() -> list[Path]:
    """``doctor --rebuild-archives``: forget every failed build, so the next harness start builds again."""
    from chaos.machine.jvm import cache_dir

    cleared = sorted(cache_dir().glob("*-classes-*.failed")) if cache_dir().is_dir() else []
    for path in cleared:
        path.unlink(missing_ok=True)
    return cleared


def check_chromium() -> Check:
    found = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    if not found:
        return Check("chromium", "warn", "no headless Chromium: reports still render, the browser test is skipped",
                     "apt-get install chromium")
    return Check("chromium", "ok", found)


def check_docker() -> list[Check]:
    """dockerd, the node image and a network of the harness's own: what ``--cluster docker`` needs (optional)."""
    from contextlib import closing

    from chaos.clusters.docker.containers import START_DOCKERD, client, configured, labels
    from chaos.clusters.docker.image import default_recipe, find
    from chaos.errors import UserError

    if not configured():
        return [Check("docker", "warn", "no Docker daemon (only --cluster docker needs one)", START_DOCKERD)]
    try:
        docker_client = client(timeout=20)
    except UserError as exc:
        return [Check("docker", "warn", f"{exc} (only --cluster docker needs one)")]
    with closing(docker_client):
        version = docker_client.version().get("Version", "?")
        checks = [Check("docker", "ok", f"dockerd {version}")]
        try:
            recipe = default_recipe()
        except UserError as exc:
            return [*checks, Check("node image", "warn", str(exc))]
        tag = find(docker_client, recipe)
        if tag is None:
            checks.append(Check("node image", "warn", f"{recipe.tag} is not built (Debian {recipe.suite})",
                                "streamchaos image build (debootstrap from Debian's packages, a few minutes once)"))
        else:
            size = docker_client.images.get(tag).attrs.get("Size", 0)
            checks.append(Check("node image", "ok", f"{tag} ({size / 2**20:.0f} MiB)"))
        try:
            network = docker_client.networks.create(f"streamchaos-doctor-{os.getpid()}", driver="bridge",
                                                    internal=True, labels=labels("network"))
            subnet = network.attrs["IPAM"]["Config"][0].get("Subnet", "?") if network.attrs["IPAM"]["Config"] else "?"
            network.remove()
            checks.append(Check("docker network", "ok", f"an internal bridge network of its own ({subnet}) was made "
                                                        "and removed"))
        except Exception as exc:  # docker.errors.APIError
            checks.append(Check("docker network", "fail", f"no bridge network could be made: {exc}",
                                "see dockerd's log (iptables, the bridge driver)"))
    return checks


def run_checks(workdir: Path | None = None) -> list[Check]:
    return [check_java(), check_javac(), check_pyspark(), check_worker_imports(), check_spark_versions(),
            check_postgres(), check_jdbc(), check_kafka(), check_delta(), check_loopback(),
            check_disk(Path(workdir or os.getcwd())), check_memory(), check_leftovers(), check_class_archive(),
            check_chromium(), *check_docker()]
