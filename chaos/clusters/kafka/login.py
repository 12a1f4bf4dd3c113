"""How clients log in to a Kafka cluster that asks them to: SASL and TLS settings, read once, handed to every client.

A team's own Kafka cluster (``kafka = "KAFKA_BOOTSTRAP"`` in a hosts' file) rarely takes plaintext connections. Its
settings are Java client properties, the form a team already keeps for ``kafka-console-consumer --command-config``:
``security.protocol``, ``sasl.*`` and ``ssl.*`` from a properties file the hosts' file names (``kafka_properties``),
the user name and password from the environment (``KAFKA_SASL_USERNAME``, ``KAFKA_SASL_PASSWORD``), so the file
can be committed and the password stays out of it. They reach three kinds of clients:

* Spark's Kafka source and sink, as ``kafka.``-prefixed options (``spark_options``); the executors get them with
  the query's plan, never through a file;
* the harness's own producer, admin and readers and a job's own ``confluent_kafka`` clients, which are librdkafka's:
  the same settings in its names (``librdkafka``); what librdkafka cannot read (a JKS trust store, a Kerberos or
  OAuth login) is refused in one line when the file is loaded, before anything starts;
* the job's driver, which reads them from a file of the harness's own (``write``, mode 0600, in the system's
  temporary directory, gone at the stop or reaped after a kill) that the trial's settings name by path: no
  secret is written to a run directory, a log or ``source.json`` (``shown`` masks them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from chaos.errors import UserError
from chaos.machine.private_files import private_file

Login = dict[str, str]  # Java client properties: security.protocol, sasl.*, ssl.*

USERNAME_VAR, PASSWORD_VAR = "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD"
MECHANISM_VAR, PROTOCOL_VAR = "KAFKA_SASL_MECHANISM", "KAFKA_SECURITY_PROTOCOL"
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
           "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
           "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}
HIDDEN = "[hidden]"
_SECRET = re.compile(r"jaas|password|secret|token|\.key$|certificates$|key\.pem", re.IGNORECASE)


def security_key(key: str) -> bool:
    """A Java client property that says how to log in (kept out of a job's options when the broker changes)."""
    return key == "security.protocol" or key.startswith(("sasl.", "ssl."))


def spark_login_key(key: str) -> bool:
    """A Spark Kafka option (``kafka.`` + a client property, case as Spark ignores it) that says how to log in."""
    key = str(key).lower()
    return key.startswith("kafka.") and security_key(key[len("kafka."):])


def read_properties(path: Path) -> Login:
    """A Java ``.properties`` file as ``java.util.Properties`` reads it: ``key=value``, ``key: value`` or ``key value``
    lines, ``#``/``!`` comments, a line ending in an odd number of ``\\`` continued on the next, and ``\\t \\n
    \\uXXXX \\\\ \\=`` escapes. Only login settings are taken from it; anything else is one line naming the key
    (never a value: it may be a password)."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"kafka_properties: cannot read {path} ({exc.__class__.__name__}): give a readable "
                        "Java properties file") from None
    found: Login = {}
    logical, number, start_line = "", 0, 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip(" \t\f")
        if not logical:
            start_line = number
            if not line or line[0] in "#!":
                continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            logical += line[:-1]
            continue
        logical += line
        key, value = _split(logical)
        logical = ""
        if not key:
            raise UserError(f"{path}: line {start_line} has no key: write key=value")
        if not security_key(key):
            raise UserError(f"{path}: {key} is not a login setting; the file gives security.protocol, sasl.* and "
                            "ssl.* only (the servers come from KAFKA_BOOTSTRAP)")
        found[key] = value
    if logical:
        key, value = _split(logical)
        if key and security_key(key):
            found[key] = value
    return found


def _split(line: str) -> tuple[str, str]:
    """A logical line's key and value, both unescaped: the key ends at an unescaped ``=``, ``:`` or blank."""
    k = 0
    while k < len(line) and line[k] not in "=: \t\f":
        k += 2 if line[k] == "\\" else 1
    key, rest = line[:k], line[k:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def _unescape(text: str) -> str:
    out, k = [], 0
    while k < len(text):
        c = text[k]
        if c != "\\" or k + 1 == len(text):
            out.append(c)
            k += 1
            continue
        n = text[k + 1]
        if n == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", text[k + 2:k + 6]):
            out.append(chr(int(text[k + 2:k + 6], 16)))
            k += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(n, n))
        k += 2
    return "".join(out)


def load(properties: Path | None, environ: dict[str, str] | None = None) -> Login:
    """The login from ``properties`` (or none) and the environment's ``KAFKA_SASL_*`` and ``KAFKA_SECURITY_PROTOCOL``
    (which win over the file's), checked: every mistake is one line, and librdkafka must be able to use it too."""
    env = os.environ if environ is None else environ
    login = read_properties(properties) if properties else {}
    if env.get(PROTOCOL_VAR):
        login["security.protocol"] = env[PROTOCOL_VAR].strip()
    if env.get(MECHANISM_VAR):
        login["sasl.mechanism"] = env[MECHANISM_VAR].strip()
    user, password = env.get(USERNAME_VAR, ""), env.get(PASSWORD_VAR, "")
    if bool(user) != bool(password):
        raise UserError(f"{USERNAME_VAR} and {PASSWORD_VAR} go together: export both, or neither")
    if user:
        # Like a password sent over the network: encrypted unless the user says otherwise (SASL_PLAINTEXT).
        protocol = login.setdefault("security.protocol", "SASL_SSL").upper()
        if not protocol.startswith("SASL"):
            raise UserError(f"{USERNAME_VAR} is set but security.protocol is {protocol}, which sends no user name: "
                            f"give SASL_SSL or SASL_PLAINTEXT ({PROTOCOL_VAR} or the file), or unset {USERNAME_VAR}")
        mechanism = login.setdefault("sasl.mechanism", "PLAIN")
        if mechanism not in MODULES:
            raise UserError(f"sasl.mechanism {mechanism} cannot take {USERNAME_VAR}: use one of {', '.join(MODULES)}")
        login["sasl.jaas.config"] = (f'{MODULES[mechanism]} required username="{_quoted(user)}" '
                                     f'password="{_quoted(password)}";')
    librdkafka(login)  # refuses what the harness's own clients could not use
    return login


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def librdkafka(login: Login) -> dict[str, str]:
    """The same login in librdkafka's settings (the harness's clients, a job's ``confluent_kafka`` clients)."""
    if not login:
        return {}
    protocol = login.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise UserError(f"security.protocol {protocol} is not one of {', '.join(PROTOCOLS)}")
    conf = {"security.protocol": protocol}
    if protocol.startswith("SASL"):
        mechanism = login.get("sasl.mechanism")
        if mechanism is None:
            raise UserError(f"security.protocol {protocol} needs sasl.mechanism ({', '.join(MODULES)}) and a user name "
                            f"and password: export {USERNAME_VAR} and {PASSWORD_VAR}")
        if mechanism not in MODULES:
            raise UserError(f"sasl.mechanism {mechanism}: the harness's Kafka clients log in with "
                            f"{', '.join(MODULES)} (give sasl.mechanism and {USERNAME_VAR}/{PASSWORD_VAR})")
        jaas = login.get("sasl.jaas.config", "")
        user, password = _jaas_field(jaas, "username"), _jaas_field(jaas, "password")
        if user is None or password is None:
            raise UserError(f"sasl.mechanism {mechanism} needs a user name and password: export {USERNAME_VAR} and "
                            f"{PASSWORD_VAR}, or give sasl.jaas.config with username=\"...\" password=\"...\"")
        conf.update({"sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password})
    if protocol.endswith("SSL"):
        conf.update(_tls(login))
    return conf


def _jaas_field(jaas: str, name: str) -> str | None:
    match = re.search(rf'\b{name}\s*=\s*"((?:[^"\\]|\\.)*)"', jaas)
    return re.sub(r"\\(.)", r"\1", match.group(1)) if match else None


def _tls(login: Login) -> dict[str, str]:
    conf: dict[str, str] = {}
    if login.get("ssl.truststore.certificates"):
        conf["ssl.ca.pem"] = login["ssl.truststore.certificates"]
    elif login.get("ssl.truststore.location"):
        if login.get("ssl.truststore.type", "JKS").upper() != "PEM":
            raise UserError("ssl.truststore.location: give the CA certificates as PEM (ssl.truststore.type=PEM): "
                            "Spark's client reads PEM as well as JKS, the harness's librdkafka clients PEM only")
        conf["ssl.ca.location"] = login["ssl.truststore.location"]
    if login.get("ssl.keystore.key"):  # a PEM key and its chain given inline, as Java reads them too
        conf["ssl.key.pem"] = login["ssl.keystore.key"]
        if login.get("ssl.keystore.certificate.chain"):
            conf["ssl.certificate.pem"] = login["ssl.keystore.certificate.chain"]
        if login.get("ssl.key.password"):
            conf["ssl.key.password"] = login["ssl.key.password"]
    elif login.get("ssl.keystore.location"):
        kind = login.get("ssl.keystore.type", "JKS").upper()
        if kind == "PKCS12":
            conf["ssl.keystore.location"] = login["ssl.keystore.location"]
            if login.get("ssl.keystore.password"):
                conf["ssl.keystore.password"] = login["ssl.keystore.password"]
        elif kind == "PEM":
            conf["ssl.certificate.location"] = conf["ssl.key.location"] = login["ssl.keystore.location"]
            if login.get("ssl.key.password"):
                conf["ssl.key.password"] = login["ssl.key.password"]
        else:
            raise UserError("ssl.keystore.location: give the client's key as PKCS12 or PEM (ssl.keystore.type), "
                            "which both Spark's client and the harness's librdkafka clients read")
    algorithm = login.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        conf["ssl.endpoint.identification.algorithm"] = algorithm or "none"
    return conf


def spark_options(login: Login) -> dict[str, str]:
    """Spark's Kafka source and sink options for the login."""
    return {f"kafka.{key}": value for key, value in login.items()}


def shown(key: str, value: str) -> str:
    """A setting as a record may show it: a password, a JAAS line or a key as ``[hidden]``, as Kafka logs them."""
    return HIDDEN if _SECRET.search(key) else value


LOGIN_PREFIX = "streamchaos-kafkalogin-"  # + the harness process's pid: a dead one's is removed at a next write


def write(login: Login) -> str:
    """The login into a private file of this harness (``chaos.machine.private_files``: 0600, outside every run
    directory, as the database's passfile is; a killed harness's removed by the next); its path for the drivers.
    ``remove`` ends it."""
    return str(private_file(LOGIN_PREFIX, "login.json", json.dumps(login)))


def remove(path: str | None) -> None:
    if path and Path(path).parent.name.startswith(LOGIN_PREFIX):
        shutil.rmtree(Path(path).parent, ignore_errors=True)


def of(kafka: dict | None) -> Login:
    """The login the trial's Kafka settings name (``kafka["login"]``: the file ``write`` made), or none."""
    path = (kafka or {}).get("login")
    return json.loads(Path(path).read_text()) if path else {}


BOOTSTRAP_VAR = "KAFKA_BOOTSTRAP"
BOOTSTRAP_USAGE = "HOST:PORT[,HOST:PORT...]"


def read_bootstrap(environ: dict[str, str] | None = None) -> str:
    """``KAFKA_BOOTSTRAP``: the servers of the user's own Kafka cluster, checked (one line naming what is wrong)."""
    text = (os.environ if environ is None else environ).get(BOOTSTRAP_VAR, "").strip()
    if not text:
        raise UserError(f'kafka = "{BOOTSTRAP_VAR}" but {BOOTSTRAP_VAR} is not set: export '
                        f"{BOOTSTRAP_VAR}={BOOTSTRAP_USAGE} (your cluster's bootstrap servers)")
    servers = [s.strip() for s in text.split(",") if s.strip()]
    for server in servers:
        host, _, port = server.rpartition(":")
        if "://" in server or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UserError(f"{BOOTSTRAP_VAR}: {server!r} is not HOST:PORT; give {BOOTSTRAP_USAGE}")
    return ",".join(servers)
