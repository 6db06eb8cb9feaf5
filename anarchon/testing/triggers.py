"""The trigger contract (``anarchon/backends/trigger_rules.py``) on every lease store: one
manual run at a time per job (atomic against racing requesters), ``overlap="allow"``,
requests that expire unrun, and ``forget()``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from .. import AsyncScheduler, TriggerRefusedError
from ..backends.base import Backend, JobSpec, LeaseBackend
from ..backends.capabilities import TriggerStore, ValueStore
from .claims import finish, request
from .support import run


async def opened(backend_factory: Callable[[], Backend], ttl: float = 60.0) -> TriggerStore:
    backend = backend_factory()
    assert isinstance(backend, TriggerStore)
    backend.trigger_ttl = ttl
    await backend.open()
    await backend.register([JobSpec("job", "every", "every 1h"),
                            JobSpec("other", "every", "every 1h")])
    return backend


async def refusal(backend: TriggerStore, name: str = "job") -> str:
    with pytest.raises(TriggerRefusedError) as caught:
        await backend.request_trigger(name, None, exclusive=True)
    assert caught.value.name == name and name in str(caught.value)
    return caught.value.reason


def test_a_second_request_is_refused_while_one_is_pending(
        backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        first = await backend.request_trigger("job", '{"n": 1}', exclusive=True)
        assert await refusal(backend) == "pending"
        assert "no instance has taken it yet" in str(
            await _error(backend.request_trigger("job", None, exclusive=True)))
        await backend.request_trigger("other", None, exclusive=True)  # another job: fine
        also = await backend.request_trigger("job", None)  # not exclusive: overlap allowed
        taken = await backend.take_triggers(["job"])
        assert [t.id for t in taken] == [first, also]
        assert taken[0].data == '{"n": 1}' and taken[1].data is None
        await backend.request_trigger("job", None, exclusive=True)  # taken: free again
        await backend.close()

    run(scenario())


async def _error(call: object) -> BaseException:
    try:
        await call  # type: ignore[misc]
    except TriggerRefusedError as exc:
        return exc
    raise AssertionError("not refused")


def test_a_running_manual_attempt_blocks_a_request_until_it_ends(
        backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        token = await backend.start_manual("job", "elsewhere", int(time.time() * 1000))
        assert await refusal(backend) == "running"
        await backend.request_trigger("job", None)  # not exclusive
        assert len(await backend.take_triggers(["job"])) == 1
        await backend.finish_manual(token, "success", None, 100, None)
        await backend.request_trigger("job", None, exclusive=True)
        await backend.close()

    run(scenario())


async def _accepted_once_unblocked(backend: TriggerStore, blocked_by: str) -> str:
    """Request ``job`` exclusively until the store accepts (within 10 s); every refusal
    before must be for ``blocked_by``. Returns the request's id."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return await backend.request_trigger("job", None, exclusive=True)
        except TriggerRefusedError as exc:
            reason = exc.reason
        assert reason == blocked_by
        assert time.monotonic() < deadline, f"still blocked ({blocked_by}) after 10 s"
        await asyncio.sleep(0.05)


def test_a_manual_attempt_left_running_stops_blocking_after_stale_manual_after(
        backend_factory: Callable[[], Backend]) -> None:
    # a manual run holds no lease: one whose instance was killed stays "running"
    async def scenario() -> None:
        backend = await opened(backend_factory)
        assert backend.stale_manual_after == 3600.0  # the documented default
        backend.stale_manual_after = 1.0
        await backend.start_manual("job", "killed", int(time.time() * 1000))
        assert await refusal(backend) == "running"
        await _accepted_once_unblocked(backend, "running")
        assert len(await backend.take_triggers(["job"])) == 1
        await backend.close()

    run(scenario())


def test_racing_requesters_store_one_request(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backends = [await opened(backend_factory) for _ in range(4)]

        async def ask(backend: TriggerStore) -> bool:
            try:
                await backend.request_trigger("job", None, exclusive=True)
            except TriggerRefusedError:
                return False
            return True

        for _ in range(3):
            answers = await asyncio.gather(*(ask(b) for b in backends))
            assert sum(answers) == 1, answers
            assert len(await backends[0].take_triggers(["job"])) == 1
        for backend in backends:
            await backend.close()

    run(scenario())


def test_an_expired_request_is_dropped_unrun(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory, ttl=1.0)
        await backend.request_trigger("job", None, exclusive=True)
        # once the first request has expired, it no longer blocks
        second = await _accepted_once_unblocked(backend, "pending")
        # the expired one is dropped, never handed out; the live one is
        assert [t.id for t in await backend.take_triggers(["job"])] == [second]
        assert await backend.take_triggers(["job"]) == []
        await backend.close()

    run(scenario())


def test_trigger_refuses_a_second_run_unless_overlap_is_allowed(
        backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        s = AsyncScheduler(backend_factory())
        s.every("job", "1h", lambda ctx: None)
        s.every("free", "1h", lambda ctx: None, overlap="allow")
        await s.trigger("job")
        with pytest.raises(TriggerRefusedError, match="was not requested again"):
            await s.trigger("job")
        await s.trigger("free")
        await s.trigger("free")
        assert isinstance(s.backend, TriggerStore)
        assert s.backend.trigger_ttl == 60.0  # max(lease, 60 s)
        await s.stop()

    run(scenario())


def test_forget_removes_a_job_and_keeps_the_others(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        assert isinstance(backend, LeaseBackend) and isinstance(backend, ValueStore)
        slot = (int(time.time() * 1000) // 1000) * 1000
        for name in ("job", "other"):
            result = await backend.claim(request(name, slot, "a"))
            assert await backend.finish(finish(name, slot, "a", result.attempt))
            await backend.request_trigger(name, None)
            await backend.swap_value(name, "last", None, "1")
        token = await backend.start_manual("job", "a", slot)
        await backend.finish_manual(token, "success", None, 100, None)
        s = AsyncScheduler(backend)
        assert await s.forget("job") > 0
        assert [j.name for j in await backend.known_jobs()] == ["other"]
        assert await backend.history("job", 10) == []
        assert await backend.read_value("job", "last") is None
        assert [t.name for t in await backend.take_triggers(["job", "other"])] == ["other"]
        assert len(await backend.history("other", 10)) == 1
        assert await backend.read_value("other", "last") == "1"
        assert await s.forget("job") == 0
        with pytest.raises(ValueError, match="job name"):
            await s.forget(" job")
        await s.stop()

    run(scenario())
