"""The Redis ACL documented in docs/backends/redis.md is enough, and names no command too
many: a real ACL user made from the page's ``ACL SETUSER`` line (unique name and prefix,
deleted after) runs a scheduler, a manual run, pause, shared values, ``anarchon jobs``,
``forget`` and ``purge``. A denied command fails the test with the server's ``ACL LOG``."""

from __future__ import annotations

import asyncio
import re
import shlex
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

from anarchon import from_url
from tests.integration.backends.restricted import cli, run_every_call
from tests.stores import in_ci
from tests.stores.redis import BASE_URL, STORE

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "backends" / "redis.md"


def documented_acl() -> list[str]:
    """The page's ``ACL SETUSER`` line, as words (user ``anarchon``, prefix ``cron:``)."""
    [line] = [text for text in DOC.read_text().splitlines()
              if text.startswith("ACL SETUSER anarchon on >secret ")]
    return shlex.split(line)


def documented_commands() -> set[str]:
    return {word[1:] for word in documented_acl() if word.startswith("+")}


@pytest.fixture
def acl_user() -> Iterator[tuple[str, Any]]:
    """A user made from the documented line; yields (its URL with the prefix, an admin
    client)."""
    reason = STORE.unavailable()
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI requires Redis: {reason}")
        pytest.skip(reason)
    import redis

    tag = uuid.uuid4().hex[:10]
    user, password, prefix = f"anarchon_acl_{tag}", f"pw{tag}", f"acl{tag}:"
    words = [word.replace("cron:", prefix) for word in documented_acl()]
    words[2], words[4] = user, f">{password}"
    admin: Any = redis.Redis.from_url(urlunsplit(urlsplit(BASE_URL)._replace(query="")))
    admin.execute_command(*words)  # ACL SETUSER ...
    parts = urlsplit(BASE_URL)
    netloc = f"{user}:{quote(password)}@{parts.hostname}:{parts.port}"
    url = urlunsplit((parts.scheme, netloc, parts.path, f"prefix={prefix}", ""))
    try:
        yield url, admin
    finally:
        admin.execute_command("ACL", "DELUSER", user)
        for key in admin.scan_iter(match=f"*{prefix}*", count=1000):
            admin.delete(key)
        admin.close()


def _denied(admin: Any, url: str) -> list[str]:
    """The server's ``ACL LOG`` entries of the test's user (redis-py parses each entry
    into a dict)."""
    user = urlsplit(url).username
    found = []
    for entry in admin.acl_log(128):
        record = {(k.decode() if isinstance(k, bytes) else str(k)):
                  (v.decode() if isinstance(v, bytes) else v) for k, v in entry.items()}
        if record.get("username") == user:
            found.append(f"{record.get('reason')} {record.get('object')} "
                         f"({record.get('context')})")
    return found


def test_the_documented_acl_runs_everything(acl_user: tuple[str, Any]) -> None:
    url, admin = acl_user

    async def main() -> None:
        await run_every_call(from_url(url), "acl")

    try:
        asyncio.run(main())
        jobs = cli("jobs", "--backend", url)
        assert jobs.returncode == 0, jobs.stderr
        assert "tick" in jobs.stdout and "PAUSED" in jobs.stdout
        forget = cli("forget", "tick", "--yes", "--backend", url)
        assert forget.returncode == 0, forget.stderr
        purge = cli("purge", "--yes", "--backend", url)
        assert purge.returncode == 0, purge.stderr
    finally:
        denied = _denied(admin, url)
    assert denied == [], f"the documented ACL misses: {denied}"


def test_the_documented_commands_are_each_needed() -> None:
    """Each command on the page is sent by the client or called by a script."""
    sources = "\n".join(path.read_text() for path in (ROOT / "anarchon" / "backends" /
                                                      "redis").iterdir()
                        if path.suffix in (".py", ".lua"))
    implicit = {"info", "evalsha", "eval", "script|load", "subscribe",
                "client|setname"}  # sent by the client library
    for command in documented_commands() - implicit:
        assert re.search(rf"['\"]{re.escape(command)}['\"]", sources, re.IGNORECASE), command
