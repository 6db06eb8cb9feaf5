"""The store's side of runtime control: versioned control records, one per job.

A job's control record says whether it is paused, which schedule replaces the one its
code declares, or (for a dynamic job) everything about it. The engine owns the record's
meaning (``anarchon.control.changes``); a store keeps, per namespace:

* every job's record: its ``version`` (1, 2, … per job; 0 means no record) and its text;
* one ``generation`` number that grows with every change (the engine's cheap "did
  anything change?" question, answered inside its trigger poll);
* each job's change log (audit entries, newest kept);
* the handler names each running instance offers (for ``jobs()`` and the admin).

The version fence: a scheduled or catch-up claim carries the ``version`` of the record
it was planned from ([`ClaimRequest.version`][anarchon.backends.base.ClaimRequest]); the
store answers ``stale`` and writes nothing when the job's stored version is higher. So
once a change has been stored, no instance starts a slot planned from an older record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: how many change-log entries a store keeps per job (older ones are dropped)
CHANGE_LOG_SIZE = 100
#: an instance's handler offer is listed this long after it was last written (ms): an
#: instance killed without ``stop()`` disappears from ``jobs()`` after a day
OFFER_TTL_MS = 24 * 3_600_000


@dataclass(frozen=True)
class ControlRecord:
    """A job's stored control record: its version and its JSON text."""

    name: str
    version: int
    text: str


@dataclass(frozen=True)
class ControlSnapshot:
    """Every control record of the namespace at one ``generation``, and the handler
    names each instance offers (instance id -> names; offers older than
    ``OFFER_TTL_MS`` are left out)."""

    generation: int
    records: Mapping[str, ControlRecord] = field(default_factory=dict)
    offers: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class ControlChange:
    """Replace job ``name``'s record, if its stored version is still
    ``expected_version`` (0: no record yet), with ``text`` at version
    ``expected_version + 1``; append ``entry`` (JSON) to the job's change log."""

    name: str
    expected_version: int
    text: str
    entry: str
