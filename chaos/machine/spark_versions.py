"""Other PySpark versions beside the installed one, to run a trial or a campaign on the Spark a user runs.

``streamchaos spark add 4.1.0`` makes a virtual environment under ``~/.cache/streamchaos/spark/4.1.0``
that sees this interpreter's packages (``--system-site-packages``: streamchaos itself, polars,
hypothesis, ...) and installs ``pyspark==4.1.0`` (and what that version pins, e.g. its py4j) into its
own site-packages, which come first on its ``sys.path``. ``streamchaos --spark 4.1.0 trial ...`` then
runs the whole command again with that environment's interpreter: the cluster (its SPARK_HOME is that
pyspark's), the drivers, the executors' Python workers and the checker all run on 4.1.0, and every
cache keyed by Spark (class archives, unsigned jars) is that version's own.

Versions before 4.0 have no Python data source API, which the harness's replayable source is.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from chaos.errors import UserError
from chaos.machine.jvm import cache_dir

VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
READY = "ready"  # written last: a half-made environment (interrupted, failed install) is not listed
# Set in a command re-run on another version: where it came from (an upgrade from an added version back to
# the installed one runs there).
BASE_PYTHON_VAR, BASE_SPARK_VAR = "STREAMCHAOS_BASE_PYTHON", "STREAMCHAOS_BASE_SPARK"
# The site-packages of the environment streamchaos is installed in (a virtual environment, as users install it):
# an added environment's ``--system-site-packages`` reach only the base interpreter's, so a hook in it adds these
# (after its own, so its own pyspark comes first; their .pth files too: an editable install's finder).
BASE_SITE_VAR = "STREAMCHAOS_BASE_SITE"
SITE_HOOK_MODULE = "streamchaos_base_site"
SITE_HOOK = f"""\"\"\"Adds the site-packages ${BASE_SITE_VAR} names (streamchaos's environment) after this one's,
ahead of the interpreter's own: another streamchaos installed there must not shadow the one that runs.\"\"\"
import os
import site
import sys

_path, _meta = list(sys.path), list(sys.meta_path)
for _dir in os.environ.get("{BASE_SITE_VAR}", "").split(os.pathsep):
    if _dir and os.path.isdir(_dir):
        site.addsitedir(_dir)
_here = os.path.dirname(os.path.abspath(__file__))
_at = _path.index(_here) + 1 if _here in _path else len(_path)
sys.path[:] = _path[:_at] + [p for p in sys.path if p not in _path] + _path[_at:]
sys.meta_path[:] = [f for f in sys.meta_path if f not in _meta] + _meta  # editable installs' finders
"""


def own_site() -> str:
    """This interpreter's site-packages (purelib, platlib), joined by ``os.pathsep``."""
    import sysconfig

    paths = sysconfig.get_paths()
    return os.pathsep.join(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def with_base_site(version: str) -> None:
    """An added environment sees the packages of the one that calls it: its hook in place, and this process's
    site-packages named for it and every process it starts (unless a caller named its own already)."""
    for site_packages in env_dir(version).glob("lib/python*/site-packages"):
        for path, text in ((site_packages / f"{SITE_HOOK_MODULE}.py", SITE_HOOK),
                           (site_packages / f"{SITE_HOOK_MODULE}.pth", f"import {SITE_HOOK_MODULE}\n")):
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
    os.environ.setdefault(BASE_SITE_VAR, own_site())


def current_version() -> str:
    import pyspark

    return pyspark.__version__


def spark_option(version: str | None) -> str | None:
    """The ``--spark`` a command needs to run on ``version`` again: None for the installed one (the base install's,
    when this process runs on an added one)."""
    return version if version and version != (os.environ.get(BASE_SPARK_VAR) or current_version()) else None


def check_version(version: str) -> str:
    """``version`` if it names a PySpark this harness can drive (X.Y.Z, 4.0.0 or later), else a UserError."""
    match = VERSION.match(version)
    if not match:
        raise UserError(f"Spark version {version!r} is not X.Y.Z: give a PySpark release such as 4.1.0")
    if int(match[1]) < 4:
        raise UserError(f"Spark {version} has no Python data source API (4.0.0 or later): choose 4.0.0 or newer")
    return version


def root() -> Path:
    return cache_dir() / "spark"


def env_dir(version: str) -> Path:
    return root() / version


def python_of(version: str) -> Path:
    return env_dir(version) / "bin" / "python"


def installed() -> dict[str, Path]:
    """Every side version that is ready: version -> its interpreter."""
    if not root().is_dir():
        return {}
    return {d.name: python_of(d.name) for d in sorted(root().iterdir())
            if VERSION.match(d.name) and (d / READY).exists() and python_of(d.name).exists()}


def last_line(done: subprocess.CompletedProcess) -> str:
    """What a failed command said last (stderr, else stdout): the line a one-line error quotes."""
    lines = [ln for ln in (done.stderr or done.stdout or "").splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "no output"


def add(version: str, echo=print) -> Path:
    """Make ``version``'s environment (once); its interpreter. A failed install leaves nothing behind."""
    check_version(version)
    if version == current_version():
        raise UserError(f"pyspark {version} is the installed one: trials run on it without --spark")
    target = env_dir(version)
    if (target / READY).exists():
        return python_of(version)
    shutil.rmtree(target, ignore_errors=True)  # a half-made one
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot make {target.parent} ({exc.strerror}): set XDG_CACHE_HOME to a writable "
                        "directory") from None
    try:
        made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(target)],
                              capture_output=True, text=True)
        if made.returncode != 0:
            raise UserError(f"{sys.executable} -m venv failed: {last_line(made)} "
                            "(Debian/Ubuntu: apt-get install python3-venv)")
        with_base_site(version)
        echo(f"installing pyspark {version} into {target} (~450 MB from PyPI, about half a minute)")
        done = subprocess.run([str(python_of(version)), "-m", "pip", "install", "--quiet",
                               "--disable-pip-version-check", f"pyspark=={version}"], capture_output=True, text=True)
        if done.returncode != 0:
            raise UserError(f"pip could not install pyspark=={version}: {last_line(done)} "
                            "(check the version exists on PyPI and the network reaches it)")
        got = subprocess.run([str(python_of(version)), "-c", "import pyspark, chaos; print(pyspark.__version__)"],
                             capture_output=True, text=True)
        if got.returncode != 0 or got.stdout.strip() != version:
            raise UserError(f"the environment for {version} imports pyspark {got.stdout.strip() or '?'} "
                            f"({last_line(got)}): remove {target} and add it again")
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    (target / READY).write_text(version)
    return python_of(version)


def remove(version: str) -> bool:
    target = env_dir(check_version(version))
    existed = target.exists()
    shutil.rmtree(target, ignore_errors=True)
    return existed


def split_spark_option(argv: list[str]) -> tuple[str | None, list[str]]:
    """``--spark VERSION`` (or ``--spark=VERSION``) taken out of a command line: (version, the rest)."""
    rest, version, i = [], None, 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--spark":
            if i + 1 >= len(argv):
                raise UserError("--spark needs a version, e.g. --spark 4.1.0")
            version, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--spark="):
            version = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    return version, rest


def python_for(version: str) -> Path:
    """The interpreter whose pyspark is ``version``: this one, the installed one, or an added one."""
    check_version(version)
    if version == current_version():
        return Path(sys.executable)
    if os.environ.get(BASE_SPARK_VAR) == version and os.environ.get(BASE_PYTHON_VAR):
        return Path(os.environ[BASE_PYTHON_VAR])
    python = installed().get(version)
    if python is None:
        raise UserError(f"pyspark {version} is not added: run `streamchaos spark add {version}` first "
                        f"(added: {', '.join(installed()) or 'none'})")
    with_base_site(version)
    return python


def side_env() -> dict[str, str]:
    """The environment for a process on another version's interpreter (after ``python_for``): this process's, with
    this interpreter named as the base one unless a caller already named its own."""
    env = dict(os.environ)
    if BASE_PYTHON_VAR not in env:
        env.update({BASE_PYTHON_VAR: sys.executable, BASE_SPARK_VAR: current_version()})
    return env


def run_on(version: str, argv: list[str]) -> None:
    """Replace this process by ``streamchaos ARGV`` on ``version``'s environment (nothing runs here after)."""
    python = python_for(version)
    env = side_env()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(str(python), [str(python), "-m", "chaos", *argv], env)
