"""Runtime control on Redis/Valkey beyond the conformance suite: the key layout on a
Cluster, one script per poll, and the index repaired after a change stopped between its
two Cluster steps (``anarchon/backends/redis/control.py``)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from anarchon.backends import from_url
from anarchon.backends.base import ClaimRequest, JobSpec
from anarchon.backends.control import CHANGE_LOG_SIZE, ControlChange
from anarchon.backends.redis import RedisBackend
from anarchon.backends.redis.keys import JobKeys, NamespaceKeys
from tests.conftest import _require
from tests.stores import StoreSpec
from tests.stores.redis import STORE as REDIS
from tests.stores.redis_cluster import STORE as REDIS_CLUSTER
from tests.stores.valkey import STORE as VALKEY


@pytest.fixture(params=[REDIS, VALKEY, REDIS_CLUSTER], ids=lambda s: s.id)
def backend(request: pytest.FixtureRequest) -> RedisBackend:
    spec: StoreSpec = request.param
    _require(spec)
    made = from_url(spec.url_for("ctl_" + uuid.uuid4().hex[:10]))
    assert isinstance(made, RedisBackend)
    return made


def test_control_keys_share_the_trigger_lists_slot() -> None:
    from redis.crc import key_slot

    for prefix in ("cron:", "svc", "a:b:"):
        store = RedisBackend(prefix=prefix).store
        slots = {key_slot(k.encode()) for k in (store.triggers_key,
                                                 *store.namespace.every_key)}
        assert len(slots) == 1, prefix
        keys = store.keys("job:{x}")
        assert len({key_slot(k.encode()) for k in keys.every_key}) == 1


def test_control_keys_are_never_a_jobs_key() -> None:
    # prefix "cron" + job "triggers" spells the tag of prefix "cron:"'s control keys
    namespace = set(NamespaceKeys("cron:triggers").every_key)
    job = RedisBackend(prefix="cron").store.keys("triggers")
    assert job.tag == NamespaceKeys("cron:triggers").tag
    assert not namespace & set(job.every_key)
    assert not any(k.partition("}:")[2].startswith("ns-") for k in JobKeys("{t}").every_key)


def test_a_poll_is_one_script_call(backend: RedisBackend) -> None:
    async def body() -> None:
        await backend.open()
        calls: Counter[str] = Counter()
        store: Any = backend.store
        script, command = store.script, store.command

        async def counted_script(name: str, *args: Any) -> Any:
            calls["script"] += 1
            return await script(name, *args)

        async def counted_command(*args: Any) -> Any:
            calls["command"] += 1
            return await command(*args)

        store.script, store.command = counted_script, counted_command
        await backend.request_trigger("job", None)
        calls.clear()
        taken = await backend.poll(["job", "other"])
        assert len(taken.triggers) == 1 and taken.generation == 0
        idle = await backend.poll(["job"])
        assert idle.triggers == [] and idle.generation == 0
        assert calls == Counter(script=2), calls
        await backend.purge()
        await backend.close()

    asyncio.run(body())


async def _job_step_only(backend: RedisBackend, name: str, expected: int, text: str) -> None:
    """What a change that stopped after its first Cluster step leaves: the job's record
    written, the index, the generation and the channel not."""
    k = backend.store.keys(name)
    reply = await backend.store.script("control", [k.control, k.changes],
                                       ["job", expected, text, '{"n":1}', CHANGE_LOG_SIZE])
    assert int(reply[0]) == expected + 1


def test_a_stale_claim_repairs_an_index_left_behind(backend: RedisBackend) -> None:
    async def body() -> None:
        await backend.open()
        await backend.register([JobSpec("job", "every", "every 1s")])
        assert await backend.change_control(ControlChange("job", 0, '{"a":1}', "{}")) == 1
        before = await backend.read_controls()
        await _job_step_only(backend, "job", 1, '{"a":2}')
        assert (await backend.read_controls()).records["job"].version == 1  # behind
        slot = int(time.time() * 1000)
        refused = await backend.claim(ClaimRequest(
            "job", slot, "a", "scheduled", lease_ms=5_000, max_late_ms=60_000,
            max_attempts=1, overlap="allow", version=1))
        assert refused.outcome == "stale"  # the fence held all along
        after = await backend.read_controls()
        assert (after.records["job"].version, after.records["job"].text) == (2, '{"a":2}')
        assert after.generation > before.generation
        assert (await backend.poll([])).generation == after.generation
        await backend.purge()
        await backend.close()

    asyncio.run(body())


def test_the_next_change_repairs_an_index_left_behind(backend: RedisBackend) -> None:
    async def body() -> None:
        await backend.open()
        await _job_step_only(backend, "job", 0, '{"a":1}')
        snapshot = await backend.read_controls()
        assert "job" not in snapshot.records
        # planned from the index: refused, and the refusal brings the index up to date
        assert await backend.change_control(ControlChange("job", 0, '{"b":1}', "{}")) == 0
        repaired = await backend.read_controls()
        assert repaired.records["job"].version == 1
        assert repaired.generation > snapshot.generation
        assert await backend.change_control(ControlChange("job", 1, '{"b":1}', "{}")) == 2
        assert (await backend.read_controls()).records["job"].text == '{"b":1}'
        assert await backend.purge() >= 1
        assert dict((await backend.read_controls()).records) == {}
        await backend.close()

    asyncio.run(body())
