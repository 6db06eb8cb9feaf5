"""Exceptions raised by anarchon. Each subclasses the builtin it refines."""

from __future__ import annotations


class AnarchonError(Exception):
    """Base class for anarchon's own runtime errors."""


class Aborted(AnarchonError):
    """Raised by ``ctx.signal.raise_if_aborted()`` once the run's signal is aborted."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"run aborted: {reason}")
        self.reason = reason


class JobTimeout(AnarchonError, TimeoutError):
    """Recorded as a run's error when it exceeded its ``timeout``."""


class StoreError(AnarchonError, ConnectionError):
    """The store could not be reached or answered with an error."""


class StoreDataError(StoreError, ValueError):
    """The store answered, but what it holds is not anarchon's format (a key of another
    type, a record that does not decode): a data error, never an outage. It subclasses
    [`StoreError`][anarchon.errors.StoreError] so code that retries store errors keeps
    running; the log tells it apart (see ``anarchon.engine.outages``)."""


class IncompatibleStoreError(AnarchonError, RuntimeError):
    """The store holds data of another format, or the server lacks a needed capability."""


class JobNotFoundError(AnarchonError, LookupError, ValueError):
    """No job with that name is registered on this scheduler."""


class TriggerRefusedError(AnarchonError, RuntimeError):
    """A manual run was not requested: one of the job is pending or running (see
    ``anarchon.backends.trigger_rules``), or the job is gone. ``reason`` says which:
    ``"pending"``, ``"running"`` or ``"gone"``."""

    def __init__(self, message: str, *, name: str, reason: str) -> None:
        super().__init__(message)
        self.name = name
        self.reason = reason
