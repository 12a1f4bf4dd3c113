"""Jars from Maven, resolved once per machine and cached: Kafka's broker, Spark's connectors, JDBC drivers.

They come from the Maven repositories this machine's ``mvn`` is set up for (its own settings and mirrors: no
repository is named here), the way a user's build resolves them: a small generated ``pom.xml`` and ``mvn
dependency:copy-dependencies`` of its runtime closure. The jars land under ``~/.cache/streamchaos/maven/``, keyed
by what was asked for, written to a temporary folder and renamed into place only when complete, so an interrupted
resolution leaves nothing that looks ready. The first resolution says what it fetches and how long it took, as the
class-archive build does. A refusal is kept a day beside the cache (``available``): a command that only asks
whether something is served answers from it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from chaos.errors import UserError
from chaos.machine.jvm import cache_dir

READY = "ready"  # written last
REFUSAL_S = 86_400
NOT_SERVED = ("Could not find artifact", "Missing:", "not found", "Could not resolve", "Could not transfer")


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
    return cache_dir() / "maven"


def folder_of(what: Coordinates) -> Path:
    return root() / f"{what.artifact}-{what.version}"


def cached(what: Coordinates) -> bool:
    return (folder_of(what) / READY).exists()


def maven(needed_for: str) -> str:
    found = shutil.which("mvn")
    if found is None:
        raise UserError(f"{needed_for} come from Maven, and mvn is not on PATH: install Maven (Debian: apt-get install "
                        "maven)")
    return found


def not_served(output: str) -> bool:
    return any(word in output for word in NOT_SERVED)


def resolve(what: Coordinates, *, say: Callable[[str], None] | None = None,
            refusal: Callable[[Coordinates, str], str] | None = None) -> Path:
    """The folder of ``what``'s runtime jars (``jars/``), resolving it first if this machine has not yet;
    ``refusal(what, mvn's output)`` words a failure (default: Maven's first error line)."""
    folder = folder_of(what)
    if (folder / READY).exists():
        return folder
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    binary = maven(str(what))
    say(f"resolving {what} and its runtime dependencies through Maven (once per machine)...")
    started = time.monotonic()
    root().mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=root()))
    try:
        (work / "pom.xml").write_text(what.pom())
        done = subprocess.run([binary, "-q", "-B", "dependency:copy-dependencies", "-DincludeScope=runtime",
                               f"-DoutputDirectory={work / 'jars'}"], cwd=work, capture_output=True, text=True,
                              timeout=900)
        if done.returncode != 0:
            output = done.stdout + done.stderr
            raise UserError((refusal or first_error)(what, output))
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


def first_error(what: Coordinates, output: str) -> str:
    last = [line for line in output.splitlines() if "ERROR" in line][:1]
    return f"Maven could not resolve {what}: {last[0].strip() if last else 'see mvn -X'}; check mvn's settings"


_refused: dict[str, str] = {}  # per process: what Maven did not serve is not asked again


def available(what: Coordinates, *, say=None, refusal=None) -> str | None:
    """None when ``what`` is cached or resolves now, else the one line saying why not (kept a day)."""
    if cached(what):
        return None
    kept = folder_of(what).with_name(folder_of(what).name + ".refused")
    key = str(what)
    if key not in _refused and kept.exists() and time.time() - kept.stat().st_mtime < REFUSAL_S:
        _refused[key] = kept.read_text().strip()
    if key not in _refused:
        try:
            resolve(what, say=say, refusal=refusal)
            return None
        except UserError as exc:
            _refused[key] = str(exc)
            root().mkdir(parents=True, exist_ok=True)
            kept.write_text(str(exc) + "\n")
    return _refused[key]


def artifact_name(jar: Path) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``, ``spark-sql-kafka-0-10_2.13-4.2.0.jar`` ->
    ``spark-sql-kafka-0-10_2.13``: the version is the last dash-part shaped like one (digits, a dot, no ``_``)."""
    match = re.match(r"^(.*?)-(\d+\.\d+[^_]*)$", jar.stem)
    return match[1] if match else jar.stem


def not_shipped(folder: Path, spark_jars: Path) -> list[Path]:
    """The jars of a resolved ``folder`` that the Spark installation at ``spark_jars`` does not already ship (by
    artifact name: Spark's own Scala, Hadoop client and compression jars stay the cluster's)."""
    shipped = {artifact_name(p) for p in spark_jars.glob("*.jar")}
    return [p for p in sorted((folder / "jars").glob("*.jar")) if artifact_name(p) not in shipped]
