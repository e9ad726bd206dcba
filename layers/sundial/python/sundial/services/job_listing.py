"""A queue's jobs of one status, a page at a time (GET /queues/{queue}/jobs), without an index:
no write of any job changes for it.

Every status but `dead` is read from the shards' due-time ranges: one Query per shard over the
window's keys, with a filter on the queue and status, merged in due order (then shard) as a
k-way merge that reads further only in the shard holding the merge back. What it costs: the
read units of every item in the window's ranges, whatever its queue or status (a filter trims
what comes back, not what is read), eventually consistent (half a unit per 4 KB). So the window
is bounded (default: a day either side of now; at most MAX_SPAN) and so is one call's reading
(READ_BUDGET items beyond each shard's first read): a page may come back short, even empty,
before the end, with a cursor to go on from where the reading stopped.

`dead` is read from the dead-letter index (store.dead_letters): the window is the time each
job died, and each page costs the index items it returns.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from sundial.clock import Clock
from sundial.errors import InvalidInput, QueueNotFound
from sundial.ids import MAX_DUE_MS, due_sk_bound
from sundial.model.job import Job, Status
from sundial.services.cursors import decode_cursor, encode_cursor
from sundial.store.dead_letters import DeadLetter, DeadLetterStore, time_sk
from sundial.store.job_listing import JobRangeReader

HOUR_MS = 3_600_000
DEFAULT_REACH_MS = 24 * HOUR_MS  # the default window: now - 24 h .. now + 24 h
MAX_SPAN_MS = 7 * 24 * HOUR_MS
READ_CHUNK = 100  # items one Query reads at most
READ_BUDGET = 2_000  # items one call reads at most after the first read of each shard


@dataclass(frozen=True, slots=True)
class Window:
    from_ms: int  # inclusive
    to_ms: int  # exclusive


@dataclass(frozen=True, slots=True)
class JobsPage:
    window: Window
    jobs: list[Job] = field(default_factory=list)  # every status but dead, in due order
    dead: list[DeadLetter] = field(default_factory=list)  # status dead, in order of death
    next_cursor: str | None = None
    scanned: int = 0  # items read for this page (what it cost)


@dataclass(slots=True)
class _ShardRead:
    """Where the merge stands in one shard."""

    shard: int
    from_sk: str
    after_sk: str | None
    matches: list[Job] = field(default_factory=list)
    read_to: str = ""  # the last sort key read (inclusive)
    done: bool = False


def _position(cursor_sk: str, shard_count: int) -> tuple[str, int]:
    """A job cursor's position: the sort key and shard of the last job delivered (or of the
    last item read)."""
    sk, _, shard = cursor_sk.rpartition("@")
    if not shard.isdigit() or int(shard) >= shard_count or not sk:
        raise InvalidInput("cursor", "not a cursor returned by this listing")
    return sk, int(shard)


class JobListing:
    def __init__(
        self,
        *,
        reader: JobRangeReader,
        letters: DeadLetterStore,
        clock: Clock,
        queues: Collection[str],
        shard_count: int,
    ) -> None:
        self._reader = reader
        self._letters = letters
        self._clock = clock
        self._queues = frozenset(queues)
        self._shard_count = shard_count

    def window(self, from_ms: int | None, to_ms: int | None) -> Window:
        """The window asked for, defaults filled in: a day either side of now; with only
        `from`, until a day after now (or after it, if later), within MAX_SPAN; with only `to`,
        from a day before it."""
        now = self._clock.now_ms()
        if from_ms is None:
            from_ms = (to_ms if to_ms is not None else now) - DEFAULT_REACH_MS
        if to_ms is None:
            to_ms = min(max(from_ms, now) + DEFAULT_REACH_MS, from_ms + MAX_SPAN_MS)
        if to_ms <= from_ms:
            raise InvalidInput("to", "must be after `from`")
        if to_ms - from_ms > MAX_SPAN_MS:
            raise InvalidInput("to", f"the window is at most {MAX_SPAN_MS // HOUR_MS} hours")
        # Within the times a sort key can hold (1970 to 2286): nothing is due outside them.
        return Window(min(max(from_ms, 0), MAX_DUE_MS), min(max(to_ms, 0), MAX_DUE_MS))

    def page(
        self,
        queue: str,
        status: Status,
        *,
        from_ms: int | None,
        to_ms: int | None,
        limit: int,
        cursor: str | None,
    ) -> JobsPage:
        if queue not in self._queues:
            raise QueueNotFound(queue)
        window = self.window(from_ms, to_ms)
        listing = f"jobs:{status}"
        after = decode_cursor(cursor, queue, listing=listing) if cursor else None
        if status is Status.DEAD:
            letters, last = self._letters.page(
                queue,
                from_sk=time_sk(window.from_ms),
                to_sk=time_sk(window.to_ms),
                error_type=None,
                limit=limit,
                after_sk=after,
            )
            next_cursor = encode_cursor(queue, last, listing=listing) if last else None
            return JobsPage(window, dead=letters, next_cursor=next_cursor, scanned=len(letters))
        position = _position(after, self._shard_count) if after else None
        jobs, stop, scanned = self._merge(queue, status, window, position, limit)
        next_cursor = None
        if stop is not None:
            next_cursor = encode_cursor(queue, f"{stop[0]}@{stop[1]}", listing=listing)
        return JobsPage(window, jobs=jobs, next_cursor=next_cursor, scanned=scanned)

    def _merge(
        self,
        queue: str,
        status: Status,
        window: Window,
        position: tuple[str, int] | None,
        limit: int,
    ) -> tuple[list[Job], tuple[str, int] | None, int]:
        """The next `limit` matches after `position` in (sort key, shard) order, where to go on
        from (None at the window's end), and the items read."""
        if window.to_ms <= window.from_ms:  # a window wholly outside 1970..2286
            return [], None, 0
        low = due_sk_bound(window.from_ms, upper=False)
        high = due_sk_bound(window.to_ms - 1, upper=True)
        if position is not None and position[0] > high:
            return [], None, 0
        reads = [self._start(shard, low, position) for shard in range(self._shard_count)]
        first_chunk = max(1, min(READ_CHUNK, READ_BUDGET // self._shard_count))
        scanned = sum(self._read_more(r, queue, status, high, first_chunk) for r in reads)
        budget = scanned + READ_BUDGET
        while True:
            open_reads = [r for r in reads if not r.done]
            frontier = min(((r.read_to, r.shard) for r in open_reads), default=None)
            ready = sorted(
                ((job.key.sk, r.shard, job) for r in reads for job in r.matches),
                key=lambda entry: (entry[0], entry[1]),
            )
            if frontier is not None:
                ready = [entry for entry in ready if (entry[0], entry[1]) <= frontier]
            if frontier is None or len(ready) >= limit or scanned >= budget:
                break
            behind = next(r for r in open_reads if (r.read_to, r.shard) == frontier)
            scanned += self._read_more(behind, queue, status, high, READ_CHUNK)
        page = ready[:limit]
        # Go on after the last job delivered if more are ready; else from where every shard has
        # been read to (all matches up to there are delivered); None once all are read through.
        stop = (page[-1][0], page[-1][1]) if len(ready) > limit else frontier
        return [job for _, _, job in page], stop, scanned

    @staticmethod
    def _start(shard: int, low: str, position: tuple[str, int] | None) -> _ShardRead:
        """Where a shard's reading starts: after the position in (sort key, shard) order."""
        if position is None:
            return _ShardRead(shard, low, None)
        sk, at_shard = position
        if sk < low:
            return _ShardRead(shard, low, None)
        if shard <= at_shard:
            return _ShardRead(shard, low, sk)  # strictly after sk
        return _ShardRead(shard, sk, None)  # sk itself may still come (a later shard)

    def _read_more(
        self, read: _ShardRead, queue: str, status: Status, high: str, chunk: int
    ) -> int:
        """Read the shard's next `chunk` items; the number read."""
        result = self._reader.read(
            read.shard,
            queue=queue,
            status=status,
            from_sk=read.from_sk,
            to_sk=high,
            after_sk=read.after_sk,
            limit=chunk,
        )
        read.matches += result.jobs
        if result.last_sk is None:
            read.done = True
        else:
            read.read_to = read.after_sk = result.last_sk
        return result.scanned
