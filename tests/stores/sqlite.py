"""SQLite needs no server: each namespace gets its own file in a temporary folder."""

from __future__ import annotations

import os
import tempfile

from . import StoreSpec

_DIR = os.environ.get("ANARCHON_SQLITE_DIR") or tempfile.mkdtemp(prefix="anarchon-sqlite-")


def _url(namespace: str) -> str:
    return f"sqlite:///{os.path.join(_DIR, namespace + '.db')}?table=t_{namespace}"


STORE = StoreSpec(id="sqlite", url_for=_url, lease=True, unavailable=lambda: None)
