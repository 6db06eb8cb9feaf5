"""PostgreSQL backend (psycopg 3): ``pip install "anarchon[postgres]"``."""

from __future__ import annotations

from .backend import PostgresBackend

__all__ = ["PostgresBackend"]
