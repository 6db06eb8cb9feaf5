"""The lease backend contract (anarchon/backends/base.py): manual runs, registrations
with their framework, and notes on running attempts, on backends made by the
``backend_factory`` fixture."""

from __future__ import annotations

from collections.abc import Callable

from ..backends.base import Backend, Finish, HeldRun, JobSpec
from .claims import expire, finish, now_ms, opened, request
from .support import run


def test_manual_runs_and_known_jobs(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        token = await backend.start_manual("job", "a", now_ms())
        await backend.finish_manual(token, "failure", "boom", 10, None)
        record = (await backend.history("job", 1))[0]
        assert (record.manual, record.reason, record.status, record.error) == (
            True, "manual", "failure", "boom")
        assert record.duration is not None
        assert record.duration >= 0
        assert [j.name for j in await backend.known_jobs()] == ["job"]
        await backend.close()

    run(scenario())


def test_a_registered_framework_round_trips(backend_factory: Callable[[], Backend]) -> None:
    """A job's framework is stored with its registration and read by another process;
    a plain registration (as every row before frameworks were recorded) reads as plain,
    and registering again replaces it (a beat entry moved into plain code)."""
    async def scenario() -> None:
        backend = await opened(backend_factory)  # "job": a plain registration
        specs = [JobSpec("beat-entry", "cron", "cron '0 3 * * *' (UTC)", "celery"),
                 JobSpec("marked-actor", "every", "every 5m", "dramatiq"),
                 JobSpec("refused-entry", "refused", "refused: no such task", "celery")]
        await backend.register(specs)
        reader = backend_factory()
        await reader.open()
        known = {spec.name: spec for spec in await reader.known_jobs()}
        assert [known[spec.name] for spec in specs] == specs
        assert known["job"] == JobSpec("job", "every", "every 1s")
        assert known["job"].framework is None
        await backend.register([JobSpec("marked-actor", "every", "every 5m")])
        known = {spec.name: spec for spec in await reader.known_jobs()}
        assert known["marked-actor"] == JobSpec("marked-actor", "every", "every 5m")
        await reader.close()
        await backend.close()

    run(scenario())


# a note is data, never code: quotes, braces, Lua and SQL syntax, newlines, non-ASCII
NOTE = "retrying: ValueError: it's {\"x\"} ]] end; redis.call('FLUSHALL') -- ' OR 1=1 \n é ✓"


def test_note_shows_on_my_running_attempt_until_it_ends(
        backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        a, b = await opened(backend_factory), await opened(backend_factory)
        slot = now_ms() - 5_000
        await a.claim(request("job", slot, "a", lease_ms=60_000))
        held = HeldRun("job", slot, 1)
        assert await a.note("a", held, NOTE) is True
        (record,) = await b.history("job", 10)  # seen by every instance
        assert (record.status, record.error, record.finished_at) == ("running", NOTE, None)
        assert await a.note("a", held, "retrying: again") is True  # the latest note wins
        assert (await a.history("job", 1))[0].error == "retrying: again"
        # still held and renewable: a note touches neither the lease nor the run's state
        assert not (await a.heartbeat("a", [held], [], 60_000)).lost
        assert [(s.owner, s.attempt, s.running) for s in await b.unfinished(["job"])] == [
            ("a", 1, True)]
        # another owner, or another attempt of mine: nothing changes
        assert await b.note("b", held, "not mine") is False
        assert await a.note("a", HeldRun("job", slot, 2), "no such attempt") is False
        assert await a.note("a", HeldRun("job", slot + 1, 1), "no such run") is False
        assert (await a.history("job", 1))[0].error == "retrying: again"
        # a success clears the note; the finished record takes no more notes
        assert await a.finish(finish("job", slot, "a", 1)) is True
        (record,) = await a.history("job", 10)
        assert (record.status, record.error) == ("success", None)
        assert await a.note("a", held, "too late") is False
        assert (await a.history("job", 1))[0].error is None
        # a failure's error replaces the note and is never overwritten afterwards
        later = slot + 1000
        await a.claim(request("job", later, "a", lease_ms=60_000, overlap="allow"))
        assert await a.note("a", HeldRun("job", later, 1), NOTE) is True
        assert await a.finish(Finish("job", later, "a", 1, "failure", "boom", 100, None,
                                     3_600_000)) is True
        assert await a.note("a", HeldRun("job", later, 1), "too late") is False
        assert [(r.slot, r.status, r.error) for r in await a.history("job", 10)] == [
            (later, "failure", "boom"), (slot, "success", None)]
        await a.close()
        await b.close()

    run(scenario())


def test_note_is_fenced_across_takeover_and_hand_over(
        backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        a, b = await opened(backend_factory), await opened(backend_factory)
        slot = now_ms()
        await a.claim(request("job", slot, "a"))
        first = HeldRun("job", slot, 1)
        assert await a.note("a", first, "retrying: first") is True
        await expire(a, "job", slot)
        won = await b.claim(request("job", slot, "b", reason="takeover", expected_attempt=1))
        assert (won.outcome, won.attempt) == ("won", 2)
        # the stale runner's note changes nothing; the interrupted attempt keeps no note
        assert await a.note("a", first, "stale") is False
        assert await b.note("b", first, "not my attempt") is False
        second = HeldRun("job", slot, 2)
        assert await a.note("a", second, "not my attempt") is False
        assert await b.note("b", second, "retrying: second") is True
        assert [(r.attempt, r.status, r.error) for r in await a.history("job", 10)] == [
            (2, "running", "retrying: second"), (1, "interrupted", None)]
        # a hand-over ends the attempt: its note goes, and it takes no more
        assert await b.release("b", second) is True
        assert await b.note("b", second, "after release") is False
        assert [(r.attempt, r.status, r.error) for r in await a.history("job", 10)] == [
            (2, "interrupted", None), (1, "interrupted", None)]
        await a.close()
        await b.close()

    run(scenario())
