"""Where scenarios run: one store per ``--backend``, one namespace per situation.

Servers are found through the same environment variables as the test suites
(``ANARCHON_REDIS_URL``, ``ANARCHON_VALKEY_URL``, ``ANARCHON_POSTGRES_URL``), with loopback
defaults for Redis and PostgreSQL. SQLite needs no server: each namespace is a file in a
temporary folder (``ANARCHON_SQLITE_DIR`` to choose it).

Backend URLs are those of [`anarchon.from_url()`][anarchon.from_url], plus ``naive+sqlite:///path?table=``
and ``naive+postgresql://...?table=`` for the unique-insert comparison claim.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from anarchon.backends import Backend, from_url

from .naive import NaivePostgresBackend, NaiveSqliteBackend

DEFAULT_URLS = {
    "redis": ("ANARCHON_REDIS_URL", "redis://127.0.0.1:6379/0"),
    "valkey": ("ANARCHON_VALKEY_URL", ""),
    "postgres": ("ANARCHON_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    "sqlite": ("ANARCHON_SQLITE_DIR", ""),
}
#: the comparison strategies of each store, then ``lease``
STRATEGIES = {
    "redis": ("stream-id", "script", "lease"),
    "valkey": ("stream-id", "script", "lease"),
    "postgres": ("naive", "lease"),
    "sqlite": ("naive", "lease"),
}


@dataclass(frozen=True)
class Store:
    """One ``--backend`` choice: where its server is and which strategies it has."""

    kind: str
    base: str

    @property
    def strategies(self) -> tuple[str, ...]:
        return STRATEGIES[self.kind]

    def url(self, strategy: str, namespace: str) -> str:
        """The backend URL of ``strategy`` in a fresh ``namespace``."""
        if strategy not in self.strategies:
            raise ValueError(f"backend {self.kind} has no strategy {strategy!r}; use one of: "
                             + ", ".join(self.strategies))
        if self.kind in ("redis", "valkey"):
            parts = urlsplit(self.base)
            query = [(k, v) for k, v in parse_qsl(parts.query)
                     if k not in ("prefix", "strategy", "lab")]
            query += [("prefix", f"{namespace}:"), ("strategy", strategy)]
            if strategy != "lease":
                query.append(("lab", "1"))  # from_url builds a comparison only when asked
            scheme = "valkey" if self.kind == "valkey" else parts.scheme
            return urlunsplit((scheme, parts.netloc, parts.path, urlencode(query), ""))
        if self.kind == "postgres":
            separator = "&" if "?" in self.base else "?"
            url = f"{self.base}{separator}table={namespace}"
            return "naive+" + url if strategy == "naive" else url
        path = os.path.join(self.base, namespace + ".db")
        url = f"sqlite:///{path}?table={namespace}"
        return "naive+" + url if strategy == "naive" else url


def store_for(kind: str, url: str | None = None) -> Store:
    """The store for ``--backend kind``; ``url`` overrides the environment."""
    if kind not in DEFAULT_URLS:
        raise ValueError(f"unknown scenario backend {kind!r}; use one of: "
                         + ", ".join(DEFAULT_URLS))
    variable, default = DEFAULT_URLS[kind]
    base = url or os.environ.get(variable) or default
    if kind == "sqlite" and not base:
        base = tempfile.mkdtemp(prefix="anarchon-scenarios-")
    if not base:
        raise ValueError(f"backend {kind} needs a server URL: set {variable} (python "
                         "scripts/servers.py start) or pass --url")
    return Store(kind, base)


def build_backend(url: str) -> Backend:
    """[`anarchon.from_url()`][anarchon.from_url], plus the ``naive+`` comparison URLs."""
    if not url.startswith("naive+"):
        return from_url(url)
    inner = url[len("naive+"):]
    parts = urlsplit(inner)
    query = dict(parse_qsl(parts.query))
    table = query.pop("table", "anarchon_naive")
    if parts.scheme == "sqlite":
        path = unquote(parts.path)
        return NaiveSqliteBackend(path[1:] if path.startswith("/") else path, table=table)
    if parts.scheme in ("postgres", "postgresql"):
        dsn = urlunsplit(parts._replace(query=urlencode(query)))
        return NaivePostgresBackend(dsn, table=table)
    raise ValueError(f"no naive claim for {parts.scheme!r} in {url!r}: use naive+sqlite:// "
                     "or naive+postgresql://")


async def cleanup(url: str, namespace: str) -> None:
    """Remove what a situation left in its namespace (keys, tables or files)."""
    inner = url[len("naive+"):] if url.startswith("naive+") else url
    scheme = urlsplit(inner).scheme
    if scheme == "sqlite":
        path = unquote(urlsplit(inner).path)[1:]
        for suffix in ("", "-wal", "-shm"):
            try:
                os.remove(path + suffix)
            except FileNotFoundError:
                pass
    elif scheme in ("postgres", "postgresql"):
        await _drop_tables(inner, namespace)
    elif scheme in ("redis", "rediss", "valkey", "valkeys"):
        await _delete_keys(inner, namespace)


async def _drop_tables(url: str, namespace: str) -> None:
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "table"]
    dsn = urlunsplit(parts._replace(query=urlencode(query)))
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
            "AND tablename LIKE %s", (namespace + "%",))
        for (table,) in await cursor.fetchall():
            await conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(
                sql.Identifier(table)))


async def _delete_keys(url: str, namespace: str) -> None:
    import redis.asyncio

    parts = urlsplit(url)
    scheme = parts.scheme.replace("valkey", "redis")
    client = redis.asyncio.Redis.from_url(urlunsplit((scheme, parts.netloc, parts.path, "", "")))
    try:
        keys = [key async for key in client.scan_iter(match=f"{namespace}:*", count=500)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


__all__ = ["STRATEGIES", "Store", "build_backend", "cleanup", "store_for"]
