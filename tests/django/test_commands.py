"""``manage.py anarchon`` subcommands through ``call_command``."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings

from anarchon_django.control import runtime
from tests.django.support import wait_for
from tests.django.testapp import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def anarchon(*args: str, **options: Any) -> str:
    out = io.StringIO()
    call_command("anarchon", *args, stdout=out, **options)
    return out.getvalue()


def test_list_shows_schedule_timezone_next_run_and_outcome(table: str) -> None:
    anarchon("run-now", "greet")
    output = anarchon("list")
    lines = {line.split()[0]: line for line in output.splitlines()[1:]}
    assert "JOB" in output.splitlines()[0] and "RUNNING ON" in output.splitlines()[0]
    assert "every 1h" in lines["greet"] and "success" in lines["greet"]
    assert "manual" in lines["greet"]
    assert "cron '0 3 * * *'" in lines["nightly-fail"]
    assert "Europe/Berlin" in lines["nightly-fail"] and "never ran" in lines["nightly-fail"]


def test_run_now_runs_here_and_records_a_manual_run(table: str) -> None:
    before = len(jobs.CALLS)
    output = anarchon("run-now", "greet", "--data", '{"who": "ops"}')
    assert output.startswith("greet: success")
    assert jobs.CALLS[before:] == [{"job": "greet", "reason": "manual", "data": {"who": "ops"}}]
    (record,) = runtime.get_scheduler().history("greet", 5)
    assert (record.manual, record.reason, record.status) == (True, "manual", "success")


def test_run_now_reports_a_failure(table: str) -> None:
    with pytest.raises(CommandError, match="report server said no"):
        anarchon("run-now", "nightly-fail")
    (record,) = runtime.get_scheduler().history("nightly-fail", 5)
    assert record.status == "failure" and "report server said no" in (record.error or "")


def test_orm_jobs_get_a_working_connection(table: str) -> None:
    from django.contrib.auth.models import User

    User.objects.create_user("someone")
    before = len(jobs.CALLS)
    anarchon("run-now", "count-users")
    assert jobs.CALLS[before:] == [{"job": "count-users", "users": 1}]


def test_history_filters_and_limits(table: str) -> None:
    anarchon("run-now", "greet")
    anarchon("run-now", "greet")
    with pytest.raises(CommandError):
        anarchon("run-now", "nightly-fail")
    everything = anarchon("history").splitlines()
    assert len(everything) == 4 and everything[0].split()[0] == "JOB"
    only_greet = anarchon("history", "greet", "--limit", "1").splitlines()
    assert len(only_greet) == 2 and only_greet[1].startswith("greet")
    failures = anarchon("history", "--status", "failure").splitlines()
    assert [line.split()[0] for line in failures[1:]] == ["nightly-fail"]
    assert "report server said no" in failures[1]
    assert anarchon("history", "--reason", "takeover") == "no runs\n"


def test_trigger_goes_through_the_store_and_one_instance_runs_it(table: str) -> None:
    scheduler = runtime.build_scheduler(["greet"], instance_id="worker-1")
    scheduler.start()
    try:
        before = len(jobs.CALLS)
        output = anarchon("trigger", "greet", "--data", '{"n": 1}')
        assert "requested a manual run" in output
        assert len(jobs.CALLS) == before  # never in the calling process's request
        record = wait_for(lambda: [r for r in scheduler.history("greet", 5) if r.manual
                                   and r.status == "success"], 10, "the triggered run")[0]
        assert record.instance_id == "worker-1" and record.reason == "manual"
        assert jobs.CALLS[before:] == [{"job": "greet", "reason": "manual", "data": {"n": 1}}]
    finally:
        scheduler.stop()


def test_trigger_here_runs_in_this_process(table: str) -> None:
    before = len(jobs.CALLS)
    assert anarchon("trigger", "greet", "--here").startswith("greet: success")
    assert len(jobs.CALLS) == before + 1


@pytest.mark.parametrize(("args", "message"), [
    (("trigger", "nope"), "unknown job 'nope'; choose from: count-users, greet, nightly-fail"),
    (("run-now", "nope"), "unknown job"),
    (("history", "nope"), "unknown job 'nope'; choose from"),
    (("run", "--jobs", "greet,nope"), "unknown job"),
    (("run", "--jobs", ","), "at least one job"),
    (("trigger", "greet", "--data", "{bad"), "--data must be JSON"),
    (("history", "--status", "exploded"), "invalid choice: 'exploded'"),
    (("history", "--limit", "0"), "--limit must be at least 1"),
    (("fly",), "invalid choice: 'fly'"),
])
def test_bad_arguments_raise_command_error(table: str, args: tuple[str, ...],
                                           message: str) -> None:
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        anarchon(*args)


def test_bad_settings_become_command_errors() -> None:
    with override_settings(ANARCHON={**settings.ANARCHON, "BACKEND": "ftp://x"}), \
            pytest.raises(CommandError, match=r"anarchon.E003"):
        anarchon("list")


def test_run_blocks_until_sigterm_and_stops_gracefully(table: str) -> None:
    default = signal.getsignal(signal.SIGTERM)

    def stop_when_running() -> None:
        wait_for(lambda: signal.getsignal(signal.SIGTERM) is not default, 15,
                 "run to install its signal handler")
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=stop_when_running)
    killer.start()
    output = anarchon("run", "--jobs", "greet", "--stop-timeout", "5")
    killer.join()
    assert "running greet on django:sqlite" in output
    assert output.strip().endswith("stopped")
    assert signal.getsignal(signal.SIGTERM) is default


def test_common_options_are_accepted_after_the_subcommand(table: str) -> None:
    verbose = io.StringIO()
    call_command("anarchon", "list", "-v", "2", "--no-color", "--traceback", stdout=verbose)
    assert "greet" in verbose.getvalue()
    done = subprocess.run(
        [sys.executable, "-m", "tests.django.manage", "anarchon", "list",
         "--settings=tests.django.settings", "--pythonpath", ".", "-v", "2",
         "--traceback", "--no-color"],
        env={**os.environ, "ANARCHON_DJANGO_DB": "sqlite",  # the migrated test database
             "ANARCHON_DJANGO_SQLITE": str(connection.settings_dict["NAME"])},
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "greet" in done.stdout and "unrecognized" not in done.stderr


def test_history_verbose_prints_the_stored_traceback(table: str) -> None:
    with pytest.raises(CommandError):
        anarchon("run-now", "nightly-fail")
    plain = anarchon("history", "nightly-fail")
    assert "Traceback" not in plain and "RuntimeError: the report server said no" in plain
    verbose = anarchon("history", "nightly-fail", "--verbose")
    assert "Traceback (most recent call last)" in verbose
    assert "in nightly_fail" in verbose  # the handler's frame
