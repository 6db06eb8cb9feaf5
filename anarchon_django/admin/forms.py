"""Forms of the runtime-control pages: a job's schedule override and a dynamic job.

The forms only collect what the user typed; the core checks it (``reschedule()``,
``add_job()``) and its error message is put on the form with
[`show_error()`][anarchon_django.admin.forms.show_error].
"""

from __future__ import annotations

from typing import Any

from django import forms

from anarchon_django.admin import celery_fields as celery_form
from anarchon_django.admin import form_limits
from anarchon_django.control.controls import error_text

#: the handler of Celery entries (``anarchon_celery.HANDLER``; no Celery import here)
CELERY_HANDLER = "celery:publish"

SCHEDULE_KINDS = (("every", "Every (interval)"), ("cron", "Cron"))
#: job options of a dynamic job that are durations (seconds or ``10s``, ``5m``)
DURATION_OPTIONS = ("jitter", "max_late", "timeout", "catch_up", "history_ttl")
COUNT_OPTIONS = ("max_attempts", "history_size")
#: where a core message that names a field belongs, checked in this order
_FIELD_WORDS = ("kwargs", "args", "headers", "offset", "timezone", "cron", "every", "at=",
                "params", "handler",
                *DURATION_OPTIONS, *COUNT_OPTIONS, "overlap", "name")

_DURATION_HELP = "seconds, or 500ms, 10s, 5m, 1h30m, 2d"


class ParamsField(forms.JSONField):
    """JSON params; empty (not ``null``) when there are none."""

    def prepare_value(self, value: Any) -> Any:
        return "" if value is None else super().prepare_value(value)


def _text(label: str, help_text: str = "", **kwargs: Any) -> forms.CharField:
    return forms.CharField(label=label, required=False, help_text=help_text, **kwargs)


class ScheduleForm(forms.Form):
    """``reschedule()``: a new interval or cron schedule, or back to the code's."""

    kind = forms.ChoiceField(label="Schedule", widget=forms.RadioSelect,
                             choices=(*SCHEDULE_KINDS, ("reset", "Reset to the code's schedule")),
                             initial="every")
    every = _text("Every", _DURATION_HELP)
    offset = _text("Offset", "shifts the interval's grid, e.g. 10s (optional)")
    cron = _text("Cron expression", "5 fields, or 6 with seconds first: 0 3 * * *")
    timezone = _text("Timezone", "IANA name, e.g. Europe/Berlin (default UTC)")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind = data.get("kind")
        if kind == "every" and not data.get("every"):
            self.add_error("every", "Give the interval, e.g. 5m.")
        if kind == "cron" and not data.get("cron"):
            self.add_error("cron", "Give a cron expression, e.g. 0 3 * * *.")
        if kind == "every":
            form_limits.check_every(self, "every", data.get("every"))
        return data

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``reschedule()``."""
        data = self.cleaned_data
        if data["kind"] == "reset":
            return {"reset": True}
        if data["kind"] == "every":
            return {"every": data["every"], "offset": data["offset"] or None}
        return {"cron": data["cron"], "timezone": data["timezone"] or None}


class DynamicJobForm(forms.Form):
    """``add_job()``: a dynamic job's handler, schedule, params, options and enabled."""

    name = forms.CharField(label="Name", max_length=200)
    handler = forms.CharField(label="Handler", max_length=200)
    kind = forms.ChoiceField(label="Schedule", widget=forms.RadioSelect,
                             choices=(*SCHEDULE_KINDS, ("at", "Once, at a date and time")),
                             initial="every")
    every = _text("Every", _DURATION_HELP)
    offset = _text("Offset", "shifts the interval's grid (optional)")
    cron = _text("Cron expression", "5 fields, or 6 with seconds first: 0 3 * * *")
    timezone = _text("Timezone", "IANA name, e.g. Europe/Berlin (default UTC)")
    at = forms.DateTimeField(label="At", required=False,
                             help_text="YYYY-MM-DD HH:MM[:SS] in the site's time zone, or "
                                       "ISO 8601 with an offset")
    params = ParamsField(label="Params", required=False,
                             widget=forms.Textarea(attrs={"rows": 4, "cols": 60}),
                             help_text="JSON the handler receives as ctx.params. Stored in "
                                       "the store as text: never put secrets here.")
    jitter = _text("Jitter", _DURATION_HELP)
    max_late = _text("Max late", _DURATION_HELP)
    timeout = _text("Timeout", _DURATION_HELP)
    overlap = forms.ChoiceField(label="Overlap", required=False,
                                choices=(("", "default (skip)"), ("skip", "skip"),
                                         ("allow", "allow")))
    max_attempts = forms.IntegerField(label="Max attempts", required=False)
    catch_up = _text("Catch up", _DURATION_HELP)
    history_size = forms.IntegerField(label="History size", required=False)
    history_ttl = _text("History TTL", _DURATION_HELP)
    enabled = forms.BooleanField(label="Enabled", required=False, initial=True,
                                 help_text="unticked: the job is stored but paused")

    def __init__(self, *args: Any, handlers: list[str], editing: bool = False,
                 celery_app: Any = None, tasks: list[str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.editing = editing
        self.celery_app = celery_app
        self.tasks = list(tasks or [])
        if editing:
            self.fields["name"].disabled = True
        current = str(self.initial.get("handler") or "")
        if celery_app is not None:
            celery_form.add_fields(self, self.tasks)
            handlers = sorted({*handlers, CELERY_HANDLER})
        if handlers:
            choices = [(name, name) for name in handlers]
            if current and current not in handlers:
                choices.append((current, f"{current} (no running instance offers it)"))
            self.fields["handler"] = forms.ChoiceField(
                label="Handler", choices=[("", "---------"), *choices],
                help_text="handler names this project declares (@handler) or running "
                          "instances offer")
        else:
            self.fields["handler"].help_text = ("No running instance offers a handler now: "
                                                "type the handler's name.")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind = data.get("kind")
        for needed, example in (("every", "5m"), ("cron", "0 3 * * *")):
            if kind == needed and not data.get(needed):
                self.add_error(needed, f"Give the schedule, e.g. {example}.")
        if kind == "at" and data.get("at") is None and "at" not in self.errors:
            self.add_error("at", "Give the date and time of the run.")
        if not self.editing:
            form_limits.check_name(self, "name", data.get("name"))
        form_limits.check_name(self, "handler", data.get("handler"))
        if kind == "every":
            form_limits.check_every(self, "every", data.get("every"))
        if kind == "at":
            form_limits.check_at(self, "at", data.get("at"))
        if self.is_celery(data):
            celery_form.clean(self, data, self.tasks)
            form_limits.check_size(self, "args", data.get("args"), data.get("kwargs"),
                                   data.get("headers"))
        else:
            form_limits.check_size(self, "params", data.get("params"))
        return data

    def is_celery(self, data: dict[str, Any] | None = None) -> bool:
        """Whether the job is a Celery entry (handler ``celery:publish``, app found)."""
        handler = (self.cleaned_data if data is None else data).get("handler")
        return self.celery_app is not None and handler == CELERY_HANDLER

    def celery_entry(self, name: str) -> Any:
        """The ``anarchon_celery.Entry`` the form describes (``is_celery()`` only)."""
        return celery_form.entry(self.cleaned_data, self.celery_app, name, self.job_options())

    def job_options(self) -> dict[str, Any]:
        """The job options given (durations, counts, overlap)."""
        data = self.cleaned_data
        return {option: data[option] for option in (*DURATION_OPTIONS, *COUNT_OPTIONS,
                                                    "overlap")
                if data.get(option) not in (None, "")}

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``add_job()`` (without ``name``, ``replace``, ``by``)."""
        data = self.cleaned_data
        job: dict[str, Any] = {"handler": data["handler"], "params": data.get("params")}
        if data["kind"] == "every":
            job.update(every=data["every"], offset=data["offset"] or None)
        elif data["kind"] == "cron":
            job.update(cron=data["cron"], timezone=data["timezone"] or None)
        else:
            job["at"] = data["at"]
        job.update(self.job_options())
        return job


def dynamic_initial(info: Any, schedule: Any) -> dict[str, Any]:
    """A dynamic job's form values from its ``JobInfo`` and split schedule."""
    initial: dict[str, Any] = {
        "name": info.name, "handler": info.handler, "kind": schedule.kind,
        "every": schedule.every, "offset": schedule.offset, "cron": schedule.cron,
        "timezone": schedule.timezone, "at": schedule.at, "enabled": not info.paused,
        "params": info.params,
    }
    for option in (*DURATION_OPTIONS, *COUNT_OPTIONS, "overlap"):
        if option in info.options and info.options[option] is not None:
            initial[option] = info.options[option]
    if info.handler == CELERY_HANDLER:
        initial.update(celery_form.initial(info.params))
    return initial


def show_error(form: forms.Form, exc: BaseException) -> None:
    """Put the core's message for ``exc`` on the field it names, else on the form."""
    message = error_text(exc)
    # the core's messages start "job 'NAME': " (Entry's "entry 'NAME': "); the name must
    # not pick the field
    lowered = message.lower().split("': ", 1)[-1] \
        if message.startswith(("job ", "entry ")) else message.lower()
    first = lowered.split(" ", 1)[0]
    if first in form.fields and not form.fields[first].disabled:
        form.add_error(first, message)
        return
    for word in _FIELD_WORDS:
        field = word.rstrip("=")
        if field in form.fields and not form.fields[field].disabled and word in lowered:
            form.add_error(field, message)
            return
    form.add_error(None, message)


def readonly_texts(form: forms.Form) -> None:
    """Give every bound field of ``form`` a ``readonly_text`` (its value as text, ``-``
    when empty, a choice's label, JSON as JSON): the templates show it as Django's
    admin shows a read-only field (``<div class="readonly">``) instead of an input."""
    import json

    for name, field in form.fields.items():
        bound = form[name]  # cached by the form: the template reads the same object
        value = bound.value()
        if isinstance(field, forms.BooleanField):
            text = "yes" if value else "no"
        elif isinstance(field, forms.ChoiceField):
            text = str(dict(field.choices).get(value, value) or "")  # type: ignore[arg-type]
        elif isinstance(value, (dict, list)):
            text = json.dumps(value)
        else:
            text = "" if value is None else str(value)
        bound.readonly_text = text or "-"  # type: ignore[attr-defined]
