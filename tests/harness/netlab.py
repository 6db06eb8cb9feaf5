"""A private network for network-fault tests: each instance in a namespace of its own.

A *hub* namespace holds a bridge (``10.77.0.1/24``) and the store server the test starts
there; each instance namespace is linked to the bridge by a veth pair (the instance's end
is ``eth0``, ``10.77.0.N/24``). Every address exists only inside these namespaces, so
tests running side by side cannot collide and nothing reaches a host network; the same
setup works in CI's ``unshare --net`` (only loopback up). :meth:`NetLab.cut` takes the
hub's end of an instance's link down: its peer loses carrier and every packet either way
is dropped silently (a partition, not a refused connection); :meth:`NetLab.heal` brings
it back and open TCP connections carry on.

The test process cannot reach the hub: it reads the store through ``python -m
tests.harness.netlab`` run inside the hub (:meth:`NetLab.history`).

Needs root and ``ip`` (iproute2) with veth and bridge support; :func:`lab_missing` says
what is absent.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.harness.servers import _as_postgres, postgres_binary, valkey_binary

ROOT = Path(__file__).resolve().parents[2]
SUBNET = "10.77.0"
HUB_ADDRESS = f"{SUBNET}.1"


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def lab_missing() -> str | None:
    """Why namespaces cannot be made here (not root, no ``ip``), or ``None``."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the ip command (iproute2)"
    return None


class NetLab:
    """A hub namespace with a bridge and one linked namespace per instance."""

    def __init__(self, instances: tuple[str, ...]) -> None:
        self.tag = "a34" + secrets.token_hex(3)
        self.hub = f"{self.tag}-hub"
        self.spaces: dict[str, str] = {}
        self.addresses: dict[str, str] = {}
        self._made: list[str] = []
        try:
            self._add(self.hub)
            _ip("-n", self.hub, "link", "set", "lo", "up")
            _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.hub, "addr", "add", f"{HUB_ADDRESS}/24", "dev", "br0")
            _ip("-n", self.hub, "link", "set", "br0", "up")
            for number, instance in enumerate(instances, start=2):
                self.link(instance, number)
        except BaseException:
            self.close()
            raise

    def _add(self, name: str) -> None:
        _ip("netns", "add", name)
        self._made.append(name)

    def link(self, instance: str, number: int) -> None:
        space = f"{self.tag}-{instance}"
        self._add(space)
        port = self.port(instance)
        _ip("link", "add", port, "netns", self.hub, "type", "veth", "peer", "name", "eth0",
            "netns", space)
        _ip("-n", self.hub, "link", "set", port, "master", "br0")
        _ip("-n", self.hub, "link", "set", port, "up")
        _ip("-n", space, "link", "set", "lo", "up")
        address = f"{SUBNET}.{number}"
        _ip("-n", space, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", space, "link", "set", "eth0", "up")
        self.spaces[instance] = space
        self.addresses[instance] = address

    @staticmethod
    def port(instance: str) -> str:
        return f"p-{instance}"[:15]

    def wrapper(self, instance: str) -> list[str]:
        """The command prefix that runs a program in ``instance``'s namespace."""
        return ["ip", "netns", "exec", self.spaces[instance]]

    def in_hub(self) -> list[str]:
        return ["ip", "netns", "exec", self.hub]

    def cut(self, instance: str) -> None:
        """Partition ``instance``: every packet to or from it is dropped from now on."""
        _ip("-n", self.hub, "link", "set", self.port(instance), "down")

    def heal(self, instance: str) -> None:
        _ip("-n", self.hub, "link", "set", self.port(instance), "up")

    def hub_python(self, *args: str, env: dict[str, str] | None = None,
                   timeout: float = 60) -> str:
        """``python -m tests.harness.netlab ARGS`` in the hub; its stdout."""
        path = os.environ.get("PYTHONPATH", "")
        done = subprocess.run(
            [*self.in_hub(), sys.executable, "-m", "tests.harness.netlab", *args], cwd=ROOT,
            env={**os.environ, **(env or {}),
                 "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")},
            capture_output=True, text=True, timeout=timeout)
        if done.returncode:
            raise RuntimeError(f"netlab {args[0]} in the hub failed: {done.stderr[-2000:]}")
        return done.stdout

    def wait_port(self, port: int, timeout: float = 15) -> None:
        self.hub_python("wait", HUB_ADDRESS, str(port), str(timeout), timeout=timeout + 10)

    def history(self, url: str, job: str, django: dict[str, Any] | None = None
                ) -> list[dict[str, Any]]:
        """The store's run records of ``job`` (as dicts), read from inside the hub."""
        out = self.hub_python("history", url, job, json.dumps(django or {}))
        records: list[dict[str, Any]] = json.loads(out)
        return records

    def close(self) -> None:
        for name in reversed(self._made):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        self._made.clear()


class HubRedis:
    """redis-server or valkey-server in the hub, on the bridge's address only."""

    def __init__(self, lab: NetLab, kind: str, folder: Path) -> None:
        binary = shutil.which("redis-server") if kind == "redis" else valkey_binary()
        if binary is None:
            raise FileNotFoundError(f"a {kind} server binary")
        self.port = 6379
        log = (folder / "hub-server.log").open("ab")
        try:
            self.proc = subprocess.Popen(
                [*lab.in_hub(), binary, "--port", str(self.port), "--bind", HUB_ADDRESS,
                 "--protected-mode", "no", "--save", "", "--appendonly", "no",
                 "--dir", str(folder)], stdout=log, stderr=subprocess.STDOUT)
        finally:
            log.close()
        self.url = f"{'valkey' if kind == 'valkey' else 'redis'}://{HUB_ADDRESS}:{self.port}/0"
        lab.wait_port(self.port)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


class HubPostgres:
    """A PostgreSQL cluster (initdb) in the hub, listening on the bridge's address."""

    def __init__(self, lab: NetLab) -> None:
        initdb, pg_ctl = postgres_binary("initdb"), postgres_binary("pg_ctl")
        if initdb is None or pg_ctl is None:
            raise FileNotFoundError("initdb/pg_ctl (python scripts/servers.py install)")
        self.lab, self.pg_ctl = lab, pg_ctl
        self.folder = Path(tempfile.mkdtemp(prefix="anarchon-netlab-pg-"))
        self.folder.chmod(0o755)
        self.data = self.folder / "data"
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres")
        subprocess.run(_as_postgres([initdb, "-D", str(self.data), "-A", "trust", "-U",
                                     "postgres", "--no-sync"]), check=True,
                       capture_output=True)
        with (self.data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {SUBNET}.0/24 trust\n")
        self.port = 5432
        subprocess.run([*lab.in_hub(), *_as_postgres([
            pg_ctl, "-D", str(self.data), "-o",
            f"-p {self.port} -k {self.folder} -c listen_addresses={HUB_ADDRESS} "
            "-c fsync=off", "-l", str(self.folder / "server.log"), "-w", "start"])],
            check=True, capture_output=True)
        self.url = f"postgresql://postgres@{HUB_ADDRESS}:{self.port}/postgres"

    def close(self) -> None:
        subprocess.run([*self.lab.in_hub(), *_as_postgres([
            self.pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop"])],
            capture_output=True)
        shutil.rmtree(self.folder, ignore_errors=True)


# -- run inside the hub: python -m tests.harness.netlab COMMAND ... -----------------------

def _wait(host: str, port: str, timeout: str) -> None:
    import socket

    deadline = time.monotonic() + float(timeout)
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"nothing listens on {host}:{port}") from None
            time.sleep(0.05)


def _history(url: str, job: str, django: str) -> None:
    from anarchon import AsyncScheduler, from_url

    aliases = json.loads(django)
    if aliases:
        from tests.harness.django_stores import use

        use(aliases)

    async def read() -> Any:
        scheduler = AsyncScheduler(from_url(url))
        try:
            return await scheduler.history(job, 1000)
        finally:
            await scheduler.stop()

    records = asyncio.run(read())
    print(json.dumps([dict(attempt=r.attempt, status=r.status, slot=r.slot,
                           instance=r.instance_id, reason=r.reason, manual=r.manual)
                      for r in records], default=str))


def _django(namespace: str) -> None:
    """Migrate a Django store for ``namespace`` on ``ANARCHON_POSTGRES_URL``; prints
    ``{"url": ..., "aliases": ...}``."""
    from tests.harness.django_stores import aliases_of, prepare

    url = prepare("postgres", namespace)
    print(json.dumps(dict(url=url, aliases=aliases_of(url))))


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    if command == "wait":
        _wait(*rest)
    elif command == "history":
        _history(*rest)
    else:
        _django(*rest)
