"""Starting and stopping the rig's own server copies (``scripts/servers.py``).

Each ``start_*`` puts one server on a free loopback port in a folder of the rig's work
directory and returns what to record to stop it again. Standard library only.
"""

from __future__ import annotations

import functools
import os
import pwd
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rig_common import (
    HOST,
    RigError,
    epmd_binary,
    find_binary,
    free_port,
    log_tail,
    mariadb_binaries,
    nats_binary,
    port_busy,
    postgres_bin_dirs,
    postgres_binaries,
    probe_mariadb,
    probe_nats,
    probe_postgres,
    probe_rabbitmq,
    probe_redis,
    probe_redis_cluster,
    rabbitmq_server_binary,
    redis_binaries,
    user_exists,
    valkey_binary,
    wait_until,
)


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
                           f"{log_tail(create_log)}")
        for port in ports:
            wait_until(f"redis cluster node {port} (cluster_state:ok)",
                       functools.partial(probe_redis_cluster, port), 30, create_log)
    except BaseException:
        stop_started(started)
        raise
    return started


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
        raise RigError(f"initdb failed; see {logfile}{log_tail(logfile)}")
    options = (f"-p {port} -k {directory} -c listen_addresses={HOST} -c fsync=off "
               "-c synchronous_commit=off -c full_page_writes=off -c max_connections=400")
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
                       f"{log_tail(directory / 'postgres.log')}")
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


def start_mariadb(work: Path) -> Started:
    server, install_db, client = mariadb_binaries()
    port = free_port()
    directory = work / "mariadb"
    data = directory / "data"
    data.mkdir(parents=True, exist_ok=True)
    sock = directory / "mysqld.sock"
    logfile = directory / "server.log"
    user = ("mysql" if os.geteuid() == 0 and user_exists("mysql")
            else pwd.getpwuid(os.geteuid()).pw_name)
    os.chmod(work, 0o755)
    chown_tree(directory, user)
    with open(logfile, "ab") as out:
        result = subprocess.run([install_db, "--no-defaults", f"--datadir={data}",
                                 f"--user={user}", "--auth-root-authentication-method=normal",
                                 "--skip-test-db"], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise RigError(f"mariadb-install-db failed; see {logfile}{log_tail(logfile)}")
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
                           f"{log_tail(logfile)}")
        wait_until("mariadb", lambda: probe_mariadb(port), 30, logfile, proc)
    except BaseException:
        stop_started(started)
        raise
    return started


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
    user = "rabbitmq" if os.geteuid() == 0 and user_exists("rabbitmq") else None
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


STARTERS: dict[str, Callable[[Path], Started]] = {
    "redis": start_redis, "valkey": start_valkey, "postgres": start_postgres,
    "mariadb": start_mariadb, "rabbitmq": start_rabbitmq, "nats": start_nats,
    "redis-cluster": start_redis_cluster,
}


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
