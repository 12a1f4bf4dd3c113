"""The jars a job asks its session for (``spark.jars``, ``spark.jars.packages``, ``spark.*.extraClassPath``), on
every driver and executor of its trials as spark-submit would have put them.

A job's ``SparkSession.builder.config("spark.jars.packages", ...).getOrCreate()`` finds the harness's session
already started, where Spark applies only runtime SQL settings and warns that the rest does nothing: a job that
brings its own connector or JDBC driver would fail at its first use. So the jars are read before any driver boots,
from the job's code (``config``/``set`` calls of its builder or ``SparkConf``, values evaluated from literals and the
module's own names as chaos.jobs.declared evaluates a schema; the modules of its project it imports too) and from
the ``spark-defaults.conf`` its deployment reads (``$SPARK_CONF_DIR``'s, else one beside the job or in its
``conf/``), resolved through Maven like the harness's own jars (chaos.machine.maven), and added to the
application of every driver from then on (``spark.jars``, which executors fetch too).

Jobs are written for the Spark of their deployment: ``spark-sql-kafka-0-10_2.12:3.5.0`` beside Spark 4.3 would
load two Sparks' classes into one JVM. Spark's own artifacts are taken at the running Spark's version and Scala,
Delta's at the version the harness runs for this Spark; another artifact built for Scala 2.12 is one line. A jar
path of the job's container (``/opt/bitnami/spark/jars/postgresql-42.2.5.jar``) that is not on this machine is
found on Maven by its name where it is PostgreSQL's driver, Kafka's connector or Delta; any other is one line.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path

from chaos.errors import UserError
from chaos.jobs.declared import assignments, literal_value
from chaos.machine.maven import Coordinates, available, first_error, not_served, not_shipped, resolve

# Each key and how its value lists jars.
JAR_KEYS = {"spark.jars": ",", "spark.jars.packages": ",", "spark.driver.extraClassPath": os.pathsep,
            "spark.executor.extraClassPath": os.pathsep}
SCALA = "2.13"  # Spark 4's
OWN_EXCLUSIONS = (("org.apache.spark", "spark-sql_2.13"), ("org.apache.spark", "spark-core_2.13"))
# A jar file's name -> the artifact it is, for a path that is not on this machine.
BY_NAME = (
    (re.compile(r"^postgresql-(\d[\w.-]*)\.jar$"), "postgresql"),
    (re.compile(r"^(spark-sql-kafka-0-10|spark-token-provider-kafka-0-10)_2\.1\d-.*\.jar$"), "kafka"),
    (re.compile(r"^(kafka-clients|commons-pool2)-\d.*\.jar$"), "kafka"),
    (re.compile(r"^delta-(core|spark|storage)(_2\.1\d)?-.*\.jar$"), "delta"),
)


@dataclass(frozen=True)
class Asked:
    """One setting of the job: a jar key, its value, and where it is written (``job.py:12``)."""

    key: str
    value: str
    where: str


@dataclass(frozen=True)
class Wanted:
    """A jar the job's trials need: from Maven (``what``) or a file of this machine (``path``), and the line that
    says how the job's own words became it (None where it is the job's jar as named)."""

    what: Coordinates | None = None
    path: Path | None = None
    said: str | None = None
    refusal: str = ""  # how a Maven refusal is worded: the job's words and where
    spark: bool = False  # one of Spark's own artifacts, at the running Spark's version


def asked_jars(entry_file: Path, project: Path | None = None) -> list[Asked]:
    """The jar settings of the job whose entry module is ``entry_file``: in its code (and its project's modules it
    imports), then in its ``spark-defaults.conf``."""
    project = project or Path.cwd()
    trees = {path: tree for path in _modules(entry_file, project) if (tree := _parsed(path)) is not None}
    names: dict[str, ast.expr] = {}  # a constant from the project's config module (from config import PACKAGES)
    for tree in reversed(list(trees.values())):
        names |= assignments(tree)
    found: list[Asked] = []
    for path, tree in trees.items():
        found += _in_code(path, tree, {**names, **assignments(tree)})
    return found + _in_defaults(entry_file.parent, project)


def _parsed(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None


def wanted_jars(asked: list[Asked], spark_version: str, base: Path | None = None) -> list[Wanted]:
    """What each setting stands for on this Spark; a setting that cannot run here is one line (UserError)."""
    wanted: list[Wanted] = []
    for setting in asked:
        for item in (p.strip() for p in setting.value.split(JAR_KEYS[setting.key])):
            if not item:
                continue
            if setting.key == "spark.jars.packages":
                wanted.append(_package(item, setting, spark_version))
            else:
                wanted += _files(item, setting, spark_version, base or Path.cwd())
    return wanted


def unavailable(wanted: list[Wanted], *, say=None) -> str | None:
    """None when every Maven artifact wanted is cached or resolves now, else the one line saying which is not."""
    for w in wanted:
        if w.what is not None and (refused := available(w.what, say=say, refusal=_refusal_of(w))):
            return refused
    return None


def jar_files(wanted: list[Wanted], spark_jars: Path, *, say=None) -> list[Path]:
    """The jars to add to each application: Maven artifacts' runtime closures less what Spark ships, then files."""
    files: list[Path] = []
    for w in wanted:
        found = not_shipped(resolve(w.what, say=say, refusal=_refusal_of(w)), spark_jars) if w.what else [w.path]
        files += [f for f in found if f not in files]
    return files


def said(wanted: list[Wanted], asked: list[Asked]) -> tuple[str, ...]:
    """The trial's first lines about the job's jars."""
    if not asked:
        return ()
    lines = [w.said for w in wanted if w.said]
    named = ", ".join(dict.fromkeys(a.where for a in asked))
    return (f"the job's jars ({named}) are on its session's class path", *lines)


# -- reading ------------------------------------------------------------------------------------------
class _Os:
    """``os.environ.get("JARS", "default")`` / ``os.getenv`` as the job would read them in this environment."""

    environ = dict(os.environ)
    path = os.path

    @staticmethod
    def getenv(name, default=None):
        return os.environ.get(name, default)


def _modules(entry_file: Path, project: Path) -> list[Path]:
    """The entry module and the modules of its project (its folder or the working directory) it imports."""
    tree = _parsed(entry_file)
    if tree is None:
        return []
    found = [entry_file]
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        for name in names:
            for root in (entry_file.parent, project):
                candidate = root.joinpath(*name.split(".")).with_suffix(".py")
                if candidate.is_file() and candidate not in found:
                    found.append(candidate)
    return found


def _in_code(path: Path, tree: ast.Module, assigned: dict[str, ast.expr]) -> list[Asked]:
    """``.config("spark.jars.packages", X)``, ``.config(key=..., value=...)``, ``.set(...)`` and ``.config(map=
    {...})`` / ``.setAll([...])`` with a jar key, their values evaluated with the names ``assigned``."""
    found: list[Asked] = []

    def value(node: ast.expr | None):
        if node is None:
            return None
        try:
            return literal_value(node, assigned, {"os": _Os}, 0)
        except Exception:  # noqa: BLE001 - computed from what only running the job gives: None, said below
            return None

    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("config", "set", "setIfMissing", "setAll")):
            continue
        where = f"{path.name}:{node.func.end_lineno or node.lineno}"  # a chain's call: the line of its name
        kw = {k.arg: k.value for k in node.keywords}
        first = node.args[0] if node.args else None
        if node.func.attr == "setAll":  # setAll([(key, value), ...])
            pairs = list(value(first or kw.get("pairs")) or [])
        elif "map" in kw or isinstance(first, ast.Dict):  # config(map={...}), or the map given positionally
            pairs = list((value(first or kw.get("map")) or {}).items())
        else:
            pairs = [(value(first or kw.get("key")), node.args[1] if len(node.args) > 1 else kw.get("value"))]
        for key, given in pairs:
            if key not in JAR_KEYS:
                continue
            text = value(given) if isinstance(given, ast.expr) else given
            if not isinstance(text, str):
                raise UserError(f"{where}: the job's {key} is computed when it runs, and the harness reads it before "
                                f"Spark starts: write it as a string in the job or in spark-defaults.conf")
            found.append(Asked(key, text, where))
    return sorted(found, key=lambda a: int(a.where.rsplit(":", 1)[1]))


def _in_defaults(job_dir: Path, project: Path) -> list[Asked]:
    """The jar keys of the ``spark-defaults.conf`` the job's deployment reads (one file, as spark-submit reads)."""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    candidates = [Path(conf_dir)] if conf_dir else [job_dir, job_dir / "conf", project, project / "conf"]
    for folder in candidates:
        path = folder / "spark-defaults.conf"
        if not path.is_file():
            continue
        found = []
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            parts = line.strip().split(None, 1)
            if len(parts) == 2 and not parts[0].startswith("#") and parts[0] in JAR_KEYS:
                found.append(Asked(parts[0], parts[1].strip(), f"{path.name}:{number}"))
        return found
    return []


# -- what it stands for here ----------------------------------------------------------------------------
def _package(item: str, setting: Asked, spark_version: str) -> Wanted:
    parts = item.split(":")
    if len(parts) != 3 or not all(parts):
        raise UserError(f"{setting.where}: {setting.key} names {item!r}: write each as group:artifact:version")
    group, name, version = parts
    base, scala = _scala_split(name)
    asked = f"{setting.key} {item} ({setting.where})"
    if group == "org.apache.spark":
        what = Coordinates(group, f"{base}_{SCALA}" if scala else name, spark_version, exclusions=OWN_EXCLUSIONS)
        note = None if (what.artifact, what.version) == (name, version) else \
            f"{asked} is taken at this Spark's version: {what}"
        return Wanted(what=what, said=note, refusal=asked, spark=True)
    if group == "io.delta":
        return _delta(asked, spark_version)
    if scala and scala != SCALA:
        raise UserError(f"{asked} is built for Scala {scala}; Spark {spark_version} runs Scala {SCALA}: name its "
                        f"_{SCALA} build")
    return Wanted(what=Coordinates(group, name, version), refusal=asked)


def spark_avro(spark_version: str, asked: str) -> Wanted:
    """Spark's Avro functions (``from_avro``) at the running Spark's version, for what ``asked`` says needs them."""
    what = Coordinates("org.apache.spark", f"spark-avro_{SCALA}", spark_version, exclusions=OWN_EXCLUSIONS)
    return Wanted(what=what, said=f"{asked}: {what} from Maven for the job's from_avro", refusal=asked, spark=True)


def _scala_split(name: str) -> tuple[str, str | None]:
    match = re.match(r"^(.*)_(2\.1\d)$", name)
    return (match[1], match[2]) if match else (name, None)


def _delta(asked: str, spark_version: str) -> Wanted:
    from chaos.stream.sinks.delta import artifact

    what = artifact(spark_version)
    return Wanted(what=what, said=f"{asked} is Delta {what.version} for this Spark: {what}", refusal=asked)


def _files(item: str, setting: Asked, spark_version: str, base: Path) -> list[Wanted]:
    for prefix in ("file://", "file:", "local:"):
        item = item.removeprefix(prefix)
    asked = f"{setting.key} {item} ({setting.where})"
    if "://" not in item:
        path = Path(item).expanduser()
        path = path if path.is_absolute() else base / path
        matches = sorted(path.parent.glob(path.name)) if any(c in path.name for c in "*?[") else \
            [path] if path.is_file() else []
        if matches:
            return [Wanted(path=p) for p in matches if p.suffix == ".jar" or p.is_file()]
    name = item.rstrip("/").rsplit("/", 1)[-1]
    for pattern, kind in BY_NAME:
        if match := pattern.match(name):
            return [_by_name(kind, match, asked, spark_version)]
    raise UserError(f"{asked} is not on this machine: put the jar there, or name its Maven coordinates in "
                    "spark.jars.packages (group:artifact:version)")


def _by_name(kind: str, match: re.Match, asked: str, spark_version: str) -> Wanted:
    if kind == "postgresql":
        what = Coordinates("org.postgresql", "postgresql", match[1])
    elif kind == "kafka":
        from chaos.clusters.kafka.jars import connector

        what = connector(spark_version)
    else:
        return _delta(asked, spark_version)
    return Wanted(what=what, said=f"{asked} is not on this machine: {what} from Maven", refusal=asked)


def _refusal_of(w: Wanted):
    def worded(what: Coordinates, output: str) -> str:
        if not_served(output) and w.spark:
            return (f"{what}, for the job's {w.refusal}, is not served by the Maven repositories this machine "
                    "reaches for this Spark: run on a Spark whose artifacts are served (streamchaos spark add "
                    "4.2.0, then streamchaos --spark 4.2.0 ...)")
        if not_served(output):
            named = f"the job's {w.refusal}" if str(what) in w.refusal else f"{what}, for the job's {w.refusal},"
            return (f"{named} is not served by the Maven repositories this machine reaches: correct the "
                    "coordinates, or remove them if the job does not need them")
        return first_error(what, output)

    return worded
