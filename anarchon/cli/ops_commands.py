"""``anarchon health`` and ``anarchon doctor``: probes and diagnosis for operators.

``health`` exits 0 when this host's instance is alive in the store (its liveness record,
judged by the store's clock), for exec probes. "This host's instance" is, in order:
``--instance ID`` (the scheduler's ``instance_id``); ``--pid-file PATH`` (the record of
this host name and the pid in the file); else any record of this host name
(``socket.gethostname()``: one instance per container or pod). Exit 0 alive, 1 not alive,
no record or the store does not answer, 2 usage error.

``doctor`` checks a store, one line each (``OK``, ``WARN`` or ``FAIL``): reachability,
latency, the format version the store records against the one this anarchon needs
(read before opening it: opening refuses another format), clock offset against the store,
the calls an instance makes (reads, a liveness record written and removed: the
permissions the store needs) and the live instances' versions. Exit 0 all OK, 1 a
warning, 3 a failure (2 stays the usage error).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..backends import Backend
from ..backends.capabilities import FormatStore, LivenessStore
from ..backends.formats import StoredFormat
from ..backends.liveness import InstanceInfo, InstanceRecord, Instances
from ..engine.liveness import package_version
from .failures import UsageFailure, describe

COMMANDS = ("health", "doctor")
#: doctor's thresholds: round trip (p50) and clock offset that earn a warning, and the
#: offset that fails (leases and the early-claim guard assume clocks within a lease)
SLOW_MS = 50.0
SKEW_WARN_MS = 250.0
SKEW_FAIL_MS = 2000.0
EXIT = {"OK": 0, "WARN": 1, "FAIL": 3}


def add_parsers(commands: Any, store: argparse.ArgumentParser) -> None:
    health = commands.add_parser(
        "health", parents=[store], help="exit 0 when this host's instance is alive",
        description="Exit 0 when this host's instance is alive in the store (for exec "
                    "probes): the record of --instance ID, else of this host and the pid "
                    "in --pid-file, else any record of this host name. Exit 1 otherwise.")
    which = health.add_mutually_exclusive_group()
    which.add_argument("--instance", help="the instance id (Scheduler(instance_id=...))")
    which.add_argument("--pid-file", help="a file holding the instance's process id")
    health.add_argument("--quiet", action="store_true", help="print nothing")
    doctor = commands.add_parser(
        "doctor", parents=[store], help="check a store: reachability, latency, clock, "
                                        "permissions, format, instances' versions")
    doctor.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace, backend: Backend) -> int:
    if args.command == "health":
        return _health(args, backend)
    lines = asyncio.run(doctor(backend))
    print(render(lines, args.json))
    return severity(lines)


def render(lines: list[Line], as_json: bool) -> str:
    """Doctor's lines as text (``LEVEL  check  detail``) or JSON."""
    if as_json:
        return json.dumps([{"level": lv, "check": c, "detail": d} for lv, c, d in lines],
                          indent=2)
    return "\n".join(f"{level:4}  {check:10}  {detail}" for level, check, detail in lines)


def severity(lines: list[Line]) -> int:
    """The exit status: 0 all OK, 1 a warning, 3 a failure."""
    return max(EXIT[level] for level, _, _ in lines)


def _health(args: argparse.Namespace, backend: Backend) -> int:
    if not isinstance(backend, LivenessStore):
        raise UsageFailure(f"backend {backend.name} keeps no liveness records: "
                           "anarchon health needs a lease store")
    pid: int | None = None
    if args.pid_file:
        try:
            with open(args.pid_file, encoding="utf-8") as f:
                pid = int(f.read().strip())
        except (OSError, ValueError) as exc:
            print(f"not healthy: cannot read a pid from {args.pid_file}: {exc}")
            return 1
    try:
        seen = asyncio.run(_instances(backend))
    except Exception as exc:
        if not args.quiet:
            print(f"not healthy: {describe(exc, args.backend)}")
        return 1
    host = socket.gethostname()
    mine = [r for r in seen.records
            if (r.id == args.instance if args.instance
                else r.host == host and (pid is None or r.pid == pid))]
    alive = [r for r in mine if r.alive(seen.now_ms)]
    wanted = (f"instance {args.instance}" if args.instance else
              f"host {host} pid {pid}" if pid is not None else f"host {host}")
    if not args.quiet:
        if alive:
            print(f"healthy: {', '.join(r.id for r in alive)} alive "
                  f"(last seen {(seen.now_ms - alive[0].last_seen_ms) / 1000:.1f}s ago)")
        elif mine:
            print(f"not healthy: {wanted} last seen "
                  f"{(seen.now_ms - mine[0].last_seen_ms) / 1000:.1f}s ago")
        else:
            print(f"not healthy: no liveness record of {wanted}")
    return 0 if alive else 1


async def _instances(backend: LivenessStore) -> Instances:
    try:
        return await backend.instances()
    finally:
        await backend.close()


Line = tuple[str, str, str]


async def doctor(backend: Backend) -> list[Line]:
    """The checks, one line each: (level, check, detail)."""
    lines: list[Line] = []
    found: StoredFormat | None = None
    try:
        started = time.monotonic()
        if isinstance(backend, FormatStore):  # before open(), which refuses another format
            found = await backend.stored_format()
        if found is None or found.usable:
            await backend.open()
            await backend.known_jobs()
        lines.append(("OK", "reachable", f"{backend.name} answered in "
                      f"{(time.monotonic() - started) * 1000:.0f} ms"))
    except Exception as exc:
        lines.append(("FAIL", "reachable", describe(exc, None)))
        await _close(backend)
        return lines
    if found is not None:
        lines.append(_format(found))
        if not found.usable:
            await _close(backend)
            return lines
    try:
        await _checks(backend, lines)
    except Exception as exc:
        lines.append(("FAIL", "store", describe(exc, None)))
    finally:
        await backend.close()
    return lines


async def _timed(call: Callable[[], Awaitable[Any]]) -> tuple[float, float, Any]:
    before = time.time()
    answer = await call()
    return before, time.time(), answer


async def _checks(backend: Backend, lines: list[Line]) -> None:
    if not isinstance(backend, LivenessStore):
        rounds = [await _timed(backend.known_jobs) for _ in range(5)]
        p50 = statistics.median((b - a) * 1000 for a, b, _ in rounds)
        lines.append(("WARN" if p50 > SLOW_MS else "OK", "latency",
                      f"p50 {p50:.1f} ms over 5 reads"))
        lines.append(("WARN", "clock", f"{backend.name} keeps no liveness records: "
                      "clock offset and instances not checked"))
        return
    rounds = [await _timed(backend.instances) for _ in range(5)]
    p50 = statistics.median((b - a) * 1000 for a, b, _ in rounds)
    lines.append(("WARN" if p50 > SLOW_MS else "OK", "latency",
                  f"p50 {p50:.1f} ms over 5 reads"))
    best = min(rounds, key=lambda r: r[1] - r[0])
    offset = best[2].now_ms - (best[0] + best[1]) / 2 * 1000
    level = ("FAIL" if abs(offset) > SKEW_FAIL_MS else
             "WARN" if abs(offset) > SKEW_WARN_MS else "OK")
    lines.append((level, "clock", f"this host is {-offset:+.0f} ms off the store's clock "
                  f"(±{(best[1] - best[0]) * 500:.0f} ms)"))
    probe = f"anarchon-doctor:{socket.gethostname()}:{time.time_ns()}"
    info = InstanceInfo(probe, socket.gethostname(), 0, package_version(), 0, 0)
    try:
        await backend.heartbeat_live(probe, [], [], 1000, info, 1000)
        await backend.leave(probe)
        await backend.known_jobs()
        lines.append(("OK", "rights", "read jobs, wrote and removed a liveness record "
                      "(the calls an instance makes)"))
    except Exception as exc:
        lines.append(("FAIL", "rights", describe(exc, None)))
    seen: Instances = rounds[-1][2]
    alive = [r for r in seen.records if r.alive(seen.now_ms)]
    lines.append(_versions(alive, len(seen.records)))


def _format(found: StoredFormat) -> Line:
    need = f"this anarchon ({package_version()}) needs format {found.expected}"
    if found.stored == found.expected:
        return "OK", "format", f"{found.where}: format {found.stored}; {need}"
    if found.stored is None and found.created_on_use:
        return ("WARN", "format", f"{found.where}: no format recorded, nothing had used "
                "this namespace (a wrong prefix or table?); the first instance records "
                f"format {found.expected}")
    stored = "no format recorded" if found.stored is None else f"format {found.stored}"
    return ("FAIL", "format", f"{found.where}: {stored}, but {need}: its instances refuse "
            f"this store; {found.remedy}")


async def _close(backend: Backend) -> None:
    try:
        await backend.close()
    except Exception:  # the failure is reported already
        pass


def _versions(alive: list[InstanceRecord], total: int) -> Line:
    mine = package_version()
    versions = sorted({r.version for r in alive})
    detail = (f"{len(alive)} alive of {total} recorded; versions "
              f"{', '.join(versions) or '-'} (this command: {mine})")
    if not alive:
        return "WARN", "instances", detail
    return ("WARN" if len(versions) > 1 or versions != [mine] else "OK"), "instances", detail


__all__ = ["COMMANDS", "Line", "add_parsers", "doctor", "render", "run", "severity"]
