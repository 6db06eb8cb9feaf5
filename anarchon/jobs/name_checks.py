"""Checks for names that end up in store keys, table names and stream subjects."""

from __future__ import annotations

import re

_SQL_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")
_BROKER_NAME = re.compile(r"[A-Za-z0-9_-]+")


def check_job_name(name: object) -> str:
    """A job name is any non-empty string without surrounding whitespace or NUL."""
    if not isinstance(name, str):
        raise TypeError(f"job name must be a str, got {type(name).__name__}: {name!r}")
    if not name or name != name.strip() or "\x00" in name:
        raise ValueError(f"invalid job name {name!r}: use a non-empty string without "
                         "leading/trailing spaces or NUL characters")
    if len(name) > 200:
        raise ValueError(f"invalid job name {name!r}: at most 200 characters")
    return name


def check_broker_job_name(name: str, backend: str) -> str:
    """Claim-only brokers put names in subjects and queue names: letters, digits, _ and -."""
    if not _BROKER_NAME.fullmatch(name):
        raise ValueError(
            f"invalid job name {name!r} for backend {backend}: use letters, digits, '_' and '-'"
        )
    return name


def check_table_name(table: object) -> tuple[str | None, str]:
    """Validate ``table`` or ``schema.table`` and return ``(schema, table)``.

    Identifiers are letters, digits and ``_``, not starting with a digit, at most 48
    characters (suffixes such as ``_attempts`` must still fit PostgreSQL's 63).
    """
    if not isinstance(table, str):
        raise TypeError(f"table must be a str, got {type(table).__name__}: {table!r}")
    parts = table.split(".")
    if len(parts) > 2 or not all(_SQL_IDENTIFIER.fullmatch(p) for p in parts):
        raise ValueError(
            f"invalid table {table!r}: use 'name' or 'schema.name' with letters, digits "
            "and '_' (not starting with a digit, at most 48 characters each)"
        )
    return (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])
