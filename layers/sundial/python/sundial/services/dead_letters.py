"""Browse, replay and purge dead letters: the domain behind /queues/{queue}/dead.

Replay re-queues a still-dead job through `JobService.retry` (dead -> queued; one submission
on the queue's quota each, so a replay on a rate-limited queue goes at the queue's limit, a
request stopping with `more` when the second's window is full) and then deletes its index
item, so a repeated replay finds nothing to do, or finds the job no longer dead and skips it:
it never runs a job twice. A letter whose job another call is retrying right now
(pending and direct: that call sends it) is kept: if that call died before its send, the next
replay after SUBMIT_IN_FLIGHT_MS takes the job over (the requeue allows it), so the job is
never stranded with its letter gone (the simulation's dead-letter profile found that, chaos
seed 22: a replay that crashed before its send, repeated at once, deleted the letter).

DEAD LETTERS (sundial.runs.dlq_indexer, sundial.services.dead_letters; the simulation's
`--dead-letters` profile races them). Their write sequences:
- Death by the consumer: mark the attempt's job dead (conditional on that attempt), then send
  its envelope to the DLQ, then delete the job's message. A crash between leaves the message,
  SQS redelivers it, and the fence, finding that attempt dead, sends the letter again (the
  index keeps one item per job and death time).
- Redrive by SQS (a consumer crashed on every delivery): the indexer marks the job dead, bound
  to the envelope's attempt (AttemptStore.mark_dead: that attempt still waiting or running),
  then puts the index item, then the message is deleted. A crash between repeats the whole
  message: the conditional write and the put are idempotent (one item per job and death time).
- Indexing a letter of a job that is no longer dead: the job was retried (by id, or by a replay
  of an earlier letter) or finished. Its letter is dropped, and the job is left alone: the
  attempt bound above refuses to mark a later attempt dead (the simulation found the version
  without it marking a retried job dead, seed 3 of that profile).
- Replay: per letter, JobService.retry(only_dead=True) (dead -> pending and direct, send, claim
  with lease 0), then the index item is deleted. Two replays, or a replay and a retry by id,
  race on the conditional requeue: one wins, the other gets a 409 and skips (and deletes the
  item). A crash after the requeue and before the send leaves the job pending and direct; a
  replay meanwhile keeps its letter (in flight: deleting it stranded the job, chaos seed 22 of
  the dead-letter profile), and a retry or replay after SUBMIT_IN_FLIGHT_MS takes the job over;
  the consumer's fence admits exactly attempts + 1, so at most one delivery runs. A crash
  before the item's delete leaves an item whose job is no longer dead: the next replay skips
  it and deletes it.
- Cancel and moves: a dead job cannot be cancelled or moved (409), so neither races a replay;
  a retry by id of a cancelled job re-runs it, by request (docs/api.md, POST /jobs/{id}/retry).
"""

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
