"""Apache Kafka's broker and Spark's Kafka connector, resolved from Maven once per machine and cached.

Both come from the Maven repositories this machine's ``mvn`` is set up for (its own settings and mirrors: no
repository is named here), the way a user's build resolves them: a small generated ``pom.xml`` and ``mvn
dependency:copy-dependencies`` of its runtime closure. The jars land under ``~/.cache/streamchaos/kafka/``,
keyed by what was asked for, written to a temporary folder and renamed into place only when complete, so an
interrupted resolution leaves nothing that looks ready. The first resolution says what it fetches and how long
it took, as the class-archive build does.

The connector must be the running Spark's own version (Spark checks nothing, but its internal APIs move between
minor versions). Where the repository does not serve it, the error names the ways out: a Spark version whose
connector is served (``streamchaos spark add``) or the stand-in source.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from chaos.errors import UserError
from chaos.machine.jvm import cache_dir

# The broker: Kafka 4.x runs in KRaft mode only (no ZooKeeper), on Java 17.
BROKER_VERSION = "4.1.1"
BROKER = ("org.apache.kafka", "kafka_2.13", BROKER_VERSION)
CONNECTOR_ARTIFACT = "spark-sql-kafka-0-10_2.13"
READY = "ready"  # written last
WAY_OUT = ("run on a Spark whose connector is served (streamchaos spark add 4.2.0, then streamchaos --spark 4.2.0 "
           "...) or give --kafka stand-in")


@dataclass(frozen=True)
class Coordinates:
    group: str
    artifact: str
    version: str
    # group:artifact pairs left out of the closure (what Spark already ships)
    exclusions: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    def pom(self) -> str:
        excluded = "".join(f"<exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>"
                           for g, a in self.exclusions)
        return ("<project><modelVersion>4.0.0</modelVersion>"
                "<groupId>streamchaos</groupId><artifactId>resolve</artifactId><version>1</version>"
                f"<dependencies><dependency><groupId>{self.group}</groupId><artifactId>{self.artifact}</artifactId>"
                f"<version>{self.version}</version><exclusions>{excluded}</exclusions></dependency>"
                "</dependencies></project>")


def root() -> Path:
    return cache_dir() / "kafka"


def folder_of(what: Coordinates) -> Path:
    return root() / f"{what.artifact}-{what.version}"


def cached(what: Coordinates) -> bool:
    return (folder_of(what) / READY).exists()


def connector(spark_version: str) -> Coordinates:
    """Spark's Kafka connector for ``spark_version``; Spark's own SQL jars are the cluster's, never a second copy."""
    return Coordinates("org.apache.spark", CONNECTOR_ARTIFACT, spark_version,
                       exclusions=(("org.apache.spark", "spark-sql_2.13"),))


def maven() -> str:
    found = shutil.which("mvn")
    if found is None:
        raise UserError("Kafka's broker and Spark's Kafka connector come from Maven, and mvn is not on PATH: install "
                        "Maven (Debian: apt-get install maven) or give --kafka stand-in")
    return found


def resolve(what: Coordinates, *, say=None) -> Path:
    """The folder of ``what``'s runtime jars, resolving it first if this machine has not yet."""
    folder = folder_of(what)
    if (folder / READY).exists():
        return folder
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    say(f"resolving {what} and its runtime dependencies through Maven (once per machine)...")
    started = time.monotonic()
    root().mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=root()))
    try:
        (work / "pom.xml").write_text(what.pom())
        done = subprocess.run([maven(), "-q", "-B", "dependency:copy-dependencies", "-DincludeScope=runtime",
                               f"-DoutputDirectory={work / 'jars'}"], cwd=work, capture_output=True, text=True,
                              timeout=900)
        if done.returncode != 0:
            raise UserError(_refusal(what, done.stdout + done.stderr))
        jars = sorted((work / "jars").glob("*.jar"))
        (work / "pom.xml").unlink()
        (work / READY).write_text(str(what))
        shutil.rmtree(folder, ignore_errors=True)
        work.rename(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    size = sum(j.stat().st_size for j in (folder / "jars").glob("*.jar"))
    say(f"resolved {what}: {len(jars)} jars, {size / 2**20:.0f} MiB, in {time.monotonic() - started:.0f} s")
    return folder


def _refusal(what: Coordinates, output: str) -> str:
    if any(word in output for word in ("Could not find artifact", "Missing:", "not found", "Could not resolve")) \
            and what.artifact == CONNECTOR_ARTIFACT:
        return (f"Spark's Kafka connector {what} is not served by the Maven repositories this machine reaches: "
                + WAY_OUT)
    last = [line for line in output.splitlines() if "ERROR" in line][:1]
    return f"Maven could not resolve {what}: {last[0].strip() if last else 'see mvn -X'}; check mvn's settings"


REFUSAL_S = 86_400
_refused: dict[str, str] = {}  # per process: a version Maven did not serve is not asked again


def connector_available(spark_version: str | None = None, *, say=None) -> str | None:
    """None when Spark's Kafka connector for ``spark_version`` (default: the running PySpark's) is cached or
    resolves now, else the one line saying why not and the way out."""
    if spark_version is None:
        import pyspark

        spark_version = pyspark.__version__
    wanted = connector(spark_version)
    if cached(wanted):
        return None
    # A refusal is kept a day beside the cache: every command asks (``--kafka auto``), Maven answers in seconds.
    refused = folder_of(wanted).with_name(folder_of(wanted).name + ".refused")
    if spark_version not in _refused and refused.exists() and time.time() - refused.stat().st_mtime < REFUSAL_S:
        _refused[spark_version] = refused.read_text().strip()
    if spark_version not in _refused:
        try:
            resolve(wanted, say=say)
            return None
        except UserError as exc:
            _refused[spark_version] = str(exc)
            root().mkdir(parents=True, exist_ok=True)
            refused.write_text(str(exc) + "\n")
    return _refused[spark_version]


def spark_connector_jars(*, say=None) -> list[Path]:
    """The connector's jars for the running PySpark, beside its own jars."""
    import pyspark

    return connector_jars(pyspark.__version__, Path(pyspark.__file__).parent / "jars", say=say)


def broker_classpath(*, say=None) -> str:
    return str(resolve(Coordinates(*BROKER), say=say) / "jars" / "*")


def connector_jars(spark_version: str, spark_jars: Path, *, say=None) -> list[Path]:
    """The connector's jars that the Spark installation at ``spark_jars`` does not already ship (by artifact name:
    Spark's own Scala, Hadoop client and compression jars stay the cluster's)."""
    shipped = {_artifact_name(p) for p in spark_jars.glob("*.jar")}
    folder = resolve(connector(spark_version), say=say)
    return [p for p in sorted((folder / "jars").glob("*.jar")) if _artifact_name(p) not in shipped]


def _artifact_name(jar: Path) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``, ``spark-sql-kafka-0-10_2.13-4.2.0.jar`` ->
    ``spark-sql-kafka-0-10_2.13``: the version is the last dash-part shaped like one (digits, a dot, no ``_``)."""
    match = re.match(r"^(.*?)-(\d+\.\d+[^_]*)$", jar.stem)
    return match[1] if match else jar.stem
