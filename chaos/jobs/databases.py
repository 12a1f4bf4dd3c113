"""A database the job names itself is the trial's: JDBC URLs and psycopg connections written in its code.

Jobs are written against their own database: ``batch.write.jdbc("jdbc:postgresql://localhost:5432/events", ...)``,
``.format("jdbc").option("url", "jdbc:postgresql://postgres:5432/shop")`` (a docker-compose host), or
``psycopg2.connect(host="localhost", dbname="events", user="etl", password=...)``. Run as written, those writes
would go to a server the trial does not own. As the Kafka source, the file sink and the checkpoint are, they are
rerouted: the URL or connection parameters are replaced by the trial's database (``JDBC_URL``, libpq's ``PG*``
from chaos.jobs.job_env, read at the moment of the call, so the oracle's run reaches its own), the job's table
names, modes and other options kept. The job's code is not changed.

Before any JVM starts the job's module is read for the databases it names (``named_databases``): one of a kind the
harness has no server for (MySQL, SQL Server) is one line, and the trial says which it reroutes.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from chaos.errors import UserError
from chaos.jobs.callers import from_the_job

# ``jdbc:SUBPROTOCOL:...`` and ``postgres(ql)://...`` written in the job's source.
JDBC_WRITE = re.compile(r"""\.jdbc\(|["']jdbc["']""")  # .jdbc(...), format("jdbc") or a name for "jdbc"
JDBC_LITERAL = re.compile(r"""jdbc:([A-Za-z0-9]+):[^\s"'`]*""")
POSTGRES_URL = re.compile(r"""(?<![:\w])postgres(?:ql)?://[^\s"'`]+""")
SERVED = ("postgresql",)


def named_databases(source_text: str) -> list[str]:
    """The database URLs the job's code names; one of a kind the harness has no server for is one line."""
    found: list[str] = []
    for match in JDBC_LITERAL.finditer(source_text):
        _refuse_other(match.group(0))
        if match.group(0) not in found:
            found.append(match.group(0))
    for match in POSTGRES_URL.finditer(source_text):
        if match.group(0) not in found:
            found.append(match.group(0))
    return found


def shown(url: str) -> str:
    """A database URL as the trial's first lines show it: no password."""
    url = re.sub(r"(//[^:/@]+:)[^@/]+@", r"\1***@", url)
    return re.sub(r"(?i)(password=)[^&;]+", r"\1***", url)


def _trial_jdbc() -> tuple[str, str, str] | None:
    """The trial's JDBC URL, user and password at this moment (the oracle's run sets its own)."""
    url = os.environ.get("JDBC_URL")
    if not url:
        return None
    return url, os.environ.get("DB_USER", ""), os.environ.get("DB_PASSWORD", "")


def _trial_url(url: str) -> str:
    """The trial's JDBC URL with the job's own parameters (``?currentSchema=raw&stringtype=unspecified``)."""
    trial = _trial_jdbc()
    if trial is None:
        return url
    params = str(url).partition("?")[2]
    return trial[0] + (f"?{params}" if params else "")


def _jdbc_properties(properties: dict | None) -> dict:
    trial = _trial_jdbc()
    props = dict(properties or {})
    if trial is not None:
        props["user"], props["password"] = trial[1], trial[2]
        props.setdefault("driver", "org.postgresql.Driver")
    return {**props, **_barrier_properties(props.get("driver"))}


# Spark's JDBC writer's tasks report their sink-write through this driver (chaos/machine/jvm), when a trial's
# controller is set for this driver process (``phases_to``) and a foreachBatch of the query under test is running on
# this thread (``in_batch``): the batch its writes are for.
BARRIER_DRIVER = "streamchaos.BarrierJdbcDriver"
_barrier: dict[str, str] = {}
_batch = threading.local()


def phases_to(controller: str | None, incarnation: int = 0) -> None:
    """This run's JDBC writes report their tasks' phases to ``controller`` (None: the oracle's run, none)."""
    _barrier.clear()
    if controller:
        _barrier.update({"streamchaos.controller": controller, "streamchaos.incarnation": str(incarnation)})


@contextmanager
def in_batch(batch_id: int) -> Iterator[None]:
    """The JDBC writes of this thread are for micro-batch ``batch_id`` while the context lasts."""
    _batch.id = int(batch_id)
    try:
        yield
    finally:
        _batch.id = None


def _barrier_properties(driver: str | None) -> dict[str, str]:
    batch = getattr(_batch, "id", None)
    if not _barrier or batch is None:
        return {}
    return {**_barrier, "streamchaos.batch": str(batch), "streamchaos.driver": driver or "org.postgresql.Driver",
            "driver": BARRIER_DRIVER}


def writes_jdbc(source_text: str) -> bool:
    """Whether the job's code writes through Spark's JDBC writer (its tasks then report ``sink-write``)."""
    return bool(JDBC_WRITE.search(source_text))


def _refuse_other(url: str) -> None:
    """A JDBC URL of a database the harness has no server for is one line (read in the source, or at the call)."""
    kind = url.split(":")[1].lower() if url.startswith("jdbc:") and url.count(":") > 1 else ""
    if kind and kind not in SERVED:
        raise UserError(f"the job writes to {url}: streamchaos runs PostgreSQL only for a job's database "
                        "(jdbc:postgresql://...); point the job at PostgreSQL or write to a file sink")


def _reroute_writer() -> None:
    """``DataFrameWriter.jdbc(url, table, ...)`` and ``.format("jdbc")...save()`` write the trial's database."""
    from pyspark.sql.readwriter import DataFrameWriter

    if getattr(DataFrameWriter, "_streamchaos_rerouted", False):
        return
    jdbc, save = DataFrameWriter.__dict__["jdbc"], DataFrameWriter.__dict__["save"]
    fmt, option, options = (DataFrameWriter.__dict__[n] for n in ("format", "option", "options"))

    def rerouted_jdbc(self, url, table, mode=None, properties=None):
        _refuse_other(url)
        return jdbc(self, _trial_url(url), table, mode, _jdbc_properties(properties))

    def noted_format(self, source):
        self.__dict__["_streamchaos_format"] = source
        return fmt(self, source)

    def rerouted_save(self, path=None, format=None, mode=None, partitionBy=None, **opts):  # noqa: A002, N803
        if (format or self.__dict__.get("_streamchaos_format") or "").lower() == "jdbc":
            trial = _trial_jdbc()
            if trial is not None:
                url = opts.pop("url", None) or self.__dict__.get("_streamchaos_url", "")
                for key in ("user", "password"):
                    opts.pop(key, None)
                option(self, "url", _trial_url(url))
                option(self, "user", trial[1])
                option(self, "password", trial[2])
            driver = opts.pop("driver", None) or self.__dict__.get("_streamchaos_driver")
            for key, value in _barrier_properties(driver).items():
                option(self, key, value)
        return save(self, path, format, mode, partitionBy, **opts)

    def checked_option(self, key, value):
        if str(key).lower() == "url":
            _refuse_other(str(value))
            self.__dict__["_streamchaos_url"] = str(value)
        elif str(key).lower() == "driver":
            self.__dict__["_streamchaos_driver"] = str(value)
        return option(self, key, value)

    def checked_options(self, **opts):
        if "url" in opts:
            _refuse_other(str(opts["url"]))
            self.__dict__["_streamchaos_url"] = str(opts["url"])
        if "driver" in opts:
            self.__dict__["_streamchaos_driver"] = str(opts["driver"])
        return options(self, **opts)

    DataFrameWriter.jdbc = rerouted_jdbc
    DataFrameWriter.save = rerouted_save
    DataFrameWriter.format = noted_format
    DataFrameWriter.option = checked_option
    DataFrameWriter.options = checked_options
    DataFrameWriter._streamchaos_rerouted = True


# Connection parameters that name a server, its database and credentials: the trial's replace them; the job's other
# parameters (application_name, options, autocommit) are kept.
_WHERE = ("host", "hostaddr", "port", "dbname", "database", "user", "password", "passfile", "service", "sslmode")


def _trial_params() -> dict[str, str] | None:
    if not os.environ.get("PGHOST"):
        return None
    return {"host": os.environ["PGHOST"], "port": os.environ.get("PGPORT", "5432"),
            "dbname": os.environ.get("PGDATABASE", "postgres"), "user": os.environ.get("PGUSER", ""),
            "password": os.environ.get("PGPASSWORD", "")}


def _rerouted_connect(connect: Callable, parse: Callable[[str], dict]) -> Callable:
    def rerouted(dsn: str | None = None, *args: Any, **kwargs: Any) -> Any:
        trial = _trial_params()
        if trial is None or not from_the_job(("psycopg", "chaos.jobs.databases")):
            return connect(dsn, *args, **kwargs) if dsn is not None else connect(*args, **kwargs)
        dsn = dsn or kwargs.pop("conninfo", None) or kwargs.pop("dsn", None)
        given = parse(dsn) if dsn else {}
        kept = {k: v for k, v in {**given, **kwargs}.items() if k not in _WHERE}
        return connect(*args, **kept, **trial)

    rerouted._streamchaos_rerouted = True  # type: ignore[attr-defined]
    return rerouted


def _reroute_psycopg() -> None:
    """``psycopg.connect`` and ``psycopg2.connect`` (whichever the job has) reach the trial's database."""
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        if not getattr(psycopg.connect, "_streamchaos_rerouted", False):
            psycopg.connect = _rerouted_connect(psycopg.connect, conninfo_to_dict)
    except ImportError:
        pass
    try:
        import psycopg2
        from psycopg2.extensions import parse_dsn

        if not getattr(psycopg2.connect, "_streamchaos_rerouted", False):
            psycopg2.connect = _rerouted_connect(psycopg2.connect, parse_dsn)
    except ImportError:
        pass


def reroute() -> None:
    """From now on in this driver, a database the job names is the trial's (or the oracle's run's): installed
    before the job's module is imported, so ``from psycopg import connect`` binds the rerouted one. The writes
    happen in the job's foreachBatch, long after its start returned: this stays for the driver's life. What it
    hands the executors to run (``foreachPartition``, ``foreach``, a ``writeStream.foreach`` writer) takes the
    database there too (``on_executors``)."""
    _reroute_writer()
    _reroute_psycopg()
    reroute_partitions()


def on_executors(fn: Any) -> Any:
    """``fn`` (a function or a ``foreach`` writer) as the executors should run it: in a Python worker where the
    database variables are this run's and a connection the job names is rerouted, as in the driver. A job opens
    its connections there (``batch.foreachPartition(write)`` with ``psycopg2.connect(host="postgres", ...)``,
    a writer's ``open``); the workers have neither the driver's environment nor its patches. The variables
    travel with the task, never to a file of the run."""
    from chaos.jobs.job_env import DATABASE_VARS
    from chaos.jobs.kafka.sink import OUT_VAR

    env = {k: os.environ[k] for k in (*DATABASE_VARS, OUT_VAR) if k in os.environ}
    return fn if not env or isinstance(fn, _OnExecutors) else _wrapped(fn, env)


def _wrapped(inner: Any, env: dict[str, str]) -> _OnExecutors:
    return _Called(inner, env) if callable(inner) else _OnExecutors(inner, env)


class _OnExecutors:
    """A job's function or writer that, unpickled in a worker, first sets the run's database there: pickled as
    its run's variables and the job's object as bytes, so the variables and the rerouted ``connect`` are in place
    before the job's code is unpickled (a ``from psycopg2 import connect`` in its module binds the rerouted one)."""

    def __init__(self, inner: Any, env: dict[str, str]) -> None:
        self.inner, self.env = inner, env

    def __getattr__(self, name: str) -> Any:  # a writer's open/process/close
        if name in ("inner", "env"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __reduce__(self):
        from pyspark import cloudpickle

        return _in_worker, (self.env, cloudpickle.dumps(self.inner))


class _Called(_OnExecutors):
    """A function (Spark tells a ``foreach`` function from a writer object by whether it is callable)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner(*args, **kwargs)


def _in_worker(env: dict[str, str], pickled: bytes) -> _OnExecutors:
    import pickle

    from chaos.jobs.kafka.sink import OUT_VAR

    os.environ.update(env)
    _reroute_psycopg()
    if OUT_VAR in env:  # a job's own Kafka clients there too (chaos.jobs.kafka.rerouting)
        from chaos.jobs.kafka.rerouting import reroute as reroute_kafka

        reroute_kafka()
    else:  # a reused worker: no earlier run's topic
        os.environ.pop(OUT_VAR, None)
    return _wrapped(pickle.loads(pickled), env)  # noqa: S301 - the task's own closure, from its driver


def reroute_partitions() -> None:
    """``RDD.foreachPartition`` and ``RDD.foreach`` (``DataFrame``'s call them) and ``writeStream.foreach`` hand
    the executors ``on_executors(f)``."""
    from pyspark.rdd import RDD
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    for owner, names in ((RDD, ("foreachPartition", "foreach")), (DataStreamWriter, ("foreach",))):
        if getattr(owner, "_streamchaos_rerouted", False):
            continue
        for name in names:
            setattr(owner, name, (lambda orig: lambda self, f: orig(self, on_executors(f)))(owner.__dict__[name]))
        owner._streamchaos_rerouted = True
