"""``DATABASE_URL``: the user's own PostgreSQL, named by a URL in the environment (``chaos.clusters.ssh.userdb`` uses
it).

Apart from the database module so the hosts' file checks it at load, before anything starts, without the
harness's SSH and process modules.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

from chaos.errors import UserError

VAR = "DATABASE_URL"
USAGE = "postgresql://USER:PASSWORD@HOST:PORT/DATABASE"


@dataclass(frozen=True)
class DatabaseUrl:
    """``DATABASE_URL``, parsed; ``secret`` never printed (``repr`` leaves it out)."""

    host: str
    port: int
    user: str
    dbname: str
    params: tuple[tuple[str, str], ...] = ()
    secret: str = ""

    def __repr__(self) -> str:
        return f"{self.user}@{self.host}:{self.port}/{self.dbname}"


def read_url(environ: dict[str, str] | None = None) -> DatabaseUrl:
    """``DATABASE_URL`` from the environment, checked: one line naming what is wrong (never the password)."""
    text = (os.environ if environ is None else environ).get(VAR, "").strip()
    if not text:
        raise UserError(f"database = \"{VAR}\" but {VAR} is not set: export {VAR}={USAGE}")
    try:
        url = urlsplit(text)
        port = url.port or 5432
    except ValueError:
        raise UserError(f"{VAR} is not a URL of the form {USAGE}: check its port") from None
    if url.scheme not in ("postgresql", "postgres") or not url.hostname or not url.username:
        raise UserError(f"{VAR} must be {USAGE} (a postgresql:// URL with a user and a host)")
    dbname = unquote(url.path.lstrip("/")) or unquote(url.username)
    params = tuple((k, v) for k, v in parse_qsl(url.query) if k not in ("options", "user", "dbname", "host", "port"))
    if any(any(c.isspace() or c in "'\\" for c in k + v) for k, v in params):
        raise UserError(f"{VAR}: a query parameter holds a space, quote or backslash; give plain values")
    return DatabaseUrl(url.hostname, port, unquote(url.username), dbname, params, unquote(url.password or ""))
