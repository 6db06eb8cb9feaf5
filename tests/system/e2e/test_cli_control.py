"""``anarchon pause|resume|reschedule|add|remove|changes`` and the richer ``anarchon jobs``,
run as real subprocesses: each prints what it changed, a running instance applies it, and
bad input is one line on stderr with a non-zero exit (2: refused as given, 1: unknown job
or a store without runtime control). SQLite for most; the server stores once they
implement runtime control (see ``SERVER_STORES``)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from anarchon import Scheduler, from_url
from anarchon.context import RunContext
from anarchon.events import Event
from tests.harness.examples import store_url
from tests.system.e2e.test_cli import command, one_line_error

pytestmark = pytest.mark.e2e

#: the server stores the CLI is also run against (besides SQLite in every other test)
SERVER_STORES = ["postgres", "redis"]


def ok(*args: str) -> str:
    result = command(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


def without_next_run(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in job.items() if k != "next_run"} for job in jobs]


def listing(url: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ok("jobs", "--json", "--backend", url))
    data["by_name"] = {job["name"]: job for job in data["jobs"]}
    return data


def declare(url: str, *names: str) -> None:
    """Jobs an instance declared in code (registered before start, so the store has
    them once ``start()`` returned)."""
    scheduler = Scheduler(from_url(url))
    for name in names:
        scheduler.every(name, "1h", lambda ctx: None)
    scheduler.start()
    scheduler.stop()


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.05)


def check_code_job_control(url: str) -> None:
    """pause → resume → reschedule (every, cron) → reset, each printed, listed and
    logged."""
    declare(url, "nightly")
    listed = listing(url)["by_name"]["nightly"]
    assert listed | {"next_run": None, "last_registered": None} == {
        "name": "nightly", "kind": "every", "schedule": "every 1h", "next_run": None,
        "options": {}, "skipped": {}, "paused": False, "source": "code", "version": 0,
        "handler": None, "params": None, "runnable_by": [], "framework": None,
        "last_registered": None, "gone": False}
    assert listed["last_registered"] is not None  # registered by the instance just now

    out = ok("pause", "nightly", "--by", "ops on call", "--backend", url)
    assert out == "paused job 'nightly' on every instance (version 1, by ops on call)\n"
    job = listing(url)["by_name"]["nightly"]
    assert job["paused"] is True and job["next_run"] is None and job["version"] == 1
    text = ok("jobs", "--backend", url).splitlines()
    assert text[0].split() == ["NAME", "SCHEDULE", "SOURCE", "FRAMEWORK", "NEXT", "RUN",
                               "(UTC)", "STATE"]
    assert text[1].split() == ["nightly", "every", "1h", "code", "plain", "-", "PAUSED"]

    out = ok("resume", "nightly", "--backend", url)
    assert out.startswith("resumed job 'nightly' on every instance (version 2, by "), out
    assert "@" in out  # the default author: user@host

    out = ok("reschedule", "nightly", "--every", "5m", "--offset", "10s", "--backend", url)
    assert out.startswith("rescheduled job 'nightly': every 300s +10s (version 3"), out
    job = listing(url)["by_name"]["nightly"]
    assert (job["source"], job["schedule"], job["paused"]) == ("override",
                                                               "every 300s +10s", False)
    assert job["next_run"] is not None  # computed from the override

    out = ok("reschedule", "nightly", "--cron", "0 3 * * *", "--timezone", "Europe/Berlin",
             "--backend", url)
    assert "cron 0 3 * * * (Europe/Berlin) (version 4" in out, out
    job = listing(url)["by_name"]["nightly"]
    assert job["kind"] == "cron" and job["next_run"].endswith(("T02:00:00+00:00",
                                                               "T01:00:00+00:00"))

    out = ok("reschedule", "nightly", "--reset", "--backend", url)
    assert out.startswith("job 'nightly' is back on the schedule its code declares "
                          "(version 5"), out
    job = listing(url)["by_name"]["nightly"]
    assert (job["source"], job["schedule"]) == ("code", "every 1h")

    log = json.loads(ok("changes", "nightly", "--json", "--backend", url))
    assert [(c["version"], c["action"]) for c in log] == [
        (5, "reset"), (4, "reschedule"), (3, "reschedule"), (2, "resume"), (1, "pause")]
    assert log[-1]["by"] == "ops on call" and log[2]["detail"] == {
        "schedule": "every 300s +10s"}
    lines = ok("changes", "nightly", "--count", "2", "--backend", url).splitlines()
    assert len(lines) == 2 and "version 5" in lines[0] and "reset" in lines[0], lines
    assert "schedule cron 0 3 * * * (Europe/Berlin)" in lines[1], lines


def test_code_job_control_on_sqlite() -> None:
    check_code_job_control(store_url("sqlite"))


@pytest.mark.parametrize("store", SERVER_STORES)
def test_code_job_control_on_a_server_store(store: str) -> None:
    check_code_job_control(store_url(store))


def test_a_job_without_changes_says_so() -> None:
    url = store_url("sqlite")
    declare(url, "quiet")
    result = command("changes", "quiet", "--backend", url)
    assert result.returncode == 0 and result.stdout == ""
    assert result.stderr.strip() == "no changes yet"
    assert json.loads(ok("changes", "quiet", "--json", "--backend", url)) == []


def test_dynamic_job_runs_where_its_handler_is_offered_and_pauses() -> None:
    """``anarchon add`` → the running instance offering the handler runs the job with the
    stored params and options; ``jobs`` lists who can run it; ``pause`` → its slots are
    skipped as ``paused``; ``remove`` → gone from every listing."""
    url = store_url("sqlite")
    seen: list[Any] = []
    skips: list[Event] = []
    lock = threading.Lock()

    def report(ctx: RunContext) -> None:
        with lock:
            seen.append(ctx.params)

    def on_skip(event: Event) -> None:
        if event.reason == "paused":
            with lock:
                skips.append(event)

    scheduler = Scheduler(from_url(url), instance_id="worker-1", lease="2s",
                          heartbeat="0.2s", jitter=0)
    scheduler.handler("report", report)
    scheduler.on("skip", on_skip)
    scheduler.start()
    try:
        wait_for(lambda: "worker-1" in listing(url)["handlers"], 10, "the handler offer")
        assert listing(url)["handlers"] == {"worker-1": ["report"]}
        out = command("add", "rep", "--handler", "report", "--every", "1s", "--params",
                      '{"region": "eu", "limit": 3}', "--option", "jitter=0",
                      "--option", "timeout=30s", "--option", "max_attempts=2",
                      "--backend", url)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("added dynamic job 'rep': handler 'report', every 1s "
                                     "(version 1, by "), out.stdout
        assert out.stderr == ""  # the handler is offered: no note
        wait_for(lambda: len(seen) >= 2, 15, "two runs of the dynamic job")
        assert seen[0] == {"region": "eu", "limit": 3}
        job = listing(url)["by_name"]["rep"]
        assert (job["source"], job["handler"], job["runnable_by"]) == ("dynamic", "report",
                                                                       ["worker-1"])
        assert job["options"] == {"jitter": 0, "timeout": "30s", "max_attempts": 2}
        assert job["params"] == {"region": "eu", "limit": 3}
        text = ok("jobs", "--backend", url)
        assert "handler report (runnable by: worker-1)" in text, text
        assert "handlers offered (instance: handler names):\n  worker-1: report" in text

        ok("pause", "rep", "--backend", url)
        wait_for(lambda: len(skips) >= 1, 10, "a slot skipped as paused")
        with lock:
            runs = len(seen)
        wait_for(lambda: len(skips) >= 3, 10, "two more slots skipped as paused")
        assert len(seen) == runs, "a paused job ran"
        ok("resume", "rep", "--backend", url)
        wait_for(lambda: len(seen) > runs, 10, "a run after resume")

        out = command("add", "rep", "--handler", "report", "--every", "2s", "--replace",
                      "--backend", url)
        assert out.returncode == 0 and "updated dynamic job 'rep'" in out.stdout, out.stderr
        ok("remove", "rep", "--backend", url)
        assert "rep" not in listing(url)["by_name"]
        log = json.loads(ok("changes", "rep", "--json", "--backend", url))
        assert [c["action"] for c in log] == ["remove", "update", "resume", "pause", "add"]
    finally:
        scheduler.stop()


def test_adding_a_job_nobody_can_run_notes_it() -> None:
    url = store_url("sqlite")
    declare(url)
    out = command("add", "later", "--handler", "nobody", "--at", "2031-01-01T03:00:00+00:00",
                  "--backend", url)
    assert out.returncode == 0, out.stderr
    assert "added dynamic job 'later': handler 'nobody', at 2031-01-01T03:00:00+00:00" \
        in out.stdout
    assert out.stderr.strip() == ("note: no running instance offers handler 'nobody' yet; "
                                  "the job runs once one does")
    job = listing(url)["by_name"]["later"]
    assert job["runnable_by"] == [] and job["next_run"] == "2031-01-01T03:00:00+00:00"
    assert "handler nobody (runnable by: no instance offers it)" in ok("jobs", "--backend",
                                                                       url)


@pytest.fixture(scope="module")
def control_url() -> str:
    """One SQLite store with a code job ``nightly`` and a dynamic job ``rep``."""
    url = store_url("sqlite")
    declare(url, "nightly")
    ok("add", "rep", "--handler", "report", "--every", "1h", "--backend", url)
    return url


@pytest.mark.parametrize(("args", "code", "needle"), [
    (["pause", "nosuch"], 1, "unknown job 'nosuch' (jobs in this store: nightly, rep)"),
    (["resume", "nosuch"], 1, "unknown job 'nosuch'"),
    (["reschedule", "nosuch", "--every", "5m"], 1, "unknown job 'nosuch'"),
    (["remove", "nosuch"], 1, "unknown job 'nosuch' (jobs in this store: nightly, rep)"),
    (["changes", "nosuch"], 1, "unknown job 'nosuch' (jobs in this store: nightly, rep)"),
    (["reschedule", "nightly", "--cron", "61 * * * *"], 2, "job 'nightly': invalid cron"),
    (["reschedule", "nightly", "--cron", "0 3 * * *", "--timezone", "Mars/Olympus"], 2,
     "unknown timezone 'Mars/Olympus'"),
    (["reschedule", "nightly", "--every", "soon"], 2, "job 'nightly': every"),
    (["reschedule", "nightly", "--reset", "--offset", "1s"], 2,
     "--offset goes with --every only"),
    (["reschedule", "nightly", "--every", "1m", "--timezone", "UTC"], 2,
     "--timezone goes with --cron only"),
    (["reschedule", "rep", "--reset"], 2, "job 'rep' is a dynamic job: it has no schedule"),
    (["remove", "nightly"], 2, "job 'nightly' is not a dynamic job; a job declared in code "
                               "is removed from the code (`anarchon pause` stops it now)"),
    (["add", "nightly", "--handler", "h", "--every", "1m"], 2,
     "job 'nightly' is declared in code"),
    (["add", "rep", "--handler", "h", "--every", "1m"], 2,
     "job 'rep' exists already; use --replace to update it, or `anarchon remove` first"),
    (["add", "new", "--handler", "h", "--every", "1m", "--params", "{region: eu}"], 2,
     "--params must be JSON, got '{region: eu}'"),
    (["add", "new", "--handler", "h", "--every", "1m", "--params", "NaN"], 2,
     "params must be JSON-serialisable"),
    (["add", "new", "--handler", "h", "--every", "1m", "--option", "jitter"], 2,
     "--option takes key=value, got 'jitter'"),
    (["add", "new", "--handler", "h", "--every", "1m", "--option", "=1"], 2,
     "--option takes key=value, got '=1'"),
    (["add", "new", "--handler", "h", "--every", "1m", "--option", "jitter=1",
      "--option", "jitter=2"], 2, "--option jitter is given twice"),
    (["add", "new", "--handler", "h", "--every", "1m", "--option", "color=red"], 2,
     "job 'new': unknown option(s) ['color']"),
    (["add", "new", "--handler", "h", "--every", "1m", "--option", "data=1"], 2,
     "a dynamic job takes --params, not data"),
    (["add", "new", "--handler", "h", "--every", "1m", "--option", "timeout=-1"], 2,
     "timeout"),
    (["add", "new", "--handler", "h", "--at", "tomorrow"], 2,
     "job 'new': cannot read 'tomorrow'"),
    (["add", " padded", "--handler", "h", "--every", "1m"], 2,
     "invalid job name ' padded'"),
    (["pause", "nightly", "--by", " "], 2, "--by must not be empty"),
    (["changes", "nightly", "--count", "0"], 2, "--count must be at least 1, got 0"),
])
def test_bad_input_is_one_line_and_changes_nothing(control_url: str, args: list[str],
                                                   code: int, needle: str) -> None:
    before = without_next_run(listing(control_url)["jobs"])
    line = one_line_error(command(*args, "--backend", control_url), code)
    assert line.startswith(f"anarchon {args[0]}: {control_url}: "), line
    assert needle in line, line
    assert without_next_run(listing(control_url)["jobs"]) == before


@pytest.mark.parametrize(("args", "needle"), [
    (["reschedule", "job"], "one of the arguments --every --cron --reset is required"),
    (["reschedule", "job", "--every", "1m", "--cron", "* * * * *"], "not allowed with"),
    (["add", "job", "--every", "1m"], "the following arguments are required: --handler"),
    (["add", "job", "--handler", "h"], "one of the arguments --every --cron --at is required"),
])
def test_missing_or_conflicting_options_are_usage_errors(args: list[str], needle: str) -> None:
    result = command(*args, "--backend", "sqlite:///unused.db")
    assert result.returncode == 2 and needle in result.stderr, result.stderr


@pytest.mark.parametrize("store", ["nats", "rabbitmq"])
@pytest.mark.parametrize("args", [["pause", "job"], ["resume", "job"],
                                  ["reschedule", "job", "--every", "1m"],
                                  ["add", "job", "--handler", "h", "--every", "1m"],
                                  ["remove", "job"], ["changes", "job"]])
def test_claim_only_backends_refuse_runtime_control(store: str, args: list[str]) -> None:
    url = store_url(store)
    line = one_line_error(command(*args, "--backend", url), 1)
    assert "does not support runtime control (pause, reschedule, dynamic jobs)" in line, line
    assert "unexpected" not in line and "Traceback" not in line


def test_jobs_on_a_claim_only_backend_lists_no_handlers() -> None:
    url = store_url("nats")
    result = command("jobs", "--json", "--backend", url)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"jobs": [], "handlers": {}}


def test_a_missing_sqlite_file_is_not_created_by_a_change(tmp_path: Path) -> None:
    result = command("pause", "job", "--backend", "sqlite:///typo.db", cwd=tmp_path)
    line = one_line_error(result, 1)
    assert "no SQLite database at" in line and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("store", ["sqlite", *SERVER_STORES])
def test_add_remove_add_and_forget_of_a_name_a_running_instance_registered(
        store: str) -> None:
    """``anarchon add`` → the running instance runs (and registers) the job → ``remove``
    → ``add`` again at once (never "declared in code") → ``remove`` → ``forget`` finds
    the removed job's records and removes them → ``add`` still works."""
    url = store_url(store)
    seen: list[Any] = []
    scheduler = Scheduler(from_url(url), instance_id="worker-1", lease="2s",
                          heartbeat="0.2s", jitter=0)
    scheduler.handler("report", lambda ctx: seen.append(ctx.params))
    scheduler.start()
    try:
        ok("add", "again", "--handler", "report", "--every", "1s", "--params", "1",
           "--backend", url)
        wait_for(lambda: 1 in seen, 15, "a run of the first job")
        ok("remove", "again", "--backend", url)
        assert "again" not in listing(url)["by_name"]
        out = ok("add", "again", "--handler", "report", "--every", "1s", "--params", "2",
                 "--backend", url)
        assert out.startswith("added dynamic job 'again'"), out
        wait_for(lambda: 2 in seen, 15, "a run of the re-added job")
        assert listing(url)["by_name"]["again"]["params"] == 2
        ok("remove", "again", "--backend", url)
        wait_for(lambda: "again" not in scheduler.job_names, 10, "the instance to drop it")
        line = one_line_error(command("pause", "again", "--backend", url), 1)
        assert "unknown job 'again'" in line, line
        out = ok("forget", "again", "--backend", url)
        assert out.startswith("would remove job 'again' (a removed dynamic job)"), out
        out = ok("forget", "again", "--yes", "--backend", url)
        assert out.startswith("removed job 'again' (a removed dynamic job): "), out
        line = one_line_error(command("forget", "again", "--backend", url), 1)
        assert "unknown job 'again'" in line, line
        ok("add", "again", "--handler", "report", "--every", "1h", "--backend", url)
        assert listing(url)["by_name"]["again"]["source"] == "dynamic"
    finally:
        scheduler.stop()
