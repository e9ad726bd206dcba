"""The client's dead-letter calls: list, replay and purge a queue's dead letters
(`DeadLetterCalls`, a part of `SundialClient`), and `ReplayProgress`, what a replay reports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sundial.client.calls import Calls, Repeat, Time, api_time, every_page, segment, without_none
from sundial.client.models import DeadLetterPage, DeadLetterView, PurgeResult, ReplayResult


@dataclass(frozen=True, slots=True)
class ReplayProgress:
    """The running totals of `replay_dead_letters`, after each request."""

    replayed: int
    skipped: int
    unreplayable: int  # letters kept: the last request sees them all (each request does)
    requests: int
    more: bool
    # Letters kept because another call is retrying their job: replay again in 30 s.
    in_flight: int = 0
    answer: ReplayResult | None = None  # the last request's answer, as the API gave it


class DeadLetterCalls(Calls):
    """/queues/{queue}/dead: the jobs that ran out of attempts, and what to do with them."""

    def dead_letter_page(
        self,
        queue: str,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        since: Time | None = None,
        until: Time | None = None,
        error_type: str | None = None,
    ) -> DeadLetterPage:
        """One page of the queue's dead letters, oldest first. Safe to repeat."""
        query = without_none(
            {
                "cursor": cursor,
                "limit": limit,
                "since": api_time(since),
                "until": api_time(until),
                "error_type": error_type,
            }
        )
        path = f"/queues/{segment(queue)}/dead"
        return self._call(DeadLetterPage, "GET", path, query=query, repeat=Repeat.SAFE)

    def dead_letters(
        self,
        queue: str,
        *,
        since: Time | None = None,
        until: Time | None = None,
        error_type: str | None = None,
        page_size: int = 100,
    ) -> Iterator[DeadLetterView]:
        """Every dead letter of the queue (matching the filters), oldest first, fetching page
        after page (`page_size` each, at most 100) as the iteration goes."""
        return every_page(
            lambda cursor: self.dead_letter_page(
                queue,
                cursor=cursor,
                limit=page_size,
                since=since,
                until=until,
                error_type=error_type,
            )
        )

    def replay_dead_letters(
        self,
        queue: str,
        *,
        since: Time | None = None,
        until: Time | None = None,
        error_type: str | None = None,
        job_id: str | None = None,
        limit: int | None = None,
        on_progress: Callable[[ReplayProgress], None] | None = None,
    ) -> ReplayProgress:
        """Re-queue every dead job among the queue's letters (matching the filters), request
        after request (`limit` letters each, at most 500) while the API says there is `more`
        (`job_id`: that job's letter alone);
        `on_progress` is called with the running totals after each. Safe to repeat, and to
        stop and start again: a replayed job is no longer dead, so it is never run twice."""
        body = without_none(
            {
                "since": api_time(since),
                "until": api_time(until),
                "error_type": error_type,
                "job_id": job_id,
                "limit": limit,
            }
        )
        path = f"/queues/{segment(queue)}/dead/replay"
        progress = ReplayProgress(0, 0, 0, 0, more=True)
        while progress.more:
            result = self._call(ReplayResult, "POST", path, body=body, repeat=Repeat.SAFE)
            progress = ReplayProgress(
                replayed=progress.replayed + len(result.replayed),
                skipped=progress.skipped + result.skipped,
                unreplayable=result.unreplayable,
                requests=progress.requests + 1,
                more=result.more,
                in_flight=result.in_flight,
                answer=result,
            )
            if on_progress is not None:
                on_progress(progress)
        return progress

    def purge_dead_letters(
        self,
        queue: str,
        older_than: Time,
        *,
        limit: int | None = None,
        on_answer: Callable[[PurgeResult], None] | None = None,
    ) -> PurgeResult:
        """Delete the letters that died before `older_than` (the jobs keep their history),
        request after request while there is `more`; returns the total (`on_answer` is given
        each request's answer). Safe to repeat."""
        query = without_none({"older_than": api_time(older_than), "limit": limit})
        path = f"/queues/{segment(queue)}/dead"
        purged = 0
        while True:
            result = self._call(PurgeResult, "DELETE", path, query=query, repeat=Repeat.SAFE)
            if on_answer is not None:
                on_answer(result)
            purged += result.purged
            if not result.more:
                return PurgeResult(purged=purged, more=False)
