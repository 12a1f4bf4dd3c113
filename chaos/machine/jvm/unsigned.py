"""Spark's signed jars, copied without their signatures, so the class archives can hold their classes.

The JVM's class-data sharing skips every class of a signed jar, and a class loaded from one is also
checked against the jar's signature digests. PySpark ships two signed jars: Janino and
commons-compiler, the compiler of Spark's generated code, which every driver and executor loads on its
first job (~390 classes, among them Janino's very large ``UnitCompiler``). Measured here (JDK 17, C1
only), compiling one generated class in a fresh JVM: 0.30 CPU-s from the signed jars with a class
archive, 0.09 from unsigned copies in the archive; a standard trial starts ten such JVMs.

``quick_class_path()`` returns copies of those jars (the same classes and resources, without
``META-INF/*.SF|DSA|RSA|EC`` and the manifest's per-entry digests) under ``~/.cache/streamchaos``, built
once per PySpark version. The harness puts them first on its drivers' and executors' class path
(``spark.driver.extraClassPath`` / ``spark.executor.extraClassPath``, quick JVM only); classes are
found in the first jar that has them, so Spark runs the same bytecode and never reads the signed
copies' classes (a package split between a signed and an unsigned jar would fail to load: each copy
is whole).
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

from chaos.machine.jvm import cache_dir
from chaos.store.atomic import write_text

SIGNATURE = re.compile(r"META-INF/[^/]+\.(SF|DSA|RSA|EC)$", re.IGNORECASE)
MANIFEST = "META-INF/MANIFEST.MF"


def is_signed(jar: Path) -> bool:
    try:
        with zipfile.ZipFile(jar) as archive:
            return any(SIGNATURE.match(name) for name in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def main_attributes(manifest: bytes) -> bytes:
    """A manifest's main section only: the per-entry sections of a signed jar hold the digests."""
    text = manifest.replace(b"\r\n", b"\n")
    main = text.split(b"\n\n", 1)[0].rstrip(b"\n")
    return main + b"\n\n"


def unsign(jar: Path, out: Path) -> Path:
    """Write ``jar`` without its signature to ``out`` (atomically); entries keep their order and dates."""
    partial = out.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(jar) as src, zipfile.ZipFile(partial, "w") as dst:
        for info in src.infolist():
            if SIGNATURE.match(info.filename):
                continue
            data = src.read(info)
            if info.filename.upper() == MANIFEST:
                data = main_attributes(data)
            dst.writestr(info, data, compress_type=info.compress_type)
    partial.replace(out)
    return out


SIGNED_LIST = "signed-jars.txt"  # in the copies' folder: which jars were signed, so no later start opens ~250 jars


def unsigned_copies(jars: Path, folder: Path, build: bool = True) -> list[Path]:
    """Unsigned copies of the signed jars in ``jars``, in ``folder``: built if missing (``build``). Finding
    the signed ones opens every jar (0.6 s for PySpark's ~250): done once, then read from ``SIGNED_LIST``."""
    listed = folder / SIGNED_LIST
    if listed.is_file():
        names = listed.read_text().split()
        if all((folder / name).is_file() for name in names):
            return [folder / name for name in names]
    signed = sorted(p for p in jars.glob("*.jar") if is_signed(p))
    if signed and build:
        folder.mkdir(parents=True, exist_ok=True)
    copies = []
    for jar in signed:
        copy = folder / jar.name
        copies.append(copy if copy.exists() or not build else unsign(jar, copy))
    if build and signed:
        write_text(listed, "\n".join(jar.name for jar in signed) + "\n")
    return copies


def quick_class_path(build: bool = True) -> str:
    """The class path prefix for the harness's JVMs ("" if PySpark ships no signed jar or the cache is not
    writable: the JVMs then load the signed jars, only slower). ``build=False``: what it would be."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    try:
        copies = unsigned_copies(jars, cache_dir() / f"unsigned-jars-{pyspark.__version__}", build)
    except (OSError, zipfile.BadZipFile):
        return ""
    return os.pathsep.join(str(c) for c in copies)
