"""``manage.py anarchon pause | resume | reschedule | add | remove``: each prints what it
changed (checked through the core API) and bad input is a one-line error with a non-zero
exit status, in-process (``call_command``) and as a real ``manage.py`` process."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from anarchon import JobInfo, Scheduler

pytestmark = pytest.mark.django_db(transaction=True)

MANAGE = Path(__file__).with_name("manage.py")


def anarchon(*args: str) -> str:
    out = io.StringIO()
    call_command("anarchon", *args, stdout=out)
    return out.getvalue().strip()


def job(core: Scheduler, name: str) -> JobInfo | None:
    return next((info for info in core.jobs() if info.name == name), None)


def test_pause_resume_reschedule_and_reset(core: Scheduler) -> None:
    assert anarchon("pause", "greet").startswith("paused “greet” (version 1) by manage.py:")
    info = job(core, "greet")
    assert info is not None and info.paused
    assert anarchon("resume", "greet").startswith("resumed “greet” (version 2)")
    output = anarchon("reschedule", "greet", "--every", "5m", "--offset", "10s")
    assert output.startswith("rescheduled “greet” to every 300s +10s (version 3)")
    info = job(core, "greet")
    assert info is not None and (info.schedule, info.source) == ("every 300s +10s", "override")
    output = anarchon("reschedule", "greet", "--cron", "0 4 * * *", "--timezone", "Asia/Tokyo")
    assert "cron 0 4 * * * (Asia/Tokyo)" in output
    assert anarchon("reschedule", "greet", "--reset").startswith(
        "reset “greet” to the schedule in its code")
    info = job(core, "greet")
    assert info is not None and (info.schedule, info.source) == ("every 1h", "code")
    assert [c.action for c in core.changes("greet")] == [
        "reset", "reschedule", "reschedule", "resume", "pause"]
    assert core.changes("greet")[0].by.startswith("manage.py:")


def test_add_update_and_remove_a_dynamic_job(core: Scheduler) -> None:
    output = anarchon("add", "report", "--handler", "mail", "--every", "10m",
                      "--params", '{"to": "ops"}', "--option", "max_attempts=3",
                      "--option", "jitter=2s")
    assert output.startswith("added dynamic job “report” (mail, every 600s) (version 1)")
    info = job(core, "report")
    assert info is not None and info.source == "dynamic" and info.params == {"to": "ops"}
    assert info.options == {"max_attempts": 3, "jitter": "2s"}
    output = anarchon("add", "report", "--handler", "mail", "--cron", "0 5 * * *")
    assert output.startswith("updated dynamic job “report” (mail, cron 0 5 * * * (UTC))")
    output = anarchon("add", "once", "--handler", "mail", "--at", "2099-05-01T10:00:00+00:00")
    assert "at 2099-05-01T10:00:00+00:00" in output
    assert anarchon("remove", "report").startswith("removed dynamic job “report”")
    assert job(core, "report") is None


def test_by_replace_and_changes_as_in_the_core_cli(core: Scheduler) -> None:
    """The control tree is the core CLI's: ``--by`` names the author, ``add --replace``
    is accepted, ``changes`` prints the change log (lines or ``--json``)."""
    assert anarchon("pause", "greet", "--by", "deploy-bot").endswith("by deploy-bot")
    assert core.changes("greet")[0].by == "deploy-bot"
    output = anarchon("add", "report", "--handler", "mail", "--every", "10m", "--by", "ops")
    assert output.startswith("added dynamic job “report”")
    output = anarchon("add", "report", "--handler", "mail", "--every", "5m", "--replace")
    assert output.startswith("updated dynamic job “report” (mail, every 300s)")
    lines = anarchon("changes", "report").splitlines()
    assert len(lines) == 2 and "version 2" in lines[0] and "update" in lines[0]
    assert "by ops" in lines[1] and "add" in lines[1]
    logged = json.loads(anarchon("changes", "greet", "--json", "--count", "1"))
    assert [(c["job"], c["action"], c["by"]) for c in logged] == [
        ("greet", "pause", "deploy-bot")]
    with pytest.raises(CommandError, match="unknown job 'nope'"):
        anarchon("changes", "nope")
    with pytest.raises(CommandError, match="--count must be at least 1") as caught:
        anarchon("changes", "greet", "--count", "0")
    assert caught.value.returncode == 2
    with pytest.raises(CommandError, match="--by must not be empty"):
        anarchon("resume", "greet", "--by", " ")


@pytest.mark.parametrize(("args", "text", "code"), [
    (("pause", "nope"), "no job named 'nope'", 1),
    (("reschedule", "greet", "--cron", "0 3 * * * * *"), "cron", 2),
    (("reschedule", "greet", "--every", "soon"), "soon", 2),
    (("reschedule", "greet", "--reset", "--offset", "1s"), "--reset takes no --offset", 2),
    (("reschedule", "greet", "--cron", "0 3 * * *", "--offset", "1s"),
     "--offset goes with --every", 2),
    (("add", "x", "--handler", "mail", "--every", "1m", "--params", "{bad"),
     "--params must be JSON", 2),
    (("add", "x", "--handler", "mail", "--every", "1m", "--option", "color=red"),
     "not a job option", 2),
    (("add", "x", "--handler", "mail", "--every", "1m", "--option", "jitter"),
     "key=value", 2),
    (("add", "greet", "--handler", "mail", "--every", "1m"), "declared in code", 2),
    (("remove", "greet"), "not a dynamic job", 2),
])
def test_bad_input_is_a_one_line_error(core: Scheduler, args: tuple[str, ...], text: str,
                                       code: int) -> None:
    with pytest.raises(CommandError) as caught:
        anarchon(*args)
    message = str(caught.value)
    assert text in message and "\n" not in message, message
    assert caught.value.returncode == code
    info = job(core, "greet")
    assert info is not None and info.source == "code" and not info.paused
    assert job(core, "x") is None


def test_manage_py_exits_non_zero_with_one_line(core: Scheduler, control_store: str) -> None:
    root = str(MANAGE.parents[2])
    env = {**os.environ, "PYTHONPATH": root,
           "DJANGO_SETTINGS_MODULE": "tests.django.settings",
           "ANARCHON_TEST_BACKEND": settings.ANARCHON["BACKEND"],
           "ANARCHON_TEST_OPTIONS": json.dumps(settings.ANARCHON.get("OPTIONS", {})),
           "ANARCHON_DJANGO_SQLITE": settings.DATABASES["default"]["NAME"]}
    done = subprocess.run([sys.executable, str(MANAGE), "anarchon", "reschedule", "greet",
                           "--cron", "not a cron"], env=env, cwd=root, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("CommandError: ") and "cron" in lines[0]
    done = subprocess.run([sys.executable, str(MANAGE), "anarchon", "pause", "greet"],
                          env=env, cwd=root, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("paused “greet”")
    info = job(core, "greet")
    assert info is not None and info.paused


def test_reschedule_needs_one_schedule(control_store: str) -> None:
    with pytest.raises(CommandError, match="one of the arguments --every --cron --reset"):
        anarchon("reschedule", "greet")
