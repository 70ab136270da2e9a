"""Async jobs of the phone finder: submitted once, then polled until done."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from ._providers import Answer

POLLS_UNTIL_DONE = 2
"""A job answers ``pending`` to its first poll and is done from the second one on."""


@dataclass(slots=True)
class Job:
    id: str
    tool: str
    answer: Answer
    polls: int = 0

    def poll(self) -> Answer | None:
        """Count a poll; the answer once the job is done, ``None`` while it is pending."""
        self.polls += 1
        return self.answer if self.polls >= POLLS_UNTIL_DONE else None


class Jobs:
    """Jobs by id. Ids keep counting across resets, and each simulator process numbers them
    under a prefix of its own: a stale id never finds a new job, even after a restart (one
    that numbered its jobs from 1 again gave a resumed run another person's phone)."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._counter = 0
        self._prefix = f"job_{secrets.token_hex(4)}"

    def submit(self, tool: str, answer: Answer) -> Job:
        self._counter += 1
        job = Job(id=f"{self._prefix}_{self._counter}", tool=tool, answer=answer)
        self._jobs[job.id] = job
        return job

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def clear(self) -> None:
        self._jobs.clear()

    def __len__(self) -> int:
        return len(self._jobs)
