"""Which framework layer declared a job: ``JobInfo.framework`` and how stores keep it.

A framework layer passes ``framework=`` when it declares a job
(``declare_job(..., framework="celery")``): ``anarchon_celery`` for its beat entries,
``anarchon_dramatiq`` for its marked actors. A dynamic job's framework is the namespace
of its handler (``celery:publish``, ``dramatiq:<actor>``). A plain job has none
(``None``), and so has a job registered before frameworks were recorded.

Stores keep the framework with the registered job's kind, as ``"<framework>:<kind>"``
(e.g. ``"celery:cron"``), in the column, field or document that always held the kind:
no store changes its format, and every process that reads the store (``anarchon list``,
``manage.py anarchon list``, the Django admin) sees which layer declared each job.
"""

from __future__ import annotations

import re

from .base import JobSpec

#: the frameworks whose handler names mark their dynamic jobs (``<framework>:<name>``)
HANDLER_FRAMEWORKS = frozenset({"celery", "dramatiq"})
#: what tables and pages show for a plain job (no framework)
PLAIN = "plain"
#: between the framework and the kind in a stored registration
SEPARATOR = ":"
_NAME = re.compile(r"[a-z][a-z0-9_]{0,15}")


def check_framework(framework: object) -> str | None:
    """``framework`` if it is ``None`` or a framework name (lowercase letters, digits
    and ``_``, starting with a letter, at most 16 characters); else ``TypeError`` or
    ``ValueError``."""
    if framework is None:
        return None
    if not isinstance(framework, str):
        raise TypeError(f"framework must be a str or None, got {type(framework).__name__}")
    if not _NAME.fullmatch(framework):
        raise ValueError(f"framework must be a lowercase name such as 'celery' (letters, "
                         f"digits and _, at most 16 characters), got {framework!r}")
    return framework


def handler_framework(handler: str | None) -> str | None:
    """The framework a dynamic job's handler belongs to: ``"celery"`` for
    ``celery:publish``, ``"dramatiq"`` for ``dramatiq:<actor>``; ``None`` for others."""
    if handler is None:
        return None
    prefix, separator, _ = handler.partition(SEPARATOR)
    return prefix if separator and prefix in HANDLER_FRAMEWORKS else None


def shown(framework: str | None) -> str:
    """How tables and pages show a job's framework: its name, or ``"plain"``."""
    return PLAIN if framework is None else framework


def stored_kind(spec: JobSpec) -> str:
    """What a store keeps as ``spec``'s kind: ``"<framework>:<kind>"``, or the kind."""
    if spec.framework is None:
        return spec.kind
    return f"{spec.framework}{SEPARATOR}{spec.kind}"


def stored_spec(name: str, kind: str, schedule: str,
                registered_ms: int | None = None) -> JobSpec:
    """The registration a store row holds (last registered at ``registered_ms``, if the
    store keeps it); a kind without a framework (a plain job, or a row written before
    frameworks were recorded) reads as a plain job. TypeError when a value is not of
    the type anarchon writes (a row it did not write: see ``decoding.readable``)."""
    if not all(isinstance(v, str) for v in (name, kind, schedule)) or not (
            registered_ms is None or (isinstance(registered_ms, int)
                                      and not isinstance(registered_ms, bool))):
        raise TypeError("a job registration holds a value of the wrong type: "
                        f"{(name, kind, schedule, registered_ms)!r}")
    prefix, separator, rest = kind.partition(SEPARATOR)
    if separator and rest and _NAME.fullmatch(prefix):
        return JobSpec(name, rest, schedule, prefix, registered_ms)
    return JobSpec(name, kind, schedule, None, registered_ms)


__all__ = ["HANDLER_FRAMEWORKS", "PLAIN", "check_framework", "handler_framework", "shown",
           "stored_kind", "stored_spec"]
