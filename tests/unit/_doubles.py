"""A tiny in-memory claim-only backend (no leases), for option-refusal tests."""

from __future__ import annotations

from collections.abc import Sequence

from anarchon.backends.base import ClaimBackend, ClaimRequest, ClaimResult, Finish, JobSpec
from anarchon.backends.capabilities import CountedHistory
from anarchon.history import RunRecord, RunStatus


class MemoryClaimBackend(CountedHistory, ClaimBackend):
    """Picks one winner per ``(job, slot)`` in a dict; keeps no history."""

    name = "memory:claim"

    def __init__(self) -> None:
        self.claimed: set[tuple[str, int]] = set()
        self.jobs: dict[str, JobSpec] = {}
        self.opened = False

    async def open(self) -> None:
        self.opened = True

    async def register(self, jobs: Sequence[JobSpec]) -> None:
        self.jobs.update({job.name: job for job in jobs})

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        key = (request.name, request.slot)
        if key in self.claimed:
            return ClaimResult("taken", 0, request.slot)
        self.claimed.add(key)
        return ClaimResult("won", 1, request.slot)

    async def finish(self, finish: Finish) -> bool:
        return True

    async def start_manual(self, name: str, owner: str, started_ms: int) -> str:
        return f"{name}:{started_ms}"

    async def finish_manual(self, token: str, status: RunStatus, error: str | None,
                            history_size: int, history_ttl_ms: int | None) -> None:
        return None

    async def history(self, name: str, count: int) -> list[RunRecord]:
        return []

    async def known_jobs(self) -> list[JobSpec]:
        return list(self.jobs.values())
