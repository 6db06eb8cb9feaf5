"""Query strings the admin pages refuse before any view reads them: a value holding a
NUL character is a 400 (PostgreSQL cannot compare text with one, and no job, instance
or error text holds one), never a 500."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest

View = Callable[..., HttpResponse]


def refuse_nul(view: View) -> View:
    """``view``, answering 400 when a query-string key or value holds NUL."""
    @wraps(view)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        for key, values in request.GET.lists():
            if "\x00" in key or any("\x00" in value for value in values):
                return HttpResponseBadRequest(
                    f"the query string's {key.replace(chr(0), '?')!r} holds a NUL "
                    "character; no job, instance or error text does",
                    content_type="text/plain; charset=utf-8")
        return view(request, *args, **kwargs)

    return checked


def guarded(admin_view: Callable[[View], View]) -> Callable[[View], View]:
    """``AdminSite.admin_view`` with ``refuse_nul`` inside it (after the login and
    CSRF checks)."""
    def wrap(view: View) -> View:
        return admin_view(refuse_nul(view))

    return wrap


__all__ = ["guarded", "refuse_nul"]
