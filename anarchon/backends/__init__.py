"""Backends, and [`from_url()`][anarchon.backends.from_url] to build one from a URL.

Drivers are imported lazily: a missing extra fails only when its backend is used, with
an ``ImportError`` that gives the ``pip install`` line.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from .base import Backend, ClaimBackend, LeaseBackend
from .schemes import backend_class
from .sqlite import SqliteBackend

__all__ = ["Backend", "ClaimBackend", "LeaseBackend", "SqliteBackend", "from_url"]


def from_url(url: str, **options: Any) -> Backend:
    """Build a backend from a URL such as ``sqlite:///jobs.db`` or ``redis://localhost``.

    Query parameters the backend knows (``table``, ``prefix``, ``strategy`` …) become
        options; keyword ``options`` override them. Schemes come from the core and from the
    ``anarchon.backends`` entry-point group (``anarchon.backends.schemes``; the Django
    store's ``django://`` is registered there for ``anarchon_django``); an unknown
    scheme raises ``ValueError`` listing the known ones.
    """
    if not isinstance(url, str):
        raise TypeError(f"backend URL must be a str, got {type(url).__name__}")
    cls: Any = backend_class(urlsplit(url).scheme.lower(), url)
    backend: Backend = cls.from_url(url, **options)
    return backend
