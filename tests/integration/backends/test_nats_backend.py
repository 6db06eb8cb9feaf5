"""NatsBackend against a real JetStream server: de-duplication, lost acks, the stream.

The server comes from ``tests/stores/nats.py`` (``ANARCHON_NATS_URL``); a missing server
skips locally and fails in CI. Construction tests need no server.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from anarchon import AsyncScheduler, Scheduler
from anarchon.backends import from_url
from anarchon.backends.base import Finish, JobSpec, LeaseBackend
from anarchon.backends.nats import NatsBackend
from anarchon.errors import IncompatibleStoreError, StoreError
from tests.conftest import _require
from tests.stores import nats as store
from tests.support import EventLog, now_ms, run
from tests.support import claim_only_request as request

nats = pytest.importorskip("nats")


@pytest.fixture
def namespace() -> Iterator[str]:
    _require(store.STORE)
    name = "nt_" + uuid.uuid4().hex[:10]
    yield name
    run(store.cleanup(name, []))


def backend_for(namespace: str, **options: Any) -> NatsBackend:
    backend = from_url(store.url_for(namespace), **options)
    assert isinstance(backend, NatsBackend)
    return backend


async def stream_config(namespace: str) -> Any:
    client = await nats.connect(store.BASE_URL)
    try:
        return (await client.jetstream().stream_info(store.stream_for(namespace))).config
    finally:
        await client.close()


# -- construction (no server needed) --------------------------------------------------------

def test_construction_does_no_io_and_parses_urls() -> None:
    backend = NatsBackend.from_url("nats://u:secret@127.0.0.1:1?stream=S1&prefix=app"
                                   "&duplicate_window=2m&history_size=7&replicas=3")
    assert (backend.stream, backend.prefix, backend.duplicate_window, backend.history_size,
            backend.replicas) == ("S1", "app.", 120.0, 7, 3)
    assert backend.run_subject("job") == "app.run.job"
    assert "secret" not in repr(backend)
    assert not isinstance(backend, LeaseBackend) and "history_ttl" in backend.refused_options()


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="stream"):
        NatsBackend(stream="a.b")
    with pytest.raises(ValueError, match="prefix"):
        NatsBackend(prefix="a b")
    with pytest.raises(ValueError, match="history_size"):
        NatsBackend(history_size=0)
    with pytest.raises(TypeError, match="replicas"):
        NatsBackend(replicas="3")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="nats-py client"):
        NatsBackend(42)


def test_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nats", None)
    with pytest.raises(ImportError, match=r'pip install "anarchon\[nats\]"'):
        NatsBackend()


def test_jobs_are_checked_when_added() -> None:
    scheduler = Scheduler(NatsBackend(duplicate_window="30s"))
    with pytest.raises(ValueError, match=r"'a\.b'.*nats"):
        scheduler.every("a.b", "1s", lambda ctx: None)
    with pytest.raises(ValueError, match="duplicate_window"):
        scheduler.every("tick", "1s", lambda ctx: None, jitter=2, max_late=28)
    with pytest.raises(TypeError, match=r"catch_up.*nats"):
        scheduler.every("tick", "1s", lambda ctx: None, catch_up=10)
    scheduler.every("tick", "1s", lambda ctx: None, jitter=2, max_late=27)


# -- against the server ---------------------------------------------------------------------

def test_stream_with_a_shorter_window_is_refused_not_altered(namespace: str) -> None:
    async def scenario() -> None:
        client = await nats.connect(store.BASE_URL)
        js = client.jetstream()
        await js.add_stream(name=store.stream_for(namespace), duplicate_window=10,
                            subjects=[f"{namespace}.run.*", f"{namespace}.job.*"])
        backend = backend_for(namespace)  # duplicate_window 90s
        with pytest.raises(IncompatibleStoreError, match="duplicate_window 10s"):
            await backend.open()
        await backend.close()
        assert (await stream_config(namespace)).duplicate_window == 10
        await client.close()

    run(scenario())


def test_stream_without_our_subjects_is_refused(namespace: str) -> None:
    async def scenario() -> None:
        client = await nats.connect(store.BASE_URL)
        await client.jetstream().add_stream(name=store.stream_for(namespace),
                                            duplicate_window=300, subjects=[f"{namespace}.x"])
        backend = backend_for(namespace)
        with pytest.raises(IncompatibleStoreError, match="does not take subjects"):
            await backend.open()
        await backend.close()
        await client.close()

    run(scenario())


def test_stream_created_with_options_and_history_size_only_grows(namespace: str) -> None:
    async def scenario() -> None:
        backend = backend_for(namespace, history_size=5)
        await backend.open()  # a read creates nothing; the first write creates the stream
        with pytest.raises(nats.js.errors.NotFoundError):
            await stream_config(namespace)
        await backend.register([JobSpec("job", "every", "every 1s")])
        config = await stream_config(namespace)
        assert (config.duplicate_window, config.max_msgs_per_subject, config.num_replicas) == (
            90, 10, 1)
        slot = now_ms()
        await backend.claim(request(slot, "a"))
        await backend.finish(Finish("job", slot, "a", 1, "success", None, 20, None, 0))
        assert (await stream_config(namespace)).max_msgs_per_subject == 40
        smaller = backend_for(namespace, history_size=2)
        await smaller.open()  # never lowers it
        assert (await stream_config(namespace)).max_msgs_per_subject == 40
        await smaller.close()
        await backend.close()

    run(scenario())


def test_claim_remembered_after_its_record_was_trimmed(namespace: str) -> None:
    async def scenario() -> None:
        backend = backend_for(namespace, history_size=1)  # keeps 2 messages per job
        await backend.open()
        slot = now_ms()
        assert (await backend.claim(request(slot, "a"))).outcome == "won"
        for n in range(1, 4):
            await backend.claim(request(slot + n, "a"))
        assert all(r.slot != slot for r in await backend.history("job", 10))
        assert (await backend.claim(request(slot, "b"))).outcome == "taken"
        await backend.close()

    run(scenario())


def _ack_lost_once(backend: NatsBackend, land: bool) -> list[int]:
    """Make the first publish fail as if its ack were lost (after landing if ``land``)."""
    real = backend._publish
    calls: list[int] = []

    async def publish(subject: str, payload: bytes, headers: dict[str, str]) -> Any:
        calls.append(1)
        if len(calls) == 1:
            if land:
                await real(subject, payload, headers)
            raise StoreError("simulated: ack lost")
        return await real(subject, payload, headers)

    backend._publish = publish  # type: ignore[method-assign]
    return calls


def test_lost_ack_retry_reads_the_owner_back(namespace: str) -> None:
    async def scenario() -> None:
        mine, other = backend_for(namespace), backend_for(namespace)
        await mine.open()
        await other.open()
        slot = now_ms()
        calls = _ack_lost_once(mine, land=True)  # our first publish landed
        assert (await mine.claim(request(slot, "a"))).outcome == "won"
        assert len(calls) == 2
        slot2 = slot + 1
        assert (await other.claim(request(slot2, "b"))).outcome == "won"
        _ack_lost_once(mine, land=False)  # someone else's claim is stored: not ours
        assert (await mine.claim(request(slot2, "a"))).outcome == "taken"
        [record] = [r for r in await other.history("job", 10) if r.slot == slot]
        assert record.instance_id == "a"
        await mine.close()
        await other.close()

    run(scenario())


def test_publish_failing_twice_raises_and_confirm_reads_back(namespace: str) -> None:
    async def scenario() -> None:
        backend = backend_for(namespace)
        await backend.open()
        real = backend._publish

        async def land_then_fail(subject: str, payload: bytes, headers: dict[str, str]) -> Any:
            await real(subject, payload, headers)
            raise StoreError("simulated: ack lost")

        backend._publish = land_then_fail  # type: ignore[method-assign]
        slot = now_ms()
        with pytest.raises(StoreError, match="lost twice"):
            await backend.claim(request(slot, "a"))
        fresh = backend_for(namespace)
        assert await fresh.confirm(request(slot, "a")) == 1  # stored with our owner
        assert await fresh.confirm(request(slot, "b")) == 0
        assert await fresh.confirm(request(slot + 1, "a")) == 0  # nothing stored
        await fresh.close()
        await backend.close()

    run(scenario())


def test_unconfirmed_claim_emits_error_and_never_runs(namespace: str) -> None:
    log = EventLog()
    starts: list[int] = []

    async def scenario() -> None:
        backend = backend_for(namespace)

        async def broken(subject: str, payload: bytes, headers: dict[str, str]) -> Any:
            raise StoreError("simulated: connection dropped mid-publish")

        scheduler = log.attach(AsyncScheduler(backend, instance_id="a", jitter=0.05))
        scheduler.every("tick", "1s", lambda ctx: starts.append(ctx.slot))
        await scheduler.start()
        backend._publish = broken  # type: ignore[method-assign]
        try:
            error = await log.wait(lambda e: e.type == "error" and e.slot is not None, 5)
        finally:
            await scheduler.stop()
        assert isinstance(error.error, StoreError)
        assert not starts

    run(scenario())


def test_jobs_and_manual_runs(namespace: str) -> None:
    async def scenario() -> None:
        backend = backend_for(namespace)
        await backend.open()
        await backend.register([JobSpec("job", "every", "every 1s")])
        await backend.register([JobSpec("job", "every", "every 1s")])
        await backend.register([JobSpec("other", "cron", "0 * * * *")])
        assert [(j.name, j.schedule) for j in await backend.known_jobs()] == [
            ("job", "every 1s"), ("other", "0 * * * *")]
        # the framework that declared a job is stored with it; plain reads as plain
        await backend.register([JobSpec("other", "cron", "0 * * * *", "celery")])
        assert await backend.known_jobs() == [JobSpec("job", "every", "every 1s"),
                                              JobSpec("other", "cron", "0 * * * *", "celery")]
        token = await backend.start_manual("job", "m", now_ms())
        await backend.finish_manual(token, "success", None, 10, None)
        [record] = await backend.history("job", 5)
        assert (record.manual, record.status, record.reason) == (True, "success", "manual")
        await backend.close()

    run(scenario())


def test_user_client_is_never_closed(namespace: str) -> None:
    async def scenario() -> None:
        client = await nats.connect(store.BASE_URL)
        backend = NatsBackend(client, stream=store.stream_for(namespace),
                              prefix=f"{namespace}.", duplicate_window="90s")
        await backend.open()
        assert (await backend.claim(request(now_ms(), "a"))).outcome == "won"
        await backend.close()
        assert not client.is_closed
        await client.close()

    run(scenario())


def test_an_unreadable_job_description_is_skipped_and_logged(
        namespace: str, caplog: pytest.LogCaptureFixture) -> None:
    """Garbage published on a job subject (issue 34, item 5): ``known_jobs()`` lists the
    other jobs and logs the bad message once."""
    import logging

    async def scenario() -> list[str]:
        backend = backend_for(namespace)
        await backend.register([JobSpec("job", "every", "every 1s")])
        client = await nats.connect(store.BASE_URL)
        await client.jetstream().publish(backend.job_subject("bad"), b"{not json",
                                         stream=backend.stream)
        await client.close()
        with caplog.at_level(logging.WARNING, logger="anarchon"):
            names = [spec.name for spec in await backend.known_jobs()]
        await backend.close()
        return names

    assert run(scenario()) == ["job"]
    [warning] = [r.getMessage() for r in caplog.records if "skipped a record" in r.getMessage()]
    assert f"{namespace}.job.bad" in warning, warning
