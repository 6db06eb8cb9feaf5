"""Scenarios: the guarantees of docs/contract.md (*Failure scenarios*) shown with real
processes and real faults.

``anarchon scenarios --backend sqlite`` runs each situation with three instance
processes, once with a naive claim (Redis ``stream-id``/``script``; a unique insert without
lease on PostgreSQL and SQLite, as Meteor's SyncedCron does) and once with the lease, and
prints what happened, measured from handler logs and history. The engine knows nothing
of this package.
"""

from __future__ import annotations

from .measure import Measurement
from .naive import NaivePostgresBackend, NaiveSqliteBackend
from .runner import run_all, run_situation
from .situations import SITUATIONS, Situation
from .stores import Store, build_backend, store_for

__all__ = ["SITUATIONS", "Measurement", "NaivePostgresBackend", "NaiveSqliteBackend",
           "Situation", "Store", "build_backend", "run_all", "run_situation", "store_for"]
