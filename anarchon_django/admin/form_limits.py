"""What the admin's forms refuse because it cannot run, with a message on the field.

* ``MIN_EVERY``: an interval (and an offset's grid) of less than one second — the
  core takes ``every="1ms"``, but no store claims a slot every millisecond and the
  history would only fill with skips;
* a one-off date (``at``) that is not in the future: its only slot is already past,
  so the job would never run;
* ``MAX_PARAMS_BYTES``: params (a Celery entry: args, kwargs and headers together)
  longer than 16 KiB of JSON: they are stored in every control record and read by
  every instance at each change;
* control characters (newlines, tabs, NUL …) in a job's or a handler's name: names
  are shown in pages, logs and command output one per line.
"""

from __future__ import annotations

import json
import unicodedata
from datetime import datetime
from typing import Any

from django import forms
from django.utils import timezone

from anarchon.durations import parse_duration

#: the shortest interval the admin accepts (seconds)
MIN_EVERY = 1.0
#: the longest params the admin accepts (bytes of UTF-8 JSON)
MAX_PARAMS_BYTES = 16 * 1024


def has_control_characters(text: str) -> bool:
    """Whether ``text`` holds a control or format character (Unicode Cc, Cf)."""
    return any(unicodedata.category(char) in ("Cc", "Cf") for char in text)


def check_name(form: forms.Form, field: str, value: Any) -> None:
    """A name without control characters."""
    if isinstance(value, str) and has_control_characters(value):
        form.add_error(field, "The name must not contain control characters (a newline, "
                              "a tab, NUL …): it is shown one per line in pages and logs.")


def check_every(form: forms.Form, field: str, value: Any) -> None:
    """An interval of at least ``MIN_EVERY``; what cannot be read is left to the core."""
    if value in (None, ""):
        return
    try:
        seconds = parse_duration(value, option=field)
    except (TypeError, ValueError):
        return  # the core's message says what is wrong
    if seconds < MIN_EVERY:
        form.add_error(field, f"The interval must be at least {MIN_EVERY:g} s (got "
                              f"{seconds:g} s): no store claims slots faster.")


def check_at(form: forms.Form, field: str, value: datetime | None) -> None:
    """A one-off date in the future."""
    if value is not None and value <= timezone.now():
        form.add_error(field, f"{value.isoformat()} is not in the future: a one-off job "
                              "runs once, at its date, so it would never run.")


def check_size(form: forms.Form, field: str | None, *values: Any) -> None:
    """``values`` (JSON) together at most ``MAX_PARAMS_BYTES``."""
    size = 0
    for value in values:
        if value is None:
            continue
        try:
            size += len(json.dumps(value, ensure_ascii=False).encode())
        except (TypeError, ValueError):
            return  # the field's own check reports it
    if size > MAX_PARAMS_BYTES:
        form.add_error(field, f"{size:,} bytes of JSON; at most {MAX_PARAMS_BYTES:,} are "
                              "stored (every instance reads them at each change): keep "
                              "large data in your database and pass its key.")


__all__ = ["MAX_PARAMS_BYTES", "MIN_EVERY", "check_at", "check_every", "check_name",
           "check_size", "has_control_characters"]
