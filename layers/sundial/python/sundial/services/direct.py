"""Sending jobs from an API call instead of the sweeper: for jobs due within the direct window,
which a sweep may already have passed (the cursor only moves forward; docs/invariants.md).

The caller first makes each job its own (`direct`: no sweeper claims it), then this sends it
and marks it queued. Send comes before the mark so a crash can never leave a job marked queued
but unsent; the consumer's fence accepts a pending direct job, so the message may arrive first.
"""

from __future__ import annotations

from collections.abc import Sequence

from ulid import ULID

from sundial.clock import Clock
from sundial.model.job import Job, Status
from sundial.store.jobs import JobStore
from sundial.transport.sender import Outgoing, QueueSender


class DirectSender:
    def __init__(self, *, store: JobStore, sender: QueueSender, clock: Clock) -> None:
        self._store = store
        self._sender = sender
        self._clock = clock

    def send(self, jobs: Sequence[Job], *, by: str) -> list[Job]:
        """Send direct jobs (their next attempt: a retry timer's is its retry's), then mark
        each queued. Returns the jobs SQS
        refused (still pending and direct: the caller reports the failure). A schedule's
        occurrence reaches here only after its successor is written, so its claim also
        records that (`chained`)."""
        if not jobs:
            return []
        outgoing = [Outgoing(job, attempt=job.next_attempt) for job in jobs]
        failed = {o.job.id for o in self._sender.send(outgoing, now_ms=self._clock.now_ms)}
        now = self._clock.now_ms()
        token = f"{by}:{ULID.from_timestamp(now / 1000)}"
        for job in jobs:
            if job.id in failed:
                continue
            chained = job.schedule_id is not None
            if self._store.claim(job.key, token=token, now_ms=now, lease_ms=0, chained=chained):
                job.status, job.queued_at_ms, job.expires_at_s = Status.QUEUED, now, None
        return [job for job in jobs if job.id in failed]
