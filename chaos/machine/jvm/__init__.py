"""JVM-side hooks the harness compiles on first use (no binary in the repository, no download).

``hooks_jar`` builds every ``*.java`` here (``Barrier``, the file sink's ``BarrierCommitProtocol``, the
console sink's ``ConsoleBarrier``, the checkpoint's ``CheckpointBarrier``) against the PySpark installation's own
jars with the JDK's ``javac`` (a source whose ``// requires:`` class this Spark lacks is left out)
and caches the jar under ``~/.cache/streamchaos`` (``XDG_CACHE_HOME``), keyed by the sources and the
Spark version, so it is built once per machine and Spark upgrade.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from chaos.errors import UserError

SOURCES = sorted(Path(__file__).parent.glob("*.java"))
COMMIT_PROTOCOL_CLASS = "streamchaos.BarrierCommitProtocol"
# The file sink under test, where a job runs others (a bronze directory): only its BarrierCommitProtocol reports.
FILE_SINK_PATH = "spark.streamchaos.fileSink.path"
CHECKPOINT_BARRIER_CLASS = "streamchaos.CheckpointBarrier"
READING_BARRIER_CLASS = "streamchaos.ReadingBarrier"  # spark.plugins: the reading phase of Spark's own sources
HOOKS = "hooks"  # the hooks jar's name: HOOKS-DIGEST.jar


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "streamchaos"


def javac() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidates = [str(Path(java_home) / "bin" / "javac")] if java_home else []
    found = shutil.which("javac")
    candidates += [found] if found else []
    for c in candidates:
        if Path(c).is_file():
            return c
    raise UserError("the file-sink and continuous pipelines build small JVM hooks with javac, which is missing: "
                    "install a JDK 17+ (e.g. apt-get install openjdk-17-jdk-headless) or set JAVA_HOME to one")


def hooks_unavailable() -> str | None:
    """Why the pipelines with JVM hooks cannot run here (no javac), or None."""
    try:
        javac()
    except UserError as exc:
        return str(exc)
    return None


def _required(source: Path) -> str | None:
    """The Spark class a hook's source names in a ``// requires:`` line (one that moved between versions)."""
    for line in source.read_text().splitlines()[:5]:
        if line.startswith("// requires: "):
            return line.removeprefix("// requires: ").strip()
    return None


@functools.cache
def _sources(jars: Path) -> tuple[Path, ...]:
    """The hooks this Spark's jars can build (``spark-sql``'s classes checked for each one's requirement): read
    once per process, though every Kafka pipeline's ``unavailable`` asks."""
    sql = next(iter(sorted(jars.glob("spark-sql_*.jar"))), None)
    names = set(zipfile.ZipFile(sql).namelist()) if sql else set()
    return tuple(s for s in SOURCES if (_required(s) or "") in names | {""})


def has_hook(class_name: str) -> bool:
    """Whether this Spark's hooks jar holds ``class_name`` (``streamchaos.X``)."""
    import pyspark

    wanted = class_name.removeprefix("streamchaos.") + ".java"
    return any(s.name == wanted for s in _sources(Path(pyspark.__file__).parent / "jars"))


def checkpoint_barrier_unavailable() -> str | None:
    """Why the phases at the checkpoint's files (``CheckpointBarrier``: a Kafka source or sink of Spark's own)
    cannot be reported here, or None."""
    if refused := hooks_unavailable():
        return refused
    if not has_hook(CHECKPOINT_BARRIER_CLASS):
        return ("phases at the checkpoint's files need Spark 4.1 or later (its checkpoint file manager moved "
                "there): run on a newer one with `streamchaos --spark VERSION` (`streamchaos spark add VERSION`)")
    return None


def checkpoint_barrier_conf(controller: str, incarnation: int, phases: tuple[str, ...], root: str) -> dict[str, str]:
    """The session settings that route a query's checkpoint files through ``CheckpointBarrier``, reporting ``phases``
    of the checkpoint at ``root`` to ``controller`` (Spark copies them into the Hadoop configuration it hands the
    class when the query starts)."""
    return {"spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_BARRIER_CLASS,
            "spark.streamchaos.checkpoint.controller": controller,
            "spark.streamchaos.checkpoint.incarnation": str(incarnation),
            "spark.streamchaos.checkpoint.phases": ",".join(phases),
            "spark.streamchaos.checkpoint.root": root}


def hooks_jar() -> Path:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return built_jar(HOOKS, _sources(jars), f"{jars}/*", pyspark.__version__)


def holds_hooks(spark_jars: str) -> bool:
    """Whether an application's ``spark.jars`` (comma-separated) hold the hooks jar (``hooks_jar``'s name)."""
    return any(Path(j).name.startswith(f"{HOOKS}-") for j in spark_jars.split(","))


def built_jar(name: str, sources: tuple[Path, ...] | list[Path], class_path: str, version: str) -> Path:
    """``sources`` compiled against ``class_path`` into a jar cached as ``NAME-DIGEST.jar`` (the sources' digest and
    ``version``, the Spark it was built for): built once per machine and Spark upgrade."""
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources) + version.encode()).hexdigest()[:16]
    jar = cache_dir() / f"{name}-{digest}.jar"
    if jar.exists():
        return jar
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="streamchaos-javac-") as tmp:
        done = subprocess.run([javac(), "-nowarn", "-cp", class_path, "-d", tmp, *map(str, sources)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise UserError(f"javac could not build the JVM hooks ({name}) against {class_path}: "
                            f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")
        partial = jar.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(partial, "w") as out:
            for path in sorted(Path(tmp).rglob("*.class")):
                out.write(path, path.relative_to(tmp).as_posix())
        partial.replace(jar)  # atomic: a concurrent build of the same jar is harmless
    return jar
