"""The job table of one scheduler: one owner for writes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from .definition import Job


class JobTable(Mapping[str, Job]):
    """The jobs of one scheduler by name. Everyone reads it; only the scheduler's job
    registry writes it (``put``/``drop``), for its own jobs and those runtime control
    installs."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}

    def __getitem__(self, name: str) -> Job:
        return self._jobs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._jobs)

    def __len__(self) -> int:
        return len(self._jobs)

    def put(self, job: Job) -> Job:
        self._jobs[job.name] = job
        return job

    def drop(self, name: str) -> Job | None:
        return self._jobs.pop(name, None)


__all__ = ["JobTable"]
