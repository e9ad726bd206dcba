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
call is made for it.

Every other API call that makes jobs appear on a queue is counted too (`admit_at_once`, before
it writes anything; a refusal is the same 429, or a 413, and writes nothing):
- a schedule's create, update (PATCH) and resume: the occurrences the call writes at once. It
  sends every occurrence due within the 15-minute direct window itself (services.release
  follows the chain through them) and writes the next one: a `rate(10 seconds)` schedule
  starting now is 92 jobs, one starting 15 minutes or more ahead is 1. A resume also counts
  the paused occurrences it sends again. A repeat that changes nothing counts nothing;
- a move (PATCH /jobs/{id}) and run-now: 1 (the job is written anew, and sent again if due
  soon: without this a client could send one job up to MAX_MOVES times a second);
- a retry by id and a dead-letter replay: 1 per job re-queued (a replay stops, with `more`,
  when the window is full, and is a 429 if it re-queued nothing).
Not counted, each for a reason: the occurrences the sweepers write as a schedule moves on (one
per occurrence at the schedule's cadence, at most one every 10 seconds each; a queue's
max_dispatch_per_second paces them: FAIR DISPATCH, dispatch.fairness); a job's or DAG's resume
(it sends jobs already counted, once: a paused job is one not yet sent); a queue's resume
(its catch-up sends what the pause held back, all counted when submitted; admin only); a DAG's
children (counted with the DAG); the consumer's retries.

A call that writes more jobs at once than a second admits (a schedule's occurrences: it cannot
be split as a batch can) is counted over as many seconds as it needs, from this one on: it
takes the room left in this second's window and the whole of each following one, until all are
counted (`_spread`). Those seconds then admit nothing else, so over any span the queue admits
its limit on average, as a client that submitted the jobs one second after another would have
been; the call's own writes do land together, at most MIN_INTERVAL's bound (about 92, a resume
about twice that). The windows must be free from now on, one after another: while a spread
holds later seconds, another is refused (429, Retry-After when it would fit), so at most one
spread's worth is ever ahead of the clock. It reads the windows (one Query) and takes them in
one TransactWriteItems (all or none), so at most MAX_SPREAD_S seconds: more is a 413 naming the
field, the count and the limit.

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

Interleavings of the count (the submission window, sundial.store.submission_windows):
A submission window (issue 16: a queue's max_submissions_per_second, services.admission) is
counted by one conditional UpdateItem on its own item ("quota#<queue>#<lane>",
"window#<second>"), before the request writes any idempotency record or job, and it touches no
job item, cursor or queue state, so it interleaves with nothing the cursor and owner rules
rely on. A refused count writes nothing and the request ends there (429): no job exists to
lose. A count followed by a crash (or by a 503 later in the request) only uses up quota: the
rest of the request wrote what it would have written with no quota, so the existing rules
cover it, and the client's repeat is an ordinary submit, counted again (its idempotency key
returns the one job if the first attempt wrote it). Two requests racing for the last room in a
window are serialised on the counter item by DynamoDB: one is counted, the other refused
whole, never both over the limit. The window comes from the clock (now // 1 s) and only ever
selects an item: a window a clock step skipped is simply never counted in.
The other calls that make jobs appear on a queue count the same way, each before its first
write (issue 25, item 8; what each counts: services.admission): a schedule's create (before
its create transaction), update (before the first round's transaction; a round lost to a race
reads again and is not counted again) and resume (from a read of its paused occurrences
before the write that marks it resuming; its work reads them again after that write, so a
sweep parking the head in between is sent all the same, and counted the same); a move and a
run-now (after the job is read and found movable, before its payload's S3 put and its
transaction); a retry by id (before its chain step and requeue; a job found in a state that
cannot be retried is a 409, uncounted) and so each job of a dead-letter replay (the replay
stops at a refusal: the letters after it are kept, untouched). A refusal writes nothing, and a
crash after a count only uses quota, as for submit: the client's repeat is counted again
unless it finds the first call's work done (a schedule's repeat create, or an update that
changes nothing, counts nothing). More jobs at once than a second admits (a schedule's
occurrences within the direct window) are counted over the following seconds: one consistent
Query of the lane's windows from now on, then ONE TransactWriteItems adding to each, each
conditional on its room as for a single window. A take or another spread landing on one of
those windows between the read and the transaction makes a condition fail (or the
transaction conflict): nothing is written and the call is a 429; so no window ever passes its
limit and a spread is all or nothing. Only a spread writes a window ahead of the clock, and
at most MAX_SPREAD_S ahead, so the read covers every window that can hold a count.
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
# The most seconds one request's count may be spread over (one TransactWriteItems: 100 items).
MAX_SPREAD_S = 100


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

    def rate_limited(self, queue: str) -> bool:
        """Whether the queue has a submission limit (a caller may skip counting otherwise)."""
        return self._rate_limit(queue) is not None

    def admit_at_once(self, queue: str, count: int, *, field: str, what: str) -> None:
        """Count `count` jobs that one call writes or sends at once on `queue` (see the module
        docstring): as a submit's when a second admits them, else spread over the seconds from
        this one on. Raises SubmissionRateExceeded (429) or, for more than MAX_SPREAD_S seconds
        admit, TooLargeForQueue (413) naming `field`, having written nothing. `what`: the
        request, for the 413 ("this schedule")."""
        limit = self._rate_limit(queue)
        if limit is None or count <= 0:
            return
        now_ms = self._clock.now_ms()
        window_s = now_ms // WINDOW_MS
        if count <= largest_request(limit):
            self._take(queue, count, window_s, now_ms)
            return
        self._spread(queue, count, window_s, limit=limit, field=field, what=what)

    def _spread(
        self, queue: str, count: int, window_s: int, *, limit: int, field: str, what: str
    ) -> None:
        """Count `count` (more than a second admits) over the lane's windows from `window_s`
        on, each as full as it may be, none skipped (the module docstring)."""
        lane = self._rng.randrange(lane_count(limit))
        per_window = lane_limit(limit, lane)
        if count > per_window * MAX_SPREAD_S:
            raise TooLargeForQueue(
                field,
                f"{what} writes {count} jobs at once; queue {queue!r} admits {limit} a second, so "
                f"at most {per_window * MAX_SPREAD_S} at once (counted over {MAX_SPREAD_S} s): "
                "start it 15 minutes or more ahead (start_at), make it less frequent, or raise "
                "the queue's max_submissions_per_second",
                queue=queue,
            )
        # Only a spread takes a window ahead of the clock, and never more than MAX_SPREAD_S
        # ahead: the windows after these are empty.
        counted = self._windows.counted(
            queue=queue, lane=lane, first_s=window_s, last_s=window_s + MAX_SPREAD_S - 1
        )
        rooms = [per_window - counted.get(window_s + i, 0) for i in range(2 * MAX_SPREAD_S)]
        takes = _fill(rooms, count, start=0)
        if takes is not None and self._windows.take_many(
            queue=queue,
            lane=lane,
            takes={window_s + i: n for i, n in takes.items()},
            limit=per_window,
        ):
            return
        # The first second from which it would fit (after the spread holding the windows).
        wait = next(
            (k for k in range(1, MAX_SPREAD_S + 1) if _fill(rooms, count, start=k) is not None),
            1,
        )
        raise SubmissionRateExceeded(
            queue, limit_per_second=limit, retry_after_s=wait, at_once=count
        )

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


def _fill(rooms: Sequence[int], count: int, *, start: int) -> dict[int, int] | None:
    """{window offset: jobs} taking `count` from rooms[start] on, each window as full as it
    may be and none skipped, within MAX_SPREAD_S windows; None if a window on the way is full
    or they do not suffice."""
    takes: dict[int, int] = {}
    left = count
    for offset in range(start, start + MAX_SPREAD_S):
        if rooms[offset] <= 0:
            return None
        takes[offset] = min(rooms[offset], left)
        left -= takes[offset]
        if left == 0:
            return takes
    return None
