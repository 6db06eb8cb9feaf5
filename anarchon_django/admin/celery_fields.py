"""The Celery fields of the dynamic-job form: a registered task, its args and kwargs
(JSON) and the publish options, stored as an ``anarchon_celery.Entry``.

A job with the handler ``celery:publish`` is a Celery entry: the form builds the
``Entry`` and ``Entry.save()`` encodes and stores it (no second encoder here); editing
reads the task, args, kwargs and options back from the job's params.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from django import forms
from django.utils import timezone as django_timezone

from anarchon import parse_duration

#: publish options given as text
TEXT_OPTIONS = ("queue", "routing_key", "exchange")
#: the fields added to the form, in the template's order
FIELDS = ("task", "args", "kwargs", *TEXT_OPTIONS, "priority", "expires", "headers")
_CRON_FIELDS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")


class JSONText(forms.JSONField):
    """JSON of one type (list or dict); empty when there is none."""

    def __init__(self, *args: Any, kind: type, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind

    def prepare_value(self, value: Any) -> Any:
        return "" if value in (None, [], {}) else super().prepare_value(value)

    def validate(self, value: Any) -> None:
        super().validate(value)
        if value is not None and not isinstance(value, self.kind):
            what = "a JSON list, e.g. [1, \"a\"]" if self.kind is list else \
                "a JSON object, e.g. {\"key\": \"value\"}"
            raise forms.ValidationError(f"Give {what}.", code="invalid")


def _area(rows: int = 2) -> forms.Textarea:
    return forms.Textarea(attrs={"rows": rows, "cols": 60})


def add_fields(form: forms.Form, tasks: list[str]) -> None:
    """Add the Celery fields to ``form``; ``tasks``: the app's registered task names."""
    current = str(form.initial.get("task") or "")
    choices = [(name, name) for name in tasks]
    if current and current not in tasks:
        choices.append((current, f"{current} (not registered in the Celery app)"))
    form.fields["task"] = forms.ChoiceField(
        label="Task", required=False, choices=[("", "---------"), *choices],
        help_text="a task registered in the Celery app; the beats publish it at each slot",
        error_messages={"invalid_choice": "The Celery app has no task %(value)s."})
    form.fields["args"] = JSONText(label="Args", required=False, kind=list, widget=_area(),
                                   help_text='JSON list, e.g. [1, "a"]')
    form.fields["kwargs"] = JSONText(label="Kwargs", required=False, kind=dict,
                                     widget=_area(),
                                     help_text='JSON object, e.g. {"full": true}')
    for name in TEXT_OPTIONS:
        form.fields[name] = forms.CharField(label=name.replace("_", " ").capitalize(),
                                            required=False, max_length=200)
    form.fields["priority"] = forms.IntegerField(label="Priority", required=False,
                                                 min_value=0, max_value=255)
    form.fields["expires"] = forms.CharField(
        label="Expires", required=False,
        help_text="seconds after the publish, or an ISO 8601 date-time (naive: the site's "
                  "time zone)")
    form.fields["headers"] = JSONText(label="Headers", required=False, kind=dict,
                                      widget=_area(),
                                      help_text="JSON object of message headers")


def clean(form: forms.Form, data: dict[str, Any], tasks: list[str]) -> None:
    """Checks of a Celery entry that need more than one field (errors on the field)."""
    task = data.get("task")
    if not task and "task" not in form.errors:
        form.add_error("task", "Choose the Celery task to publish.")
    elif task and task not in tasks:
        form.add_error("task", f"The Celery app has no task {task!r}.")
    if data.get("params") is not None:
        form.add_error("params", "A Celery entry takes args and kwargs, not params: leave "
                                 "params empty.")
    if data.get("kind") == "every" and data.get("offset"):
        form.add_error("offset", "Celery entries run on the UTC grid of their interval: "
                                 "leave offset empty.")
    expires = data.get("expires")
    if expires:
        try:
            data["expires"] = _expires(str(expires))
        except ValueError as exc:
            form.add_error("expires", str(exc))


def _expires(text: str) -> float | str:
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if not seconds > 0 or seconds == float("inf"):
            raise ValueError("Give a positive number of seconds or a date-time.")
        return seconds
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is neither seconds nor an ISO 8601 date-time "
                         "(2026-12-24T18:00:00+01:00).") from None
    if when.tzinfo is None:
        when = django_timezone.make_aware(when)
    return when.astimezone(timezone.utc).isoformat()


def entry(data: dict[str, Any], app: Any, name: str, job_options: dict[str, Any]) -> Any:
    """The ``anarchon_celery.Entry`` of the cleaned form ``data``: job options go to
    ``options["anarchon"]``, a cron schedule's timezone with them."""
    from celery.schedules import crontab

    from anarchon_celery import Entry

    options: dict[str, Any] = {key: data[key] for key in TEXT_OPTIONS if data.get(key)}
    for key in ("priority", "expires", "headers"):
        if data.get(key) not in (None, "", {}):
            options[key] = data[key]
    job = dict(job_options)
    schedule: Any
    if data["kind"] == "every":
        schedule = parse_duration(data["every"], option="every")
    elif data["kind"] == "cron":
        fields = str(data["cron"]).split()
        if len(fields) != 5:
            raise ValueError(f"cron {data['cron']!r}: a Celery entry takes 5 fields (minute "
                             "hour day-of-month month day-of-week)")
        schedule = crontab(**dict(zip(_CRON_FIELDS, fields, strict=True)))
        if data.get("timezone"):
            job["timezone"] = data["timezone"]
    else:
        schedule = data["at"]
    if job:
        options["anarchon"] = job
    return Entry(app, name, data["task"], schedule, list(data.get("args") or []),
                 dict(data.get("kwargs") or {}), options, enabled=bool(data["enabled"]))


def initial(params: Any) -> dict[str, Any]:
    """The Celery fields' values from a stored entry's params (empty if not an entry's)."""
    from anarchon_celery.entries.dynamic import EntryError, Params

    try:
        stored = Params.from_json(params)
    except EntryError:
        return {}
    options = dict(stored.options or {})
    job = options.pop("anarchon", None) or {}
    values: dict[str, Any] = {"task": stored.task, "args": list(stored.args),
                              "kwargs": dict(stored.kwargs or {}), "params": None}
    values.update({key: options[key] for key in (*TEXT_OPTIONS, "priority", "expires",
                                                   "headers") if key in options})
    values.update({key: value for key, value in dict(job).items() if key != "timezone"})
    return values


__all__ = ["FIELDS", "add_fields", "clean", "entry", "initial"]
