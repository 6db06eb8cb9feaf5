"""NATS behaves like every other store (issue 34, item 6).

* ``anarchon jobs`` against a port where nothing listens exits 1 with one line, no
  traceback, within the backend's ``timeout``; ``start()`` raises ``StoreError`` as fast.
* ``run()`` (``start(wait=True)``) waits: a NATS server started later on that port is
  used, and a job runs.
* A one-shot read creates nothing: after ``anarchon jobs`` and ``history`` the stream does
  not exist.
* A second ``stream=`` with another stream's prefix fails naming the stream that takes
  the subjects and the options to change, and the command says so (no "unexpected").
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from anarchon import AsyncScheduler, Scheduler, from_url
from anarchon.backends.base import JobSpec
from anarchon.cli.failures import describe
from anarchon.errors import IncompatibleStoreError, StoreError
from tests.conftest import _require
from tests.harness.servers import HOST, _wait_port, free_port
from tests.stores import nats as store
from tests.support import run

nats = pytest.importorskip("nats")



def _cli(*args: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess[str], float]:
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "anarchon", *args], capture_output=True,
                          text=True, timeout=timeout)
    return done, time.monotonic() - began


def test_one_shot_command_fails_fast_with_one_line() -> None:
    url = f"nats://{HOST}:{free_port()}?timeout=2s"
    done, took = _cli("jobs", "--backend", url)
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "cannot use the store: cannot connect to NATS" in lines[0], lines
    assert "Refused" in lines[0] or "refused" in lines[0], lines
    assert "Traceback" not in done.stderr
    assert took < 2 + 3, took  # the timeout, plus the interpreter's start


def test_start_raises_store_error_within_the_timeout() -> None:
    scheduler = Scheduler(from_url(f"nats://{HOST}:{free_port()}?timeout=2s"))
    scheduler.every("job", "1h", lambda ctx: None)
    began = time.monotonic()
    with pytest.raises(StoreError, match="cannot connect to NATS"):
        scheduler.start()
    took = time.monotonic() - began
    scheduler.close()
    assert took < 2.0, took


class ThrowawayNats:
    """A JetStream NATS server of our own on ``port`` (data under ``folder``)."""

    def __init__(self, port: int, folder: Path) -> None:
        binary = shutil.which("nats-server") or "/usr/sbin/nats-server"
        if not Path(binary).exists():
            pytest.fail("nats-server is not installed (scripts/servers.py install)")
        self.proc = subprocess.Popen(
            [binary, "-a", HOST, "-p", str(port), "-js", "-sd", str(folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_port(port, 20, "nats-server")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def test_run_waits_until_nats_answers(tmp_path: Path) -> None:
    port = free_port()
    url = f"nats://{HOST}:{port}?timeout=2s&stream=LATE&prefix=late.&duplicate_window=90s"

    async def scenario() -> None:
        scheduler = AsyncScheduler(from_url(url))
        ran = asyncio.Event()
        scheduler.every("job", "0.5s", lambda ctx: ran.set(), jitter=0)
        waiting = asyncio.create_task(scheduler.start(wait=True))
        await asyncio.sleep(1.5)  # the fault: nothing listens for 1.5 s
        assert not waiting.done(), "start(wait=True) gave up instead of waiting"
        server = await asyncio.to_thread(ThrowawayNats, port, tmp_path)
        try:
            await asyncio.wait_for(waiting, 30)  # retries back off up to 10 s
            await asyncio.wait_for(ran.wait(), 10)
        finally:
            await scheduler.stop()
            await asyncio.to_thread(server.close)

    run(scenario())


@pytest.fixture
def namespace() -> Iterator[str]:
    _require(store.STORE)
    name = "nu_" + uuid.uuid4().hex[:10]
    yield name
    run(store.cleanup(name, []))


async def _stream_exists(stream: str) -> bool:
    client = await nats.connect(store.BASE_URL)
    try:
        await client.jetstream().stream_info(stream)
        return True
    except nats.js.errors.NotFoundError:
        return False
    finally:
        await client.close()


def test_one_shot_reads_create_nothing(namespace: str) -> None:
    url = store.url_for(namespace)
    done, _ = _cli("jobs", "--backend", url)
    assert done.returncode == 0, done.stderr
    done, _ = _cli("history", "job", "--backend", url)
    assert done.returncode == 1 and "unknown job 'job'" in done.stderr, done.stderr
    assert not run(_stream_exists(store.stream_for(namespace)))


def test_a_second_stream_on_the_same_prefix_names_the_options(namespace: str) -> None:
    url = store.url_for(namespace)
    other = f"{store.stream_for(namespace)}_B"

    async def scenario() -> str:
        first = from_url(url)
        await first.register([JobSpec("job", "every", "every 1s")])
        await first.close()
        second = from_url(url, stream=other)
        with pytest.raises(IncompatibleStoreError) as caught:
            await second.register([JobSpec("job", "every", "every 1s")])
        await second.close()
        message = str(caught.value)
        assert f"stream {store.stream_for(namespace)!r} already takes" in message, message
        assert "prefix=" in message and "stream=" in message, message
        return message

    message = run(scenario())
    assert not run(_stream_exists(other))
    # what a command prints for it: the problem, not "unexpected IncompatibleStoreError"
    line = describe(IncompatibleStoreError(message), url)
    assert "the store does not fit this configuration: cannot create" in line, line
    assert "unexpected" not in line
