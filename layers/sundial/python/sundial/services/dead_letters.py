"""Browse, replay and purge dead letters: the domain behind /queues/{queue}/dead.

Replay re-queues a still-dead job through `JobService.retry` (dead -> queued; one submission
on the queue's quota each, so a replay on a rate-limited queue goes at the queue's limit, a
request stopping with `more` when the second's window is full) and then deletes its index
item, so a repeated replay finds nothing to do, or finds the job no longer dead and skips it:
it never runs a job twice. A letter whose job another call is retrying right now
(pending and direct: that call sends it) is kept: if that call died before its send, the next
replay after SUBMIT_IN_FLIGHT_MS takes the job over (the requeue allows it), so the job is
never stranded with its letter gone (the simulation's dead-letter profile found that, chaos
seed 22: a replay that crashed before its send, repeated at once, deleted the letter)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sundial.errors import Conflict, JobNotFound, QueueNotFound, SubmissionRateExceeded
from sundial.model.job import Status
from sundial.services.cursors import decode_cursor, encode_cursor
from sundial.services.jobs import JobService
from sundial.store.dead_letters import DeadLetter, DeadLetterStore, time_sk

if TYPE_CHECKING:
    pass


# One replay or purge request does at most this much, then says `more`; the caller repeats.
MAX_PER_REQUEST = 500


@dataclass(frozen=True, slots=True)
class DeadLetterFilter:
    since_ms: int | None = None  # inclusive
    until_ms: int | None = None  # exclusive
    error_type: str | None = None
    job_id: str | None = None  # replay only: this job's letter alone

    def bounds(self) -> tuple[str, str]:
        low = time_sk(self.since_ms) if self.since_ms is not None else "0"
        high = time_sk(self.until_ms) if self.until_ms is not None else "9"
        return low, high

    @property
    def listing(self) -> str:
        """The name a page cursor of this window carries: a cursor names the time window it
        was issued for (DynamoDB refuses a start key outside the query's range, a 500, so one
        from another window is the client's 400)."""
        low, high = self.bounds()
        return f"dead@{low}..{high}"


@dataclass(frozen=True, slots=True)
class ReplayOutcome:
    replayed: list[str]  # job ids re-queued
    skipped: int  # no longer dead (replayed before, retried, or expired): index item removed
    unreplayable: int  # bodies that are not envelopes: kept for inspection, purge removes them
    more: bool  # the request stopped at its limit; repeat it to go on
    # Letters kept because their job is being retried by another call (replay again after
    # SUBMIT_IN_FLIGHT_MS to take over one whose call died). Kept letters (these and the
    # unreplayable) do not count toward the limit, and every request sees them again, so the
    # last request of a replay counts them all.
    in_flight: int = 0


@dataclass(frozen=True, slots=True)
class PurgeOutcome:
    purged: int
    more: bool


class DeadLetterService:
    def __init__(
        self, *, letters: DeadLetterStore, jobs: JobService, queues: frozenset[str]
    ) -> None:
        self._letters = letters
        self._jobs = jobs
        self._queues = queues

    def browse(
        self, queue: str, which: DeadLetterFilter, *, limit: int, cursor: str | None
    ) -> tuple[list[DeadLetter], str | None]:
        self._known(queue)
        low, high = which.bounds()
        listing = which.listing
        letters, after = self._letters.page(
            queue,
            from_sk=low,
            to_sk=high,
            error_type=which.error_type,
            limit=limit,
            after_sk=decode_cursor(cursor, queue, listing=listing) if cursor else None,
        )
        return letters, encode_cursor(queue, after, listing=listing) if after else None

    def replay(self, queue: str, which: DeadLetterFilter, *, limit: int) -> ReplayOutcome:
        self._known(queue)
        low, high = which.bounds()
        replayed: list[str] = []
        skipped = unreplayable = in_flight = 0
        seen = 0
        for letter in self._letters.scan_range(
            queue, from_sk=low, to_sk=high, error_type=which.error_type
        ):
            if which.job_id is not None and letter.job_id != which.job_id:
                continue  # another job's letter: neither replayed nor counted
            if letter.job_id is None:
                unreplayable += 1
                continue
            if seen == limit:
                return ReplayOutcome(replayed, skipped, unreplayable, True, in_flight)
            try:
                job = self._jobs.retry(letter.job_id, only_dead=True)
            except SubmissionRateExceeded:
                # The queue's submission window is full: stop here (the letter is kept). A
                # request that did nothing yet is the 429 (nothing written); one that did some
                # says `more`, and the client's next request comes after the window.
                if not replayed and not skipped:
                    raise
                return ReplayOutcome(replayed, skipped, unreplayable, True, in_flight)
            except Conflict as conflict:
                if conflict.status == Status.PENDING:
                    in_flight += 1  # being retried by a call that may have died: keep it
                    continue
                skipped += 1
            except JobNotFound:
                skipped += 1
            else:
                replayed.append(job.id)
            seen += 1
            # Only after the retry: a crash in between leaves the item, and the next replay
            # finds the job queued (a 409) and skips it.
            self._letters.delete(letter)
        return ReplayOutcome(replayed, skipped, unreplayable, False, in_flight)

    def purge(self, queue: str, *, before_ms: int, limit: int) -> PurgeOutcome:
        self._known(queue)
        purged = 0
        for letter in self._letters.scan_range(
            queue, from_sk="0", to_sk=time_sk(before_ms), error_type=None
        ):
            if letter.dead_at_ms >= before_ms:
                break
            if purged == limit:
                return PurgeOutcome(purged, more=True)
            self._letters.delete(letter)
            purged += 1
        return PurgeOutcome(purged, more=False)

    def _known(self, queue: str) -> None:
        if queue not in self._queues:
            raise QueueNotFound(queue)
