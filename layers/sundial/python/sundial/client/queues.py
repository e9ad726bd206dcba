"""The client's queue calls: list, get, pause, resume, and a queue's jobs of one status
(`QueueCalls`, a part of `SundialClient`). A queue's dead letters are in `dead_letters`."""

from __future__ import annotations

from collections.abc import Iterator

from sundial.client.calls import Calls, Repeat, Time, api_time, every_page, segment, without_none
from sundial.client.models import (
    ListedJob,
    ListedJobsPage,
    QueueDetail,
    QueueList,
    QueueSummary,
    Status,
)


class QueueCalls(Calls):
    """/queues and /queues/{queue}: a queue's state and its jobs."""

    def list_queues(self) -> list[QueueSummary]:
        """Every queue the caller may read: state, SQS depth, dead letters. Safe to repeat."""
        return self._call(QueueList, "GET", "/queues", repeat=Repeat.SAFE).queues

    def get_queue(self, queue: str) -> QueueDetail:
        """Whether the queue is paused. Safe to repeat."""
        return self._call(QueueDetail, "GET", f"/queues/{segment(queue)}", repeat=Repeat.SAFE)

    def pause_queue(self, queue: str) -> QueueDetail:
        """Hand nothing of the queue to SQS until resumed. Safe to repeat."""
        return self._post(QueueDetail, f"/queues/{segment(queue)}/pause")

    def resume_queue(self, queue: str) -> QueueDetail:
        """Send what came due meanwhile. Safe to repeat."""
        return self._post(QueueDetail, f"/queues/{segment(queue)}/resume")

    def queue_jobs_page(
        self,
        queue: str,
        status: Status,
        *,
        since: Time | None = None,
        until: Time | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> ListedJobsPage:
        """One page of the queue's jobs of `status` due in [since, until) (default: a day
        either side of now; at most 7 days), in due order; for `dead`, by when they died. A
        page may be short before the end (each call's reading is bounded). Safe to repeat."""
        query = without_none(
            {
                "status": status,
                "from": api_time(since),
                "to": api_time(until),
                "cursor": cursor,
                "limit": limit,
            }
        )
        path = f"/queues/{segment(queue)}/jobs"
        return self._call(ListedJobsPage, "GET", path, query=query, repeat=Repeat.SAFE)

    def queue_jobs(
        self,
        queue: str,
        status: Status,
        *,
        since: Time | None = None,
        until: Time | None = None,
        page_size: int = 100,
    ) -> Iterator[ListedJob]:
        """Every job of the queue with `status` in the window, in due order, page after page
        as the iteration goes."""
        return every_page(
            lambda cursor: self.queue_jobs_page(
                queue, status, since=since, until=until, cursor=cursor, limit=page_size
            )
        )
