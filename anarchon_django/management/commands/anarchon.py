"""``manage.py anarchon run | list | status | doctor | history | trigger | run-now |
forget``, runtime
control: ``pause | resume | reschedule | add | remove`` (the core CLI's options; see
``anarchon_django.control.args``) and ``import-celery-beat``
(anarchon_celery.importers.django_beat)."""

from __future__ import annotations

import argparse
import getpass
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from anarchon import Event, JobNotFoundError, RunRecord, StoreError
from anarchon.backends.frameworks import shown
from anarchon.cli.control_commands import format_changes
from anarchon.cli.failures import describe
from anarchon.cli.ops_commands import render, severity
from anarchon.control.status import status_document, status_lines
from anarchon.history import RUN_REASONS, RUN_STATUSES
from anarchon.observability import port_from, serve_metrics
from anarchon.tracebacks import summary
from anarchon_django.control import args as control_args
from anarchon_django.control import controls
from anarchon_django.control import status as store_status
from anarchon_django.control.runtime import (
    RunRefused,
    build_scheduler,
    forget,
    get_scheduler,
    history_all,
    job_names,
    job_rows,
    request_run,
)
from anarchon_django.settings.conf import SettingsError, get_settings

logger = logging.getLogger("anarchon_django")

STATUSES = RUN_STATUSES
REASONS = RUN_REASONS


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """Django's common options, accepted after the subcommand too (``anarchon list -v 2``).

    ``SUPPRESS`` keeps the values given before the subcommand when they are not repeated
    after it (``manage.py`` itself reads ``--settings``/``--pythonpath`` from anywhere).
    """
    quiet = argparse.SUPPRESS
    parser.add_argument("-v", "--verbosity", type=int, choices=[0, 1, 2, 3], default=quiet,
                        help="verbosity level (as before the subcommand)")
    parser.add_argument("--settings", default=quiet, help="settings module, e.g. "
                        "proj.settings")
    parser.add_argument("--pythonpath", default=quiet, help="a directory to add to sys.path")
    for flag in ("--traceback", "--no-color", "--force-color", "--skip-checks"):
        parser.add_argument(flag, action="store_true", default=quiet)


class Command(BaseCommand):
    help = ("Run anarchon jobs on this instance, list them, read their history, request runs; "
            "pause, resume and reschedule jobs, add and remove dynamic jobs.")

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        run = sub.add_parser("run", help="run the scheduler here until SIGTERM/SIGINT "
                             "(start it on every instance)")
        run.add_argument("--jobs", default=None,
                         help="comma-separated job names to run here (default: all)")
        run.add_argument("--metrics-port", default=None,
                         help="serve Prometheus /metrics on this port (default: "
                              "ANARCHON_METRICS_PORT; needs ANARCHON['METRICS'] = True)")
        run.add_argument("--stop-timeout", type=float, default=30.0,
                         help="seconds to wait for running jobs on stop (default 30)")
        sub.add_parser("list", help="jobs, schedules, next run, last outcome, runner")
        status = sub.add_parser("status", help="live instances, the runs they hold, next "
                                               "slots, paused jobs, last failures")
        status.add_argument("--json", dest="as_json", action="store_true",
                            help="print JSON")
        doctor = sub.add_parser("doctor", help="check the store: reachability, latency, "
                                "format (migrations), clock, permissions, instances' "
                                "versions; exit 1 on a warning, 3 on a failure")
        doctor.add_argument("--json", dest="as_json", action="store_true",
                            help="print JSON")
        history = sub.add_parser("history", help="attempts from all instances, newest first")
        history.add_argument("job", nargs="?", default=None)
        history.add_argument("--status", choices=STATUSES, default=None)
        history.add_argument("--reason", choices=REASONS, default=None)
        history.add_argument("--limit", type=int, default=20)
        history.add_argument("--verbose", action="store_true",
                             help="print each failure's stored traceback below its row")
        trigger = sub.add_parser("trigger", help="request a manual run that exactly one "
                                 "running instance executes")
        trigger.add_argument("job")
        trigger.add_argument("--data", default=None, help="JSON run data (stored: no secrets)")
        trigger.add_argument("--here", action="store_true",
                             help="run it in this process instead (like run-now)")
        forget = sub.add_parser("forget", help="remove a job's records from the store "
                                "(a job removed from the code)")
        forget.add_argument("job")
        run_now = sub.add_parser("run-now", help="run a job in this process now")
        run_now.add_argument("job")
        run_now.add_argument("--data", default=None, help="JSON run data")
        control_args.add_parsers(sub)

        try:  # django-celery-beat's importer is anarchon_celery's (it needs Celery)
            from anarchon_celery.importers.django_beat import add_parser
        except ImportError:
            pass
        else:
            add_parser(sub)
        for subparser in sub.choices.values():
            add_common_options(subparser)

    def handle(self, *args: Any, **options: Any) -> None:
        handlers: dict[str, Callable[..., None]] = {
            "run": self.do_run, "list": self.do_list, "status": self.do_status,
            "doctor": self.do_doctor,
            "history": self.do_history,
            "trigger": self.do_trigger, "run-now": self.do_run_now, "forget": self.do_forget,
            "import-celery-beat": self.do_import_celery_beat,
            **dict.fromkeys(control_args.COMMANDS, self.do_control)}
        handler = handlers[options["subcommand"]]
        try:
            handler(**options)
        except control_args.ArgumentError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        except JobNotFoundError as exc:  # before ValueError: it is one
            raise CommandError(controls.error_text(exc)) from exc
        except (TypeError, ValueError) as exc:  # the core refused the input; its message
            raise CommandError(controls.error_text(exc), returncode=2) from exc
        except SettingsError as exc:
            raise CommandError(f"{exc} [{exc.check_id}]") from exc
        except (StoreError, ImportError) as exc:
            # one line naming the store (Django's own --traceback shows where it came from)
            backend = get_settings().backend
            raise CommandError(describe(exc, backend if isinstance(backend, str) else None)
                               ) from exc

    # -- subcommands ---------------------------------------------------------------------

    def do_import_celery_beat(self, **options: Any) -> None:
        from anarchon_celery.importers.django_beat import run_command

        run_command(self.stdout, **options)

    def do_run(self, jobs: str | None = None, stop_timeout: float = 30.0,
               metrics_port: str | None = None, **_: Any) -> None:
        wanted = [name.strip() for name in jobs.split(",") if name.strip()] if jobs else None
        if jobs is not None and not wanted:
            raise CommandError("--jobs needs at least one job name")
        try:
            port = port_from(metrics_port, "--metrics-port")
            if port is not None and not get_settings().metrics:
                if metrics_port is not None:
                    raise CommandError("--metrics-port serves the metrics of "
                                       "ANARCHON['METRICS'] = True, which is not set")
                logger.warning("ANARCHON_METRICS_PORT is set but ANARCHON['METRICS'] is "
                               "not True: /metrics is not served")
            elif port is not None:
                serve_metrics(port)
        except (ValueError, ImportError, OSError) as exc:
            raise CommandError(f"--metrics-port: {exc}") from exc
        try:
            scheduler = build_scheduler(wanted)
        except LookupError as exc:
            raise CommandError(str(exc.args[0])) from exc
        for kind in ("start", "success", "failure", "interrupted", "skip", "lost", "error"):
            scheduler.on(kind, _log_event)
        names = scheduler.job_names
        logger.info("anarchon: instance %s runs %d job(s) on %s: %s", scheduler.instance_id,
                    len(names), scheduler.backend.name, ", ".join(names) or "none")
        self.stdout.write(f"anarchon: instance {scheduler.instance_id} running "
                          f"{', '.join(names) or 'no jobs'} on {scheduler.backend.name}")
        self.stdout.flush()
        scheduler.run(stop_timeout=stop_timeout)
        self.stdout.write(f"anarchon: instance {scheduler.instance_id} stopped")

    def do_list(self, **_: Any) -> None:
        rows = job_rows()
        if not rows:
            self.stdout.write("no jobs")
            return
        header = ("JOB", "FRAMEWORK", "SCHEDULE", "SOURCE", "TIMEZONE", "NEXT RUN",
                  "LAST OUTCOME", "RUNNING ON")
        table: list[tuple[str, ...]] = [header]
        for row in rows:
            last = row.last
            outcome = (f"{last.status} {_when(last.started_at)} ({last.reason}, attempt "
                       f"{last.attempt})") if last else "never ran"
            table.append((row.info.name, shown(row.info.framework), row.info.schedule,
                          row.info.source + (" (paused)" if row.info.paused else ""),
                          row.timezone or "-",
                          _when(row.info.next_run) if row.info.next_run else "-",
                          outcome, row.holder or "-"))
        self._table(table)

    def do_status(self, as_json: bool = False, **_: Any) -> None:
        status = store_status.read()
        if as_json:
            self.stdout.write(json.dumps(status_document(status), indent=2))
        else:
            self.stdout.write("\n".join(status_lines(status)))

    def do_doctor(self, as_json: bool = False, **_: Any) -> None:
        lines = store_status.diagnose()
        self.stdout.write(render(lines, as_json))
        code = severity(lines)
        if code:
            raise CommandError("the store has " + ("a failure" if code == 3 else "a warning"),
                               returncode=code)

    def do_history(self, job: str | None = None, status: str | None = None,
                   reason: str | None = None, limit: int = 20, verbose: bool = False,
                   **_: Any) -> None:
        if limit < 1:
            raise CommandError(f"--limit must be at least 1, got {limit}")
        if job is not None:
            self._known(job)
        records = history_all(job=job, status=status, reason=reason,
                              per_job=max(limit, 100))[:limit]
        if not records:
            self.stdout.write("no runs")
            return
        table: list[tuple[str, ...]] = [("JOB", "SLOT", "ATTEMPT", "REASON", "STATUS",
                                         "STARTED", "DURATION", "INSTANCE", "ERROR")]
        table += [_record_row(record) for record in records]
        self._table(table)
        if verbose:
            for record in records:
                if record.error and record.error.strip() != summary(record.error):
                    self.stdout.write(f"\n{record.name} slot {record.slot} attempt "
                                      f"{record.attempt} ({record.status}):")
                    self.stdout.write("    " + record.error.replace("\n", "\n    "))

    def do_trigger(self, job: str, data: str | None = None, here: bool = False, **_: Any) -> None:
        payload = _json(data)
        if here:
            self.do_run_now(job, data)
            return
        self._known(job)
        try:
            request_run(job, payload)
        except (NotImplementedError, RunRefused) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"requested a manual run of {job!r}; a running instance will "
                          "execute it")

    def do_run_now(self, job: str, data: str | None = None, **_: Any) -> None:
        payload = _json(data)
        try:
            scheduler = build_scheduler([job])
        except LookupError as exc:
            raise CommandError(str(exc.args[0])) from exc
        try:
            record = scheduler.run_now(job, payload)
        finally:
            scheduler.close()
        self.stdout.write(f"{job}: {record.status} in {record.duration or 0:.3f}s"
                          + (f": {record.error}" if record.error else ""))
        if record.status == "failure":
            raise CommandError(f"job {job!r} failed: {record.error}")

    def do_forget(self, job: str, **_: Any) -> None:
        scheduler = get_scheduler()
        if job in scheduler.job_names:
            self.stderr.write(f"warning: {job!r} is still declared here; the next "
                              "'anarchon run' registers it again")
        try:
            removed = forget(job, scheduler)
        except (NotImplementedError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        if not removed:
            raise CommandError(f"the store has no records of job {job!r}")
        self.stdout.write(f"forgot {job!r}: {removed} row(s) removed")

    def do_control(self, subcommand: str, job: str, **options: Any) -> None:
        """pause | resume | reschedule | add | remove | changes JOB, through the core."""
        scheduler = get_scheduler()
        if not controls.supported(scheduler):
            raise CommandError(controls.unsupported_reason(scheduler))
        if subcommand == "changes":
            self._changes(job, scheduler, options["count"], options["json"])
            return
        by = options.get("by")
        if by is not None and not by.strip():
            raise control_args.ArgumentError("--by must not be empty")
        who = by.strip() if by else _author()
        if subcommand == "reschedule":
            change = controls.reschedule(job, who, scheduler,
                                         **control_args.reschedule_arguments(options))
        elif subcommand == "add":
            # add or update (--replace, accepted as in the core CLI, is always implied)
            change = controls.add_job(job, who, scheduler, replace=True,
                                      **control_args.add_arguments(options))
        else:
            call = {"pause": controls.pause, "resume": controls.resume,
                    "remove": controls.remove_job}[subcommand]
            change = call(job, who, scheduler)
        self.stdout.write(f"{controls.describe(change)} by {change.by}")

    def _changes(self, job: str, scheduler: Any, count: int, as_json: bool) -> None:
        if count < 1:
            raise control_args.ArgumentError(f"--count must be at least 1, got {count}")
        found = controls.changes(job, count, scheduler)
        if not found:
            self._known(job)
        self.stdout.write(format_changes(found, as_json) if found else "no changes yet")

    # -- helpers -------------------------------------------------------------------------

    def _known(self, job: str) -> None:
        names = job_names(get_scheduler())
        if job not in names:
            raise CommandError(f"unknown job {job!r}; choose from: {', '.join(names) or 'none'}")

    def _table(self, rows: Sequence[Sequence[str]]) -> None:
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            self.stdout.write("  ".join(cell.ljust(width) for cell, width in
                                        zip(row, widths, strict=True)).rstrip())


def _author() -> str:
    """The ``by=`` of a change made with ``manage.py anarchon``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name in this container
        user = "unknown"
    return f"manage.py:{user}"


def _json(data: str | None) -> Any:
    if data is None:
        return None
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise CommandError(f"--data must be JSON: {exc}") from exc


def _when(moment: Any) -> str:
    return str(timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S %Z"))


def _record_row(record: RunRecord) -> tuple[str, ...]:
    return (record.name, str(record.slot), str(record.attempt), record.reason, record.status,
            _when(record.started_at),
            f"{record.duration:.3f}s" if record.duration is not None else "-",
            record.instance_id, summary(record.error)[:80])


def _log_event(event: Event) -> None:
    # a store error: the core's outage log says it once (one WARNING when the store stops
    # answering, one INFO when it answers again: anarchon.engine.outages); each call's error is
    # DEBUG here, or a 45 s outage would log dozens of tracebacks per process
    level = (logging.DEBUG if event.type == "error" else
             logging.WARNING if event.type in ("failure", "lost") else logging.INFO)
    error = event.error
    logger.log(level, "%s %s slot=%s attempt=%s reason=%s instance=%s%s", event.type,
               event.name, event.slot, event.attempt, event.reason, event.instance_id,
               f" error={error!r}" if error else "",
               exc_info=(type(error), error, error.__traceback__)
               if error is not None and level >= logging.WARNING else None)
