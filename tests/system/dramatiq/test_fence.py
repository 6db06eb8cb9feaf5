"""The lease check right before each send (``anarchon.handoff.fence.ensure_lease``, as the Celery
layer's publish makes it): a scheduler paused past its lease between winning a slot and
sending does not send once it wakes, because a backup has taken the slot over and sent.

Three real ``anarchon-dramatiq`` processes run the ``pause`` scenario of ``app.py``: each
one's first send waits before its lease check until the test opens a gate. The winner of
attempt 1 is SIGSTOPped there; a backup takes the slot over as attempt 2 once the lease
expired and reaches its own send; the gate opens, the backup sends, and only then the
winner is continued. Timings: lease 2 s, heartbeat 0.3 s.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anarchon import Scheduler, from_url
from tests.harness.dramatiq.rig import LEASE, Rig, first

REFUSAL = "not sent, this instance no longer holds the slot"


@pytest.fixture
def rig(tmp_path: Path, broker_kind: str, namespace: str, store: str) -> Iterator[Rig]:
    made = Rig(tmp_path, broker_kind, namespace, store, "pause", at_lead=3)
    yield made
    for proc in made.procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
    made.stop()


def test_a_sender_paused_past_its_lease_does_not_send(rig: Rig, store: str) -> None:
    rig.schedulers("s0", "s1", "s2")
    gate = rig.wait_for(first("gate"), 15, "the winner about to send")
    winner = rig.name_of(gate["pid"])
    rig.procs[winner].send_signal(signal.SIGSTOP)

    def backup_at_gate(lines: list[dict[str, Any]]) -> bool:
        return any(r["kind"] == "gate" and r["pid"] != gate["pid"] for r in lines)

    rig.wait_for(backup_at_gate, LEASE + 8, "a backup's takeover reaching its send")
    Path(str(rig.log) + ".gate").touch()
    sent = rig.wait_for(first("sent"), 10, "the backup's message")
    assert sent["attempt"] == 2 and sent["pid"] != gate["pid"]
    rig.procs[winner].send_signal(signal.SIGCONT)
    rig.wait_for(lambda _: REFUSAL in rig.output(winner), 3 * LEASE + 5,
                 "the woken winner's refusal to send")
    assert [(r["slot"], r["attempt"]) for r in rig.records("sent")] == [(sent["slot"], 2)]
    reader = Scheduler(from_url(store))
    try:
        records = sorted(reader.history("once", 10), key=lambda r: r.attempt)
    finally:
        reader.close()
    assert [r.attempt for r in records] == [1, 2]
    assert records[0].status != "success" and records[1].status == "success"
