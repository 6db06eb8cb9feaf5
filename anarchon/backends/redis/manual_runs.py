"""Manual-run requests on Redis/Valkey, by the rules of
``anarchon.backends.trigger_rules``.

The requests are JSON entries ``{id, job, data, at}`` of the list ``<prefix>triggers``
(``at``: the server's clock; an entry an older anarchon stored has none and counts as
live). ``trigger_request.lua`` checks for a live request of the job and appends in one
script, so two requesters never both store one; ``triggers.lua`` takes requests and
drops expired ones. A running manual attempt lives in the job's own Cluster slot, so it
is read (one ``HVALS``) just before that script: a request made in the moment between an
instance taking a request and recording its attempt is not refused.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Sequence

from ...errors import StoreError
from ..capabilities import TriggerStore
from ..trigger_rules import TriggerRequest, refused
from ..wakeups import trigger_payload
from .connection import RedisStore, text

logger = logging.getLogger("anarchon")


class RedisTriggers(TriggerStore):
    """The trigger calls of [`RedisBackend`][anarchon.backends.redis.RedisBackend]."""

    store: RedisStore

    async def request_trigger(self, name: str, data: str | None, *,
                              exclusive: bool = False) -> str:
        """Queue a manual-run request (refused, with ``exclusive``, while one of ``name``
        is pending or running); a running instance with the job takes it."""
        store = self.store
        if exclusive and await self._manual_running(name):
            raise refused(name, "running")
        request_id = secrets.token_hex(8)
        answer = await store.script("trigger_request", [store.triggers_key], [
            request_id, name, 0 if data is None else 1, data or "", int(exclusive),
            self.trigger_ttl_ms()])
        if text(answer) == "pending":
            raise refused(name, "pending")
        try:  # wake the instances up; if this is lost, their safety poll finds it
            await store.command("PUBLISH", store.wake_channel, trigger_payload(name))
        except StoreError as exc:
            logger.debug("trigger wake-up not sent: %s", exc)
        return request_id

    async def _manual_running(self, name: str) -> bool:
        """Whether a manual attempt of ``name`` started less than ``stale_manual_after``
        ago (by the server's clock) is still running."""
        now, values = await self.store.pipeline([("TIME",),
                                                 ("HVALS", self.store.keys(name).att)])
        for reply in (now, values):
            if isinstance(reply, Exception):
                raise self.store.translate(reply)
        oldest = int(text(now[0])) * 1000 + int(text(now[1])) // 1000 - self.stale_manual_ms()
        for raw in values or []:
            try:
                record = json.loads(text(raw))
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("manual") \
                    and record.get("status") == "running" \
                    and isinstance(record.get("start"), (int, float)) \
                    and record["start"] >= oldest:
                return True
        return False

    async def _triggers(self, names: Sequence[str]) -> tuple[list[TriggerRequest], int]:
        store = self.store
        generation, taken = await store.script(
            "triggers", [store.triggers_key, store.namespace.generation],
            [self.trigger_ttl_ms(), *names])
        requests = [json.loads(text(raw)) for raw in taken or []]
        return ([TriggerRequest(r["id"], r["job"], r.get("data")) for r in requests],
                int(generation))

    async def take_triggers(self, names: Sequence[str]) -> list[TriggerRequest]:
        """Take the live requests for these jobs (one script call); expired ones are
        dropped unrun."""
        return (await self._triggers(names))[0]

    async def forget(self, name: str) -> int:
        """Remove job ``name``'s keys (runs, history, values; not its control record),
        its registration and its pending requests; how many. One command per slot."""
        store = self.store
        k = store.keys(name)
        removed = int(await store.command("UNLINK", k.runs, k.active, k.done, k.att, k.hist,
                                          k.skips, k.stream, k.seen, k.values))
        removed += int(await store.command("HDEL", store.jobs_key, name))
        return removed + len((await self._triggers([name]))[0])
