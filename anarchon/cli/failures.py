"""One-line errors for anarchon's commands (`anarchon`, `anarchon-dramatiq`, `manage.py anarchon`).

A command catches what went wrong, prints one line naming the problem and the store (its
password redacted) on stderr, and exits 2 for a usage error or 1 for a failure; the full
traceback only when asked for (`--traceback`).
"""

from __future__ import annotations

import os
import sys
import traceback
from urllib.parse import urlsplit

from ..backends import Backend, SqliteBackend, from_url
from ..backends.urls import redact
from ..errors import IncompatibleStoreError, StoreError

__all__ = ["CliFailure", "UsageFailure", "backend_for", "check_readable", "describe",
           "report"]


class CliFailure(Exception):
    """A failure the command explains in one line; exit status 1."""

    exit_code = 1


class UsageFailure(CliFailure):
    """The command was called wrongly (an option, a URL); exit status 2."""

    exit_code = 2


def backend_for(url: str) -> Backend:
    """The backend for `url`; a malformed URL raises
    [UsageFailure][anarchon.cli.failures.UsageFailure]."""
    try:
        return from_url(url)
    except (ValueError, TypeError) as exc:
        raise UsageFailure(f"invalid backend URL: {_scrub(str(exc), url)}") from exc


def check_readable(backend: Backend) -> None:
    """Refuse to read a SQLite file that does not exist (opening it would create it)."""
    if not isinstance(backend, SqliteBackend) or backend.database in (":memory:",
                                                                       "<connection>"):
        return
    if backend.database.startswith("file:") or os.path.exists(backend.database):
        return
    raise CliFailure(
        f"no SQLite database at {os.path.abspath(backend.database)} (nothing created; "
        "sqlite:///name.db is relative to the current folder, sqlite:////abs/name.db "
        "is absolute)")


def describe(exc: BaseException, url: str | None) -> str:
    """One line for ``exc``: what went wrong and on which store."""
    message = " ".join(str(exc).split())
    if isinstance(exc, StoreError):
        message = f"cannot use the store: {message}"
    elif isinstance(exc, IncompatibleStoreError):
        message = f"the store does not fit this configuration: {message}"
    elif isinstance(exc, ImportError):
        message = f"missing driver: {message}"
    elif not isinstance(exc, (CliFailure, NotImplementedError)):
        message = f"unexpected {type(exc).__name__}: {message} (run with --traceback)"
    if url:
        message = f"{redact(url)}: {_scrub(message, url)}"
    return message


def report(prog: str, exc: BaseException, url: str | None, show_traceback: bool) -> int:
    """Print ``exc`` for ``prog`` on stderr (one line, or the traceback); the exit status."""
    if show_traceback:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    print(f"{prog}: {describe(exc, url)}", file=sys.stderr)
    return exc.exit_code if isinstance(exc, CliFailure) else 1


def _scrub(text: str, url: str) -> str:
    """``text`` without the password of ``url`` (driver messages may repeat the URL)."""
    try:
        password = urlsplit(url).password
    except ValueError:
        return text
    return text.replace(password, "***") if password else text
