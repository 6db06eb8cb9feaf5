"""The ``"django"`` backend on mariadb (conformance suite only: see django_support)."""

from __future__ import annotations

from . import StoreSpec


def _url(namespace: str) -> str:
    from .django_support import prepare

    return prepare("mariadb", namespace)


def _unavailable() -> str | None:
    from .django_support import unavailable

    return unavailable("mariadb")


def _purge(namespaces: set[str]) -> None:
    from .django_support import drop

    drop("mariadb", namespaces)


STORE = StoreSpec(id="django-mariadb", make_url=_url, lease=True, unavailable=_unavailable,
                  purge=_purge, conformance_only=True)
