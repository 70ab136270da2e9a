"""Async jobs of the phone finder: submitted once, then polled until done."""

from __future__ import annotations

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
    """Jobs by id. Ids keep counting across resets so a stale id never finds a new job."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._counter = 0

    def submit(self, tool: str, answer: Answer) -> Job:
        self._counter += 1
        job = Job(id=f"job_{self._counter}", tool=tool, answer=answer)
        self._jobs[job.id] = job
        return job

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def clear(self) -> None:
        self._jobs.clear()

    def __len__(self) -> int:
        return len(self._jobs)
