"""Jobs found by autodiscovery: one that succeeds, one that fails, one that uses the ORM."""

from __future__ import annotations

from typing import Any

from anarchon import RunContext
from anarchon_django import cron, every

CALLS: list[dict[str, Any]] = []


@every("greet", "1h")
def greet(ctx: RunContext) -> str:
    CALLS.append({"job": ctx.name, "reason": ctx.reason, "data": ctx.data})
    return "hello"


@cron("nightly-fail", "0 3 * * *", timezone="Europe/Berlin")
def nightly_fail(ctx: RunContext) -> None:
    raise RuntimeError("the report server said no")


@every("count-users", "1h")
def count_users(ctx: RunContext) -> int:
    from django.contrib.auth.models import User

    count: int = User.objects.count()
    CALLS.append({"job": ctx.name, "users": count})
    return count

