"""chaos/driver/pydaemon.py: Spark's Python processes import the installed pyspark, not pyspark.zip (no JVM).

The processes here are started the way Spark starts them: ``PYTHONPATH`` beginning with
``$SPARK_HOME/python/lib/pyspark.zip`` and the py4j source zip.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from chaos.driver.pydaemon import import_home, prefer_installed, spark_zips
from chaos.machine.spark import spark_home

REPO = Path(__file__).resolve().parent.parent


def spark_pythonpath() -> str:
    lib = Path(spark_home(), "python", "lib")
    zips = [str(lib / "pyspark.zip")] + sorted(str(p) for p in lib.glob("py4j-*-src.zip"))
    return ":".join(zips + [str(REPO)])


def where_pyspark(code: str, cwd: Path) -> dict[str, str]:
    """Run ``code`` as Spark would start a daemon; it prints where pyspark and py4j came from."""
    env = {**os.environ, "PYTHONPATH": spark_pythonpath(), "SPARK_HOME": spark_home()}
    out = subprocess.run([sys.executable, "-c", code + "\nimport pyspark, py4j, sys\n"
                          "print(pyspark.__file__); print(py4j.__file__); print(len(sys.modules))"],
                         env=env, cwd=cwd, capture_output=True, text=True, check=True).stdout.split()
    return {"pyspark": out[0], "py4j": out[1]}


def test_spark_zips_are_found_and_dropped_for_the_installed_package():
    home = spark_home()
    zips = spark_pythonpath().split(":")[:-1]
    path = zips + ["/elsewhere"] + [p for p in sys.path if p]
    assert spark_zips(path, home) == zips
    assert prefer_installed(path, home) == path[len(zips):]


def test_zips_of_another_spark_home_are_left_in_front(tmp_path):
    other = tmp_path / "spark"
    (other / "python" / "lib").mkdir(parents=True)
    path = [str(other / "python" / "lib" / "pyspark.zip")] + [p for p in sys.path if p]
    assert prefer_installed(path, str(other)) == path  # its pyspark is not the installed one: keep it first


def test_without_the_fix_a_spark_python_imports_pyspark_from_the_zip(tmp_path):
    found = where_pyspark("", tmp_path)
    assert ".zip" in found["pyspark"]


def test_the_daemon_module_makes_it_import_the_installed_package(tmp_path):
    found = where_pyspark("import os, sys\nfrom chaos.driver.pydaemon import prefer_installed\n"
                          "sys.path[:] = prefer_installed(sys.path, os.environ['SPARK_HOME'])", tmp_path)
    assert ".zip" not in found["pyspark"] and ".zip" not in found["py4j"]
    assert Path(found["pyspark"]).parent == Path(spark_home())


def test_a_process_started_in_the_import_home_imports_the_installed_package(tmp_path):
    home = import_home(tmp_path / "home", spark_home())
    assert home is not None and sorted(p.name for p in home.iterdir()) == ["py4j", "pyspark"]
    found = where_pyspark("", home)  # sys.path[0] is the working directory, ahead of PYTHONPATH's zips
    assert found["pyspark"].startswith(str(home)) and ".zip" not in found["py4j"]
    assert Path(found["pyspark"]).resolve().parent == Path(spark_home()).resolve()
    assert import_home(tmp_path / "home", spark_home()) == home  # idempotent: the links are kept


def test_no_import_home_for_another_spark_home(tmp_path):
    assert import_home(tmp_path / "home", str(tmp_path)) is None
    assert not (tmp_path / "home").exists()


def start_daemon(extra_env: dict[str, str], tmp_path: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("JE_ARROW_MALLOC_CONF", "OPENBLAS_NUM_THREADS")}
    env.update(PYTHONPATH=spark_pythonpath(), SPARK_HOME=spark_home(), **extra_env)
    return subprocess.Popen([sys.executable, "-m", "chaos.driver.pydaemon", "pyspark.worker"], env=env, cwd=tmp_path,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def serve_and_stop(proc: subprocess.Popen) -> tuple[int, list[str], str]:
    """Wait until the daemon listens (it writes its port), sample it, then close its stdin as Spark does."""
    port = int.from_bytes(proc.stdout.read(4), "big")
    tasks = os.listdir(f"/proc/{proc.pid}/task")
    cmdline = open(f"/proc/{proc.pid}/cmdline").read().split("\0")
    proc.stdin.close()
    proc.wait(timeout=30)
    err = proc.stderr.read().decode()
    proc.stdout.close()
    proc.stderr.close()
    assert port > 0 and proc.returncode is not None, err  # it exits once its stdin closes (pyspark: code 1)
    return len(tasks), cmdline, err


def test_the_daemon_preloads_the_reader_imports_and_stays_single_threaded(tmp_path):
    threads, cmdline, err = serve_and_stop(start_daemon({}, tmp_path))
    assert threads == 1, "a daemon must fork from a single-threaded process"
    assert "chaos.driver.pydaemon" in cmdline
    line = next(x for x in err.splitlines() if x.startswith("streamchaos: python daemon"))
    assert f"pyspark from {spark_home()}," in line and ".zip" not in line
    assert int(line.split(", ")[-1].split()[0]) > 500  # pyspark.worker, pyarrow, pandas: loaded before the fork


def test_a_daemon_whose_imports_start_threads_becomes_the_plain_pyspark_daemon(tmp_path):
    # The user asked for OpenBLAS threads: numpy starts them at import, so the daemon must not fork from
    # that process; it re-executes itself as pyspark.daemon, which imports after the fork.
    threads, cmdline, err = serve_and_stop(start_daemon({"OPENBLAS_NUM_THREADS": "2"}, tmp_path))
    assert "pyspark.daemon" in cmdline and "chaos.driver.pydaemon" not in cmdline
    assert "streamchaos: python daemon" not in err


def spark_core_jar() -> str:
    return str(next(Path(spark_home(), "jars").glob("spark-core_*.jar")))


def test_sparks_own_jars_are_dropped_from_the_path_and_their_cached_finders_forgotten():
    from chaos.driver.pydaemon import forget_importers, spark_jars, without_spark_jars

    jar = spark_core_jar()
    path = [jar, "/elsewhere/user.jar", str(REPO)]
    assert spark_jars(path, spark_home()) == [jar]  # a jar of the user's may hold Python: kept
    assert without_spark_jars(path, spark_home()) == path[1:]
    sys.path_importer_cache[jar] = None
    sys.path_importer_cache[os.path.join(jar, "org")] = None
    forget_importers({jar})
    assert not [key for key in sys.path_importer_cache if key.startswith(jar)]


def test_the_site_hook_prunes_every_python_a_driver_starts_and_chains_the_next_sitecustomize(tmp_path,
                                                                                              monkeypatch):
    """As a driver's JVM starts a planner: Spark's zips and jar on PYTHONPATH, then the driver's own PYTHONPATH
    (chaos.driver.launch.driver_env), with a user's sitecustomize after the hook. ``invalidate_caches()`` then has no
    zip to re-read."""
    from chaos.driver.launch import driver_env

    users = tmp_path / "users"
    users.mkdir()
    (users / "sitecustomize.py").write_text("import os\nos.environ['USERS_SITE_RAN'] = '1'\n")
    monkeypatch.setenv("PYTHONPATH", str(users))  # the harness's own PYTHONPATH, which drivers keep
    env = {**os.environ, "SPARK_HOME": spark_home()}
    env["PYTHONPATH"] = ":".join([spark_pythonpath().rsplit(":", 1)[0], spark_core_jar(), driver_env()["PYTHONPATH"]])
    code = ("import importlib, os, sys, zipimport, pyspark.daemon\nimportlib.invalidate_caches()\n"
            "print([p for p in sys.path if p.startswith(os.environ['SPARK_HOME'])])\n"
            "print([k for k, v in sys.path_importer_cache.items() if isinstance(v, zipimport.zipimporter)])\n"
            "print(os.environ.get('USERS_SITE_RAN'), pyspark.daemon.__file__)")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0] == "[]" and out[1] == "[]", out  # no Spark zip or jar left to re-read
    ran, daemon = out[2].split()
    assert ran == "1"  # the user's sitecustomize still ran
    assert Path(daemon).resolve().parent == Path(spark_home()).resolve()  # the installed pyspark
