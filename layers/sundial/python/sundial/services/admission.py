"""Admission: a request that creates jobs passes its queues' quotas (sundial.quotas) before
anything of it is written.

Order, for POST /jobs, /jobs/batch and /dags (after the request's own validation, 400):
1. payloads: a job whose payload is over its queue's max_payload_bytes -> 413 naming the field,
   the queue, the size and the limit. Checked first, so a request refused for its size takes
   no quota;
2. size: more jobs for one queue in the request than that queue can ever admit in a second
   -> 413 (split the request), never a 429 that no retry could satisfy;
3. rate: one conditional write per rate-limited queue the request touches, counting its jobs
   there; a full window -> 429 with Retry-After (the seconds to the window's end), naming the
   queue and the limit.
Only then are idempotency records and jobs written. A queue with no limit costs nothing: no
call is made for it. POST /schedules checks the payload only: a schedule's occurrences are not
counted (nor are retries and dead-letter replays: all are jobs already admitted).

Why a fixed one-second window counter (sundial.store.submission_windows), weighed against:
- a token bucket in the queue's state item: DynamoDB cannot compute a refill (min(capacity,
  tokens + rate x elapsed)) in an update expression, so each request would read, then write
  conditionally on what it read, and retry on a race: two calls and contention where this is
  one. And every queue's state item shares one partition key ("queues"), so all queues'
  submissions would share one partition's ~1,000 writes a second;
- an approximate budget per Lambda container (limit / containers): free, but the number of
  warm containers changes all the time, so what a queue admits would follow Lambda's scaling,
  not its setting, and a burst of cold starts would admit a multiple of it;
- the window: one UpdateItem per request (per rate-limited queue in it), no read, and never
  more than the limit within one second of the clock. Its known edge: a client may get up to
  twice the limit within a sliding second that straddles two windows (the end of one, the
  start of the next); the average over any longer span is at most the limit.
The time is the injectable clock's (sundial.clock), so tests move windows without sleeping.

Lanes. One counter item takes about 1,000 writes a second in DynamoDB (refused writes count
too), so a limit above SUBMISSIONS_PER_LANE is split into ceil(limit / SUBMISSIONS_PER_LANE)
lanes, each with its share of the limit (they add up to it exactly) on an item of its own. A
request takes a random lane, and if that lane is full, one other random lane before it is
refused; so near saturation a queue may refuse a request while another lane still has room
(it admits a little under its limit, never over).

Crash and failure: the count is written before any job, so a crash after it costs quota and
nothing else: no job is lost (none was accepted) or duplicated (the client's repeat, with its
idempotency key, is an ordinary submit that takes quota again). A request refused on its second
rate-limited queue gives the first queue's count back (best effort: if that write fails, the
quota stays taken until the window ends). A request that fails after admission (a 503) keeps
its count.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass

from botocore.exceptions import ClientError

from sundial.clock import Clock
from sundial.errors import SubmissionRateExceeded, TooLargeForQueue
from sundial.model.submission import SubmitJob
from sundial.quotas import SUBMISSIONS_PER_LANE, QueueQuota
from sundial.store.submission_windows import SubmissionWindows

WINDOW_MS = 1_000


@dataclass(frozen=True, slots=True)
class _Taken:
    queue: str
    lane: int
    window_s: int
    count: int


def lane_count(limit_per_second: int) -> int:
    """How many counter items a limit is split over."""
    return -(-limit_per_second // SUBMISSIONS_PER_LANE)


def lane_limit(limit_per_second: int, lane: int) -> int:
    """Lane `lane`'s share of the limit: the shares differ by at most one and add up to it."""
    lanes = lane_count(limit_per_second)
    return limit_per_second // lanes + (1 if lane < limit_per_second % lanes else 0)


def largest_request(limit_per_second: int) -> int:
    """The most jobs for one queue one request may carry: what the smallest lane admits."""
    return limit_per_second // lane_count(limit_per_second)


class Admission:
    """The quota checks of the requests that create jobs."""

    def __init__(
        self,
        *,
        quotas: Mapping[str, QueueQuota],
        windows: SubmissionWindows,
        clock: Clock,
        rng: random.Random | None = None,
    ) -> None:
        self._quotas = {queue: quota for queue, quota in quotas.items() if quota.limited}
        self._windows = windows
        self._clock = clock
        self._rng = rng or random.Random()

    def check_payload(self, *, field: str, queue: str, payload_json: str) -> None:
        """413 if the payload is over its queue's max_payload_bytes (no call, no write)."""
        quota = self._quotas.get(queue)
        if quota is None or quota.max_payload_bytes is None:
            return
        size = len(payload_json.encode())
        if size > quota.max_payload_bytes:
            raise TooLargeForQueue(
                f"{field}payload",
                f"payload is {size} bytes; queue {queue!r} accepts at most "
                f"{quota.max_payload_bytes}",
                queue=queue,
            )

    def admit(self, jobs: Sequence[tuple[str, SubmitJob]], *, count_field: str) -> None:
        """Check every payload, then count the request's jobs on each rate-limited queue it
        touches. `jobs`: (where the job is in the request body: "", "jobs[3].",
        "nodes.extract.", the job). Raises TooLargeForQueue (413) or SubmissionRateExceeded
        (429) having written nothing (but counts it gave back). `count_field` names the
        request's list of jobs ("jobs", "nodes") in a 413 for too many of them."""
        if not self._quotas:
            return  # no queue is limited: not even a payload is serialised again
        for field, job in jobs:
            if job.queue in self._quotas:
                self.check_payload(field=field, queue=job.queue, payload_json=job.payload_json)
        counts = Counter(job.queue for _, job in jobs if self._rate_limit(job.queue) is not None)
        for queue, count in sorted(counts.items()):
            limit = self._rate_limit(queue)
            assert limit is not None
            if count > largest_request(limit):
                raise TooLargeForQueue(
                    count_field or "queue",
                    f"{count} jobs for queue {queue!r} in one request; it admits at most "
                    f"{largest_request(limit)} in one request ({limit} per second): split it",
                    queue=queue,
                )
        if not counts:
            return
        now_ms = self._clock.now_ms()
        window_s = now_ms // WINDOW_MS
        taken: list[_Taken] = []
        try:
            for queue, count in sorted(counts.items()):
                taken.append(self._take(queue, count, window_s, now_ms))
        except Exception:
            self._give_back(taken)
            raise

    def _rate_limit(self, queue: str) -> int | None:
        quota = self._quotas.get(queue)
        return quota.max_submissions_per_second if quota else None

    def _take(self, queue: str, count: int, window_s: int, now_ms: int) -> _Taken:
        limit = self._rate_limit(queue)
        assert limit is not None
        lanes = lane_count(limit)
        first = self._rng.randrange(lanes)
        tries = [first]
        if lanes > 1:  # one other lane, at random, before refusing
            tries.append((first + 1 + self._rng.randrange(lanes - 1)) % lanes)
        for lane in tries:
            if self._windows.take(
                queue=queue,
                lane=lane,
                window_s=window_s,
                count=count,
                limit=lane_limit(limit, lane),
            ):
                return _Taken(queue, lane, window_s, count)
        window_end_ms = (window_s + 1) * WINDOW_MS
        raise SubmissionRateExceeded(
            queue,
            limit_per_second=limit,
            retry_after_s=max(1, -(-(window_end_ms - now_ms) // 1000)),
        )

    def _give_back(self, taken: Sequence[_Taken]) -> None:
        for entry in taken:
            # If this fails the quota stays taken until its window ends; nothing else is hurt.
            with suppress(ClientError):
                self._windows.give_back(
                    queue=entry.queue,
                    lane=entry.lane,
                    window_s=entry.window_s,
                    count=entry.count,
                )
