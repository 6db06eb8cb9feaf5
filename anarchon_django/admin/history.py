"""The run history page on the ``"django"`` store: filtered, searched, sorted and paged
by the database (a queryset handed to ``Paginator``), each row linking to its own
attempt by id.

Each row shows the framework that declared its job (``celery``, ``dramatiq``,
``plain``; the label of the Jobs page, ``anarchon.backends.frameworks.shown``), taken
from the known jobs' registrations, which the page reads once (``frameworks()``); a job
no longer known shows none."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Page, Paginator
from django.urls import reverse

from anarchon import JobInfo
from anarchon.backends.frameworks import shown
from anarchon_django.control import direct
from anarchon_django.store.models import StoreAttempt
from anarchon_django.store.operations import Store, record

#: column headers of the history table: (label, sort key or None)
COLUMNS = (("Job", "job"), ("Framework", None), ("Slot", "scheduled"),
           ("Try", "attempt"), ("Reason", "reason"), ("Status", "status"), ("Started", "started"),
           ("Duration", None), ("Instance", "instance"))


@dataclass(frozen=True)
class HistoryPage:
    """What the template needs for one page."""

    page: Page[Any]
    rows: list[dict[str, Any]]
    total: int
    instances: list[str]
    headers: list[dict[str, Any]]


def frameworks(infos: Iterable[JobInfo]) -> dict[str, str]:
    """Job name -> the framework the Jobs page shows for it (``shown()``: ``celery``,
    ``dramatiq``, ``plain``), from the known jobs (``runtime.job_infos()``, read once
    per page)."""
    return {info.name: shown(info.framework) for info in infos}


def build(store: Store, query: dict[str, str], search: direct.HistoryQuery,
          per_page: int, labels: Mapping[str, str]) -> HistoryPage:
    """One page of the history ``search`` selects, sorted by ``query["o"]``; ``labels``
    (``frameworks()``) gives each row its job's framework (``None``: not known)."""
    order = query.get("o") or "-started"
    if order.lstrip("-") not in direct.ORDERINGS:
        order = "-started"
    page = Paginator(direct.attempts(store, search, order), per_page).get_page(query.get("p"))
    detail = reverse("admin:anarchon_django_run_detail")
    rows = []
    for row in page:
        found = record(row)
        rows.append({"record": found, "url": f"{detail}?id={row.pk}",
                     "framework": labels.get(found.name)})
    return HistoryPage(page, rows, page.paginator.count, direct.instances(store),
                       _headers(query, order))


def _headers(query: dict[str, str], order: str) -> list[dict[str, Any]]:
    headers = []
    for label, key in COLUMNS:
        current = None
        if key is not None and order.lstrip("-") == key:
            current = "descending" if order.startswith("-") else "ascending"
        url = None
        if key is not None:
            flipped = key if current == "descending" else f"-{key}"
            url = "?" + urlencode({**{k: v for k, v in query.items() if v and k != "p"},
                                   "o": flipped})
        headers.append({"label": label, "url": url, "sorted": current})
    return headers


def attempt(store: Store, ident: str) -> Any:
    """The attempt with primary key ``ident`` as a record, or None."""
    try:
        key = int(ident)
    except ValueError:
        return None
    if not 0 < key < 2**63:  # beyond a BIGINT: the database would raise
        return None
    row = StoreAttempt.objects.using(store.alias).filter(pk=key).first()
    return None if row is None else record(row)
