"""Celery beat peers: three beats each of stock beat, celery-redbeat and anarchon_celery.

For each peer (one after the other, on the same Redis, which is also the broker):
three ``celery beat`` processes of ``benchmarks.peerapp`` with N interval entries every
``every`` seconds are started 0.3 s apart. Tasks never run; every beat appends a line per
publish (``after_task_publish``) to its own file. After the beats are up and settled,
a steady window of T seconds gives publishes per slot, missed slots, CPU per beat
(``/proc/PID/stat``) and RSS. Then the beat that published most in the last 2 s (the
lock holder for redbeat) gets ``kill -9``; the failover gap of an entry is the time from
the kill to that entry's next publish by another beat.

Missed slots: anarchon's publishes carry their slot (``anarchon_slot`` header), so its
missed slots are exact (grid slots of the window never published by anyone). Stock beat
and redbeat publish no slot and count intervals from the last run; for them a missed slot
is an interval of the epoch grid (``[k * every, (k + 1) * every)``) in which the entry was
not published by any beat. After the kill, the same rules count the slots between an
entry's last publish before the kill and its first publish by another beat.

celery-redbeat is not a dependency of anarchon: :func:`redbeat_path` installs it on demand
with ``pip install --no-deps --target`` into a cache directory (plus ``tenacity``, the one
requirement Celery does not bring), which only the redbeat beats get on ``PYTHONPATH``.

Run alone: ``python -m benchmarks.peers --peer stock --entries 100 --seconds 20``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from tests.harness.cleanup import delete_keys
from tests.harness.procs import ROOT, child_env, terminate

REDBEAT = "celery-redbeat==2.4.2"
#: requirements of celery-redbeat that Celery does not bring (redis, python-dateutil do)
REDBEAT_EXTRA = ("tenacity",)
BEATS = ("a", "b", "c")
RECENT = 2.0  # seconds before the kill that decide which beat is the active one


@dataclass(frozen=True)
class Variant:
    """One peer configuration: ``kind`` is ``stock``, ``redbeat`` or ``anarchon``."""

    label: str
    kind: str
    #: ``redbeat_lock_timeout`` (None: the default, 5 * ``beat_max_loop_interval``)
    lock_timeout: float | None = None


class Publish(NamedTuple):
    t: float
    beat: str
    entry: str
    slot: int | None
    attempt: int | None


# -- celery-redbeat on demand ------------------------------------------------------------

def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "anarchon-benchmarks"


def redbeat_path() -> Path:
    """A directory holding ``redbeat`` (and what it needs beyond Celery), installed from
    PyPI on first use with the running interpreter's pip; reused afterwards."""
    version = f"py{sys.version_info[0]}{sys.version_info[1]}"
    target = cache_dir() / f"{REDBEAT.replace('==', '-')}-{version}"
    if (target / "redbeat" / "__init__.py").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    missing = [name for name in REDBEAT_EXTRA if importlib.util.find_spec(name) is None]
    staging = Path(tempfile.mkdtemp(prefix="install-", dir=target.parent))
    try:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--disable-pip-version-check", "--no-input", "--target",
                        str(staging), REDBEAT, *missing],
                       check=True, capture_output=True, text=True, timeout=300)
        os.replace(staging, target)  # another run may have won: then keep its copy
    except OSError:
        if not (target / "redbeat" / "__init__.py").is_file():
            raise
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"pip install {REDBEAT} failed: {exc.stderr[-500:]}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


# -- processes ---------------------------------------------------------------------------

def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        rest = handle.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


class Beats:
    """Three beat processes of one variant, their logs and their cleanup."""

    def __init__(self, variant: Variant, broker: str, workdir: Path, entries: int,
                 every: float, max_loop: float, jitter: float,
                 extra_path: Path | None) -> None:
        self.variant = variant
        self.broker = broker
        self.ns = f"bpeer{uuid.uuid4().hex[:10]}"
        self.dir = workdir / self.ns
        self.dir.mkdir(parents=True)
        self.entries = entries
        self.every = every
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        conf: dict[str, Any] = {}
        self.scheduler: str | None = None
        if variant.kind == "anarchon":
            self.scheduler = "anarchon_celery:Scheduler"
            conf = {"anarchon_backend": broker, "anarchon_options": {"prefix": self.ns + ":"},
                    "anarchon_scheduler": {"jitter": jitter}}
        elif variant.kind == "redbeat":
            self.scheduler = "redbeat.RedBeatScheduler"
            conf = {"redbeat_redis_url": broker, "redbeat_key_prefix": self.ns + ":"}
            if variant.lock_timeout is not None:
                conf["redbeat_lock_timeout"] = variant.lock_timeout
        elif variant.kind != "stock":
            raise ValueError(f"unknown peer kind {variant.kind!r}")
        self.config = {"broker": broker, "queue": self.ns, "entries": entries,
                       "every": every, "max_loop_interval": max_loop, "conf": conf}
        self.extra_path = [extra_path] if extra_path is not None else []

    def start(self, name: str) -> None:
        env = child_env(*self.extra_path, ANARCHON_BENCH_PEER=json.dumps(
            {**self.config, "log": str(self.dir / f"{name}.log")}))
        args = [sys.executable, "-m", "celery", "-A", "benchmarks.peerapp", "beat",
                "-l", "WARNING", "-s", str(self.dir / f"{name}-schedule")]
        if self.scheduler:
            args += ["-S", self.scheduler]
        with (self.dir / f"{name}.out").open("wb") as out:
            self.procs[name] = subprocess.Popen(args, cwd=ROOT, env=env, stdout=out,
                                                stderr=subprocess.STDOUT)

    def publishes(self) -> list[Publish]:
        found: list[Publish] = []
        for name in self.procs:
            path = self.dir / f"{name}.log"
            if not path.exists():
                continue
            with path.open() as handle:
                for line in handle:
                    if not line.endswith("\n"):
                        continue  # still being written
                    t, task, slot, attempt = line.split()
                    found.append(Publish(float(t), name, task.rsplit(".", 1)[1],
                                         None if slot == "-" else int(slot),
                                         None if attempt == "-" else int(attempt)))
        found.sort()
        return found

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"beat {name} exited with {proc.returncode}: "
                                   + self.output(name))

    def output(self, name: str) -> str:
        path = self.dir / f"{name}.out"
        return path.read_text(errors="replace")[-1500:] if path.exists() else ""

    def wait_for(self, check: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {timeout:g}s waiting for {what}: "
                                   + " | ".join(f"{n}: {self.output(n)}" for n in self.procs))
            time.sleep(0.1)

    def stop(self) -> None:
        terminate(self.procs.values(), 10)

    def queue_length(self) -> int:
        import redis

        client = redis.Redis.from_url(self.broker)
        try:
            return int(client.llen(self.ns))
        finally:
            client.close()

    def cleanup(self) -> int:
        """Delete every key of this run (queue, kombu binding, anarchon and redbeat keys)."""
        return delete_keys(self.broker, f"*{self.ns}*")


# -- measurement -------------------------------------------------------------------------

def _empty_intervals(times: list[float], every: float, start: float, end: float) -> int:
    """Grid intervals ``[k * every, (k + 1) * every)`` wholly inside ``[start, end)`` in
    which nothing was published."""
    first, last = math.ceil(start / every), math.floor(end / every) - 1
    hit = {math.floor(t / every) for t in times}
    return sum(1 for k in range(first, last + 1) if k not in hit)


def measure(variant: Variant, broker: str, workdir: Path, entries: int = 100,
            every: float = 1.0, steady: float = 20.0, settle: float = 2.0,
            max_loop: float = 5.0, jitter: float = 0.5, extra_path: Path | None = None,
            linger: float = 2.0, takeover_wait: float | None = None) -> dict[str, Any]:
    """One peer: steady state, then ``kill -9`` of the active beat (see the module doc).

    After every entry was published again, the beats run ``linger`` more seconds; for
    anarchon, ``takeover_wait`` (seconds after the kill; lease + heartbeat + a margin)
    waits for the slots the killed beat had claimed but not published: a backup publishes
    them as attempt 2 once the lease has expired.
    """
    beats = Beats(variant, broker, workdir, entries, every, max_loop, jitter, extra_path)
    lock = (variant.lock_timeout if variant.lock_timeout is not None else 5 * max_loop) \
        if variant.kind == "redbeat" else None
    try:
        for i, name in enumerate(BEATS):
            if i:
                time.sleep(0.3)
            beats.start(name)

        def up() -> bool:
            beats.check_alive()
            publishers = {p.beat for p in beats.publishes()}
            # a redbeat standby never publishes: it waits for the lock
            return len(publishers) >= (1 if variant.kind == "redbeat" else len(BEATS))

        beats.wait_for(up, 90, "every beat publishing")
        time.sleep(settle)
        beats.check_alive()
        pids = {name: proc.pid for name, proc in beats.procs.items()}
        cpu0 = {name: _cpu_seconds(pid) for name, pid in pids.items()}
        t0 = time.time()
        time.sleep(steady)
        cpu1 = {name: _cpu_seconds(pid) for name, pid in pids.items()}
        t1 = time.time()
        rss = [r for pid in pids.values() if (r := _rss_mib(pid)) is not None]
        beats.check_alive()

        recent = Counter(p.beat for p in beats.publishes() if p.t >= t1 - RECENT)
        victim = recent.most_common(1)[0][0] if recent else BEATS[0]
        killed = time.time()
        beats.procs[victim].send_signal(signal.SIGKILL)
        beats.procs[victim].wait()
        names = {f"e{i:03d}" for i in range(entries)}

        def recovered() -> bool:
            after = {p.entry for p in beats.publishes() if p.t > killed and p.beat != victim}
            return after >= names

        recovery_timeout = (lock or 0) + 2 * max_loop + 15
        beats.wait_for(recovered, recovery_timeout, "every entry published after the kill")
        time.sleep(linger)
        if takeover_wait is not None and variant.kind == "anarchon":
            time.sleep(max(0.0, killed + takeover_wait - time.time()))
        beats.stop()
        everything = beats.publishes()
        in_queue = beats.queue_length()
    finally:
        beats.stop()
        removed = beats.cleanup()

    window = t1 - t0
    steady_pubs = [p for p in everything if t0 <= p.t < t1]
    by_entry: dict[str, list[Publish]] = defaultdict(list)
    for p in everything:
        by_entry[p.entry].append(p)
    row: dict[str, Any] = {
        "peer": variant.label, "kind": variant.kind, "beats": len(BEATS), "entries": entries,
        "every_s": every, "steady_s": round(window, 1), "lock_timeout_s": lock,
        "beat_max_loop_interval_s": max_loop,
        "jitter_s": jitter if variant.kind == "anarchon" else None,
        "publishes": len(steady_pubs),
        # publishes in the window per entry and interval
        "publishes_per_slot": round(len(steady_pubs) / (entries * window / every), 3),
        "publishing_beats": len({p.beat for p in steady_pubs}),
        "cpu_pct": {n: round(100 * (cpu1[n] - cpu0[n]) / window, 1) for n in BEATS},
        "rss_mib_max": round(max(rss), 1) if rss else None,
        "victim": victim, "logged_publishes": len(everything),
        "broker_messages": in_queue, "keys_removed": removed,
    }
    row["cpu_pct_max"] = max(row["cpu_pct"].values())
    row["cpu_pct_sum"] = round(sum(row["cpu_pct"].values()), 1)
    if variant.kind == "anarchon":
        # exact, from the slot headers: grid slots whose publish falls in the window
        step = round(every * 1000)
        first = math.ceil(t0 * 1000 / step) * step
        last = math.floor((t1 - jitter - 0.5) * 1000 / step) * step
        grid = range(first, last + 1, step)
        counts = Counter((p.entry, p.slot) for p in everything)
        expected = [(e, s) for e in names for s in grid]
        row["slots"] = len(expected)
        row["missed_slots"] = sum(1 for key in expected if counts[key] == 0)
        row["duplicate_slots"] = sum(1 for key in expected if counts[key] > 1)
        # publishes of the window's slots, whenever they happened (the window count
        # above depends on where jitter put the publishes near the window's edges)
        row["publishes_per_entry_second"] = row["publishes_per_slot"]
        row["publishes_per_slot"] = round(sum(counts[k] for k in expected) / len(expected), 3)
    else:
        row["slots"] = round(entries * window / every)
        row["duplicate_slots"] = None
    # the same rule for every peer (for anarchon a late publish can count as an empty
    # interval followed by a double one; its missed_slots above are exact)
    row["empty_intervals"] = sum(_empty_intervals([p.t for p in by_entry.get(e, [])],
                                                  every, t0, t1) for e in names)
    if variant.kind != "anarchon":
        row["missed_slots"] = row["empty_intervals"]

    gaps: list[float] = []
    missed_after = 0
    for entry in sorted(names):
        ps = by_entry.get(entry, [])
        before = [p for p in ps if p.t <= killed]
        after = [p for p in ps if p.t > killed and p.beat != victim]
        if not after:
            continue
        gaps.append(after[0].t - killed)
        if variant.kind == "anarchon":
            done = {p.slot for p in ps}
            low = max((p.slot for p in before if p.slot is not None), default=None)
            high = after[0].slot
            if low is not None and high is not None:
                step = round(every * 1000)
                missed_after += sum(1 for s in range(low + step, high, step) if s not in done)
        elif before:
            missed_after += max(0, math.floor(after[0].t / every)
                                - math.floor(before[-1].t / every) - 1)
    late = [p.t - killed for p in everything if (p.attempt or 1) > 1]
    first_attempts = {(p.entry, p.slot) for p in everything if p.attempt == 1}
    row["late_duplicates"] = sum(1 for p in everything if (p.attempt or 1) > 1
                                 and (p.entry, p.slot) in first_attempts)
    row.update({
        "observed_after_kill_s": round(max((p.t for p in everything), default=killed)
                                       - killed, 1),
        "late_publishes": len(late),  # anarchon: attempt >= 2 (a backup, after the lease)
        "late_max_s": round(max(late), 3) if late else None,
        "failover_first_s": round(min(gaps), 3) if gaps else None,
        "failover_p50_s": round(statistics.median(gaps), 3) if gaps else None,
        "failover_max_s": round(max(gaps), 3) if gaps else None,
        "missed_after_kill": missed_after,
    })
    return row


def main(argv: list[str] | None = None) -> int:
    from tests.harness import rig

    parser = argparse.ArgumentParser(description="one Celery beat peer row")
    parser.add_argument("--peer", choices=("stock", "redbeat", "anarchon"), default="stock")
    parser.add_argument("--lock-timeout", type=float)
    parser.add_argument("--entries", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--max-loop-interval", type=float, default=5.0,
                        help="beat_max_loop_interval (Celery's own default is 300: redbeat's "
                             "default lock is then 1,500 s and its failover ~25 minutes)")
    parser.add_argument("--broker", help="Redis URL (default: the rig's Redis)")
    args = parser.parse_args(argv)
    broker = args.broker or rig.find(("redis",)).get("redis")
    if broker is None:
        parser.error("no Redis: give --broker")
    extra = redbeat_path() if args.peer == "redbeat" else None
    with tempfile.TemporaryDirectory(prefix="anarchon-peers-") as tmp:
        row = measure(Variant(args.peer, args.peer, args.lock_timeout), broker, Path(tmp),
                      entries=args.entries, steady=args.seconds,
                      max_loop=args.max_loop_interval, extra_path=extra)
    print(json.dumps(row, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
