"""SQLite needs no server: each namespace gets its own file in a temporary folder."""

from __future__ import annotations

import os
import shutil
import tempfile

from . import StoreSpec

_OWN_DIR = not os.environ.get("ANARCHON_SQLITE_DIR")
_DIR = os.environ.get("ANARCHON_SQLITE_DIR") or tempfile.mkdtemp(prefix="anarchon-sqlite-")


def _url(namespace: str) -> str:
    return f"sqlite:///{os.path.join(_DIR, namespace + '.db')}?table=t_{namespace}"


def _purge(namespaces: set[str]) -> None:
    """Remove the namespaces' files (with their ``-wal``/``-shm``), and our folder."""
    if _OWN_DIR:
        shutil.rmtree(_DIR, ignore_errors=True)
        return
    for namespace in namespaces:
        for suffix in (".db", ".db-wal", ".db-shm", ".db-journal"):
            path = os.path.join(_DIR, namespace + suffix)
            if os.path.exists(path):
                os.remove(path)


STORE = StoreSpec(id="sqlite", make_url=_url, lease=True, unavailable=lambda: None,
                  purge=_purge)
