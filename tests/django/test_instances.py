"""Live instances on the "django" store: the liveness record a running scheduler keeps
(written with its heartbeat, removed at stop), ``manage.py anarchon status``, the
admin's read-only Instances page (``view_instance``) and ``manage.py anarchon doctor``
(the store's format: the migrations applied to its database)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.db import connections
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client
from django.urls import reverse

from anarchon_django.control import runtime
from anarchon_django.store.backend import store_alias
from anarchon_django.store.models import StoreInstance
from tests.django.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

INSTANCES = "/admin/anarchon_django/instance/"


def status() -> dict[str, Any]:
    out = io.StringIO()
    call_command("anarchon", "status", "--json", stdout=out)
    document: dict[str, Any] = json.loads(out.getvalue())
    return document


def login(*perms: str) -> Client:
    user: User = User.objects.create_user(f"u{User.objects.count()}", password="pw",
                                          is_staff=True)
    for codename in perms:
        user.user_permissions.add(Permission.objects.get(
            content_type__app_label="anarchon_django", codename=codename))
    client = Client()
    client.force_login(user)
    return client


def alive_ids() -> Callable[[], set[str]]:
    def read() -> set[str]:
        return {i["id"] for i in status()["instances"] if i["alive"]}
    return read


def test_a_running_instance_is_listed_alive_and_removed_at_stop(table: str) -> None:
    assert reverse("admin:anarchon_django_instance_changelist") == INSTANCES
    scheduler = runtime.build_scheduler(instance_id="live-1")
    scheduler.start()
    try:
        wait_for(lambda: "live-1" in alive_ids()(), 15, "the instance's liveness record")
        [record] = StoreInstance.objects.filter(instance="live-1")
        assert record.expires > record.last_seen
        document = status()
        [mine] = [i for i in document["instances"] if i["id"] == "live-1"]
        assert mine["pid"] and mine["host"] and mine["version"], mine
        assert all(job["next_run"] or job["paused"] for job in document["jobs"]
                   if job["kind"] == "every"), document["jobs"]

        assert login().get(INSTANCES).status_code == 403
        page = login("view_instance").get(INSTANCES)
        assert page.status_code == 200 and "live-1" in page.content.decode()
        assert "alive" in page.content.decode()
        out = io.StringIO()
        call_command("anarchon", "status", stdout=out)
        assert "live-1" in out.getvalue() and "alive" in out.getvalue()
    finally:
        scheduler.stop()
    assert not StoreInstance.objects.filter(instance="live-1").exists()


def test_anonymous_is_sent_to_login() -> None:
    response = Client().get(INSTANCES)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def doctor(*args: str) -> tuple[int, str]:
    """``manage.py anarchon doctor``'s exit status and output."""
    out = io.StringIO()
    try:
        call_command("anarchon", "doctor", *args, stdout=out)
    except CommandError as exc:
        return exc.returncode, out.getvalue()
    return 0, out.getvalue()


def test_doctor_shows_the_applied_migrations_as_the_stores_format() -> None:
    code, text = doctor("--json")
    lines = {line["check"]: line for line in json.loads(text)}
    assert list(lines) == ["reachable", "format", "latency", "clock", "rights",
                           "instances"], lines
    assert lines["format"]["level"] == "OK", lines
    assert "the migrations of anarchon_django on database" in lines["format"]["detail"]
    assert lines["format"]["detail"].endswith("needs format 0001_initial"), lines
    assert code == 1 and lines["instances"]["level"] == "WARN", text  # none alive

    # the database holds a migration of a newer anarchon_django than this one
    recorder = MigrationRecorder(connections[store_alias()])
    recorder.record_applied("anarchon_django", "0099_newer")
    try:
        code, text = doctor()
    finally:
        recorder.record_unapplied("anarchon_django", "0099_newer")
    assert code == 3, text
    [line] = [line for line in text.splitlines() if line.startswith("FAIL  format")]
    assert "format 0099_newer, but this anarchon" in line, line
    assert "needs format 0001_initial" in line and "manage.py migrate anarchon_django" in line
