"""Redis/Valkey key layout: different ``(prefix, job)`` pairs never share a key, on every
strategy; the key format is recorded and data of another format is refused by name."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from anarchon.backends import from_url
from anarchon.backends.base import JobSpec
from anarchon.backends.redis import RedisBackend, comparison_backend
from anarchon.backends.redis.connection import KEY_FORMAT, RedisStore
from anarchon.errors import IncompatibleStoreError
from tests.conftest import _require
from tests.stores import StoreSpec
from tests.stores.redis import STORE as REDIS
from tests.stores.valkey import STORE as VALKEY

#: pairs that a plain concatenation ``<prefix><job>`` maps to the same tag
PAIRS = [(("svc", "1tick"), ("svc1", "tick")), (("a:", "b"), ("a", ":b")),
         (("a", "%3Ab"), ("a:", "b")), (("x:y", "z"), ("x", "y:z"))]
STRATEGIES = ["lease", "stream-id", "script", "idmp"]


@pytest.fixture(params=[REDIS, VALKEY], ids=lambda s: s.id)
def spec(request: pytest.FixtureRequest) -> StoreSpec:
    store: StoreSpec = request.param
    _require(store)
    return store


def _store(prefix: str, strategy: str) -> RedisStore:
    backend: Any = (RedisBackend(prefix=prefix) if strategy == "lease" else
                    comparison_backend(strategy, "redis://127.0.0.1:1", kind="redis",
                                       prefix=prefix))
    store: RedisStore = backend.store
    return store


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(("one", "two"), PAIRS, ids=lambda p: f"{p[0]!r}+{p[1]!r}")
def test_prefix_and_job_pairs_never_share_a_key(one: tuple[str, str], two: tuple[str, str],
                                                strategy: str) -> None:
    first = set(_store(one[0], strategy).keys(one[1]).every_key)
    second = set(_store(two[0], strategy).keys(two[1]).every_key)
    assert not first & second


def test_an_empty_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match="prefix '': it must not be empty"):
        RedisBackend(prefix="")
    with pytest.raises(ValueError, match="prefix '': it must not be empty"):
        from_url("redis://127.0.0.1:1/0?prefix=")
    with pytest.raises(ValueError, match="prefix '': it must not be empty"):
        from_url("valkey://127.0.0.1:1/0?prefix=&strategy=script&lab=1")


def test_data_of_another_key_format_is_refused(spec: StoreSpec) -> None:
    async def body() -> None:
        backend = from_url(spec.url_for("fmt_" + uuid.uuid4().hex[:8]))
        assert isinstance(backend, RedisBackend)
        store = backend.store
        jobs = [JobSpec("job", "every", "every 1s")]
        try:
            await backend.open()
            # an older anarchon's registry: jobs, and no key format field
            await store.command("HSET", store.jobs_key, "job", '{"kind": "every"}')
            with pytest.raises(IncompatibleStoreError,
                               match=f"key format 1, this version needs format {KEY_FORMAT}"):
                await backend.register(jobs)
            assert await store.command("HGET", store.jobs_key, "") is None  # unchanged
            await store.command("HSET", store.jobs_key, "", "9")
            with pytest.raises(IncompatibleStoreError, match="key format 9"):
                await backend.register(jobs)
            await store.command("DEL", store.jobs_key)
            await backend.register(jobs)  # a fresh prefix records the format
            assert await store.command("HGET", store.jobs_key, "") in (KEY_FORMAT,
                                                                       KEY_FORMAT.encode())
            await backend.register(jobs)  # and opens again
            assert [j.name for j in await backend.known_jobs()] == ["job"]
            assert await backend.purge() >= 1
        finally:
            await backend.close()

    asyncio.run(body())
