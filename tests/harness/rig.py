"""The rig's shared servers (``scripts/servers.py``) outside pytest, and a namespace on each.

:func:`find`: URLs come from the ``ANARCHON_*_URL`` environment variables; if one is
missing, the rig's env file (``.servers.env``, or ``ANARCHON_SERVERS_ENV``) is read; if a
server is still missing, ``scripts/servers.py start --only <those>`` is run (it reuses
servers that answer and starts the rest), and its env file is read again. Nothing here
starts a server by itself. :func:`backend_url` gives a store's URL for one namespace
(prefix, table, stream), which :func:`tests.harness.cleanup.cleanup` removes afterwards.
The test suites find their servers through :mod:`tests.stores` (the same variables, set
by ``scripts/test.sh``).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tests.harness.cleanup import stream_for
from tests.stores.redis import url_with_prefix

ROOT = Path(__file__).resolve().parents[2]
ENV_FILE = Path(os.environ.get("ANARCHON_SERVERS_ENV") or ROOT / ".servers.env")
SERVERS = ("redis", "valkey", "postgres", "rabbitmq", "nats")
ENV_NAMES = {name: f"ANARCHON_{name.upper()}_URL" for name in SERVERS}
#: every store :func:`backend_url` knows, in table order (sqlite needs no server)
STORES = ("sqlite", "redis", "valkey", "postgres", "rabbitmq", "nats")
LEASE_STORES = ("sqlite", "redis", "valkey", "postgres")


def _read_env_file(path: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            match = re.match(r"\s*(?:export\s+)?(ANARCHON_\w+_URL)=(.*)", line)
            if match:
                found[match.group(1)] = match.group(2).strip().strip("'\"")
    return found


def mariadb_url() -> str | None:
    """``ANARCHON_MARIADB_URL`` from the environment or the rig's env file, if any."""
    return (os.environ.get("ANARCHON_MARIADB_URL")
            or _read_env_file(ENV_FILE).get("ANARCHON_MARIADB_URL"))


def _answers(url: str) -> bool:
    parts = urlsplit(url.split(",")[0])
    default = {"redis": 6379, "postgresql": 5432, "amqp": 5672, "nats": 4222}
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1",
                                       parts.port or default.get(parts.scheme, 0)), 2.0):
            return True
    except OSError:
        return False


def find(wanted: tuple[str, ...] = SERVERS, start: bool = True) -> dict[str, str]:
    """URL of every wanted server that answers (name -> URL); starts missing ones through
    ``scripts/servers.py`` when ``start``. A server that cannot be had is left out."""
    urls: dict[str, str] = {}
    from_file = _read_env_file(ENV_FILE)
    for name in wanted:
        url = os.environ.get(ENV_NAMES[name]) or from_file.get(ENV_NAMES[name])
        if url and _answers(url):
            urls[name] = url
    missing = [name for name in wanted if name not in urls]
    if missing and start:
        print(f"[rig] starting {', '.join(missing)} through scripts/servers.py",
              file=sys.stderr, flush=True)
        subprocess.run([sys.executable, str(ROOT / "scripts" / "servers.py"), "start",
                        "--only", ",".join(missing), "--env-file", str(ENV_FILE)],
                       cwd=ROOT, check=False, stdout=sys.stderr)
        from_file = _read_env_file(ENV_FILE)
        for name in missing:
            url = from_file.get(ENV_NAMES[name])
            if url and _answers(url):
                urls[name] = url
    return urls


def _with_query(url: str, **options: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query.update(options)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def backend_url(store: str, base: str | None, namespace: str, workdir: Path) -> str:
    """A backend URL (for ``anarchon.from_url``) on ``store`` in its own ``namespace``."""
    if store == "sqlite":
        return f"sqlite:///{workdir / (namespace + '.db')}?table=t_{namespace}"
    assert base is not None, store
    if store in ("redis", "valkey"):
        return url_with_prefix(base, namespace, scheme=store)
    if store == "postgres":
        return _with_query(base, table=f"t_{namespace}")
    if store == "rabbitmq":
        return _with_query(base, prefix=f"{namespace}.", slot_ttl="90s")
    if store == "nats":
        return _with_query(base, stream=stream_for(namespace), prefix=f"{namespace}.",
                           duplicate_window="90s", history_size="100")
    raise ValueError(f"unknown store {store!r}")
