"""PostgreSQL backend (psycopg 3): ``pip install "anarchon[postgres]"``.

Without psycopg (or without a libpq it can load), :class:`PostgresBackend` still imports;
constructing it raises ``ImportError`` with the install line, as every other store does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

__all__ = ["INSTALL_HINT", "PostgresBackend"]

#: what a missing driver's ``ImportError`` says
INSTALL_HINT: Final = ('PostgresBackend needs psycopg 3: pip install "anarchon[postgres]" '
                       '(or "anarchon[postgres-binary]" where no libpq is installed)')

if TYPE_CHECKING:
    from .backend import PostgresBackend
else:
    try:
        import psycopg  # noqa: F401  (loads libpq: fails here when there is none)
        import psycopg_pool  # noqa: F401
    except ImportError as _exc:
        _MISSING = _exc

        class PostgresBackend:
            """Stands in for the backend when its driver is missing."""

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                raise ImportError(f"{INSTALL_HINT} ({_MISSING})") from _MISSING

            @classmethod
            def from_url(cls, url: str) -> PostgresBackend:
                return cls(url)
    else:
        from .backend import PostgresBackend
