"""Handlers get healthy Django connections: cleaned before and after every run."""

from __future__ import annotations

import inspect
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.db import connection, connections

from anarchon import RunContext
from anarchon_django.control import runtime

pytestmark = pytest.mark.django_db(transaction=True)


def test_sync_handler_runs_with_a_connection_that_is_closed_afterwards(table: str) -> None:
    seen: dict[str, Any] = {}

    def handler(ctx: RunContext) -> None:
        seen["users"] = User.objects.count()
        seen["thread"] = threading.current_thread().name
        seen["connection"] = connections["default"]

    wrapped = runtime.with_fresh_connections(handler)
    assert wrapped.__name__ == "handler" and not inspect.iscoroutinefunction(wrapped)
    scheduler = runtime.build_scheduler([])
    scheduler.every("orm", "1h", wrapped)
    record = scheduler.run_now("orm")
    scheduler.close()
    assert record.status == "success" and seen["users"] == 0
    assert seen["thread"] != threading.current_thread().name
    assert seen["connection"].connection is None, "the run's connection was left open"


def test_a_broken_connection_is_replaced_before_the_run(table: str) -> None:
    results: list[int] = []

    def handler(ctx: RunContext) -> None:
        results.append(User.objects.count())

    def break_it(ctx: RunContext) -> None:
        User.objects.count()
        connection.close_at = 0  # "expired" (as after a dropped connection / CONN_MAX_AGE)
        connection.errors_occurred = True

    scheduler = runtime.build_scheduler([])
    scheduler.every("break", "1h", runtime.with_fresh_connections(break_it))
    scheduler.every("after", "1h", runtime.with_fresh_connections(handler))
    assert scheduler.run_now("break").status == "success"
    assert scheduler.run_now("after").status == "success"
    scheduler.close()
    assert results == [0]


def test_async_handlers_stay_async_and_reach_the_orm(table: str) -> None:
    async def handler(ctx: RunContext) -> int:
        count: int = await sync_to_async(User.objects.count)()
        return count

    wrapped = runtime.with_fresh_connections(handler)
    assert inspect.iscoroutinefunction(wrapped)
    scheduler = runtime.build_scheduler([])
    scheduler.every("async-orm", "1h", wrapped)
    assert scheduler.run_now("async-orm").status == "success"
    scheduler.close()
