"""Unsigned copies of Spark's signed jars (chaos/machine/jvm/unsigned.py): same classes, no signature, first on
the class path of the harness's JVMs (no JVM started here)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pyspark

from chaos.driver.jvm_options import class_path_first
from chaos.machine.jvm.unsigned import is_signed, quick_class_path, unsign, unsigned_copies

SIGNED_MANIFEST = (b"Manifest-Version: 1.0\r\nCreated-By: test\r\n\r\n"
                   b"Name: a/B.class\r\nSHA-256-Digest: abc=\r\n\r\n")


def _jar(path: Path, signed: bool) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as jar:
        jar.writestr("META-INF/MANIFEST.MF", SIGNED_MANIFEST if signed else b"Manifest-Version: 1.0\r\n\r\n")
        if signed:
            jar.writestr("META-INF/DUMMY.SF", b"Signature-Version: 1.0\r\n")
            jar.writestr("META-INF/DUMMY.DSA", b"\x30\x82")
        jar.writestr("a/B.class", b"\xca\xfe\xba\xbe bytes of B")
        jar.writestr("a/resource.txt", b"kept")
    return path


def test_a_copy_keeps_every_class_and_resource_but_no_signature(tmp_path):
    signed = _jar(tmp_path / "lib.jar", signed=True)
    assert is_signed(signed)
    copy = unsign(signed, tmp_path / "copy.jar")
    assert not is_signed(copy)
    with zipfile.ZipFile(copy) as out, zipfile.ZipFile(signed) as src:
        assert out.namelist() == ["META-INF/MANIFEST.MF", "a/B.class", "a/resource.txt"]
        assert out.read("a/B.class") == src.read("a/B.class")
        assert out.read("a/resource.txt") == b"kept"
        manifest = out.read("META-INF/MANIFEST.MF")
    assert b"Created-By: test" in manifest and b"Digest" not in manifest and b"Name:" not in manifest
    assert not list(tmp_path.glob("*.tmp"))  # written atomically


def test_only_signed_jars_are_copied_once(tmp_path):
    jars = tmp_path / "jars"
    jars.mkdir()
    _jar(jars / "signed.jar", signed=True)
    _jar(jars / "plain.jar", signed=False)
    assert unsigned_copies(jars, tmp_path / "out", build=False) == [tmp_path / "out" / "signed.jar"]
    assert not (tmp_path / "out").exists()  # build=False: the names only
    copies = unsigned_copies(jars, tmp_path / "out")
    assert copies == [tmp_path / "out" / "signed.jar"]
    stamp = copies[0].stat().st_mtime_ns  # the JVM checks a shared class path's jars by size and time
    assert unsigned_copies(jars, tmp_path / "out") == copies and copies[0].stat().st_mtime_ns == stamp


def test_later_starts_read_which_jars_were_signed_instead_of_opening_them_all(tmp_path, monkeypatch):
    from chaos.machine.jvm import unsigned

    jars = tmp_path / "jars"
    jars.mkdir()
    _jar(jars / "signed.jar", signed=True)
    _jar(jars / "plain.jar", signed=False)
    copies = unsigned_copies(jars, tmp_path / "out")
    assert (tmp_path / "out" / unsigned.SIGNED_LIST).read_text() == "signed.jar\n"

    def opened(jar):
        raise AssertionError(f"{jar} opened again")

    monkeypatch.setattr(unsigned, "is_signed", opened)
    assert unsigned_copies(jars, tmp_path / "out") == copies
    copies[0].unlink()  # a copy gone (a cleaned cache): the jars are looked at again
    monkeypatch.undo()
    assert unsigned_copies(jars, tmp_path / "out") == copies and copies[0].is_file()


def test_pysparks_janino_is_signed_and_its_copy_is_not(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    jars = Path(pyspark.__file__).parent / "jars"
    janino = next(jars.glob("janino-*.jar"))
    assert is_signed(janino)  # why this module exists: CDS skips every class of a signed jar
    class_path = quick_class_path()
    copies = [Path(p) for p in class_path.split(":")]
    assert janino.name in [c.name for c in copies]
    assert all(c.parent.parent == tmp_path / "streamchaos" and not is_signed(c) for c in copies)
    with zipfile.ZipFile(janino) as src, zipfile.ZipFile(copies[[c.name for c in copies].index(janino.name)]) as out:
        classes = [n for n in src.namelist() if n.endswith(".class")]
        assert classes and all(out.read(n) == src.read(n) for n in classes)
    assert quick_class_path(build=False) == class_path


def test_the_harness_class_path_goes_first_and_keeps_a_pipelines_own():
    assert class_path_first("", {"spark.driver.extraClassPath": "/h.jar"}) == {"spark.driver.extraClassPath": "/h.jar"}
    merged = class_path_first("/c/janino.jar", {"spark.driver.extraClassPath": "/h.jar", "spark.x": "1"})
    assert merged == {"spark.driver.extraClassPath": "/c/janino.jar:/h.jar",
                      "spark.executor.extraClassPath": "/c/janino.jar", "spark.x": "1"}
