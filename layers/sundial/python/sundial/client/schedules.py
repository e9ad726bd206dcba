"""The client's schedule calls: create, list, get, runs, update, pause, resume and delete
(`ScheduleCalls`, a part of `SundialClient`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import JsonValue

from sundial.client.calls import (
    Calls,
    Repeat,
    Time,
    api_time,
    every_page,
    new_idempotency_key,
    retry_body,
    segment,
    without_none,
)
from sundial.client.models import (
    Deleted,
    Misfire,
    Priority,
    RetryPolicy,
    RunsPage,
    RunsWhen,
    ScheduleDetail,
    SchedulePage,
    ScheduleSummary,
    UpdatedScheduleDetail,
)


class ScheduleCalls(Calls):
    """/schedules: recurring jobs."""

    def create_schedule(
        self,
        queue: str,
        *,
        cron: str | None = None,
        rate: str | None = None,
        timezone: str | None = None,
        payload: JsonValue = None,
        name: str | None = None,
        priority: Priority | None = None,
        max_attempts: int | None = None,
        retry: RetryPolicy | Mapping[str, Any] | None = None,
        start_at: Time | None = None,
        end_at: Time | None = None,
        misfire: Misfire | None = None,
        idempotency_key: str | None = None,
    ) -> ScheduleDetail:
        """Create a recurring schedule (`cron` or `rate`). Safe to repeat: a key is generated
        when none is given, so a repeat returns the first schedule."""
        body = without_none(
            {
                "queue": queue,
                "cron": cron,
                "rate": rate,
                "timezone": timezone,
                "payload": payload,
                "name": name,
                "priority": priority,
                "max_attempts": max_attempts,
                "retry": retry_body(retry),
                "start_at": api_time(start_at),
                "end_at": api_time(end_at),
                "misfire": misfire,
                "idempotency_key": idempotency_key or new_idempotency_key(),
            }
        )
        return self._call(ScheduleDetail, "POST", "/schedules", body=body, repeat=Repeat.SAFE)

    def schedule_page(
        self, queue: str, *, cursor: str | None = None, limit: int | None = None
    ) -> SchedulePage:
        """One page of the queue's schedules (not deleted), oldest first. Safe to repeat."""
        query = without_none({"queue": queue, "cursor": cursor, "limit": limit})
        return self._call(SchedulePage, "GET", "/schedules", query=query, repeat=Repeat.SAFE)

    def schedules(self, queue: str, *, page_size: int = 100) -> Iterator[ScheduleSummary]:
        """Every schedule of the queue, oldest first, page after page as the iteration goes."""
        return every_page(lambda cursor: self.schedule_page(queue, cursor=cursor, limit=page_size))

    def get_schedule(self, schedule_id: str) -> ScheduleDetail:
        """Safe to repeat."""
        path = f"/schedules/{segment(schedule_id)}"
        return self._call(ScheduleDetail, "GET", path, repeat=Repeat.SAFE)

    def schedule_runs(
        self,
        schedule_id: str,
        *,
        limit: int | None = None,
        before: Time | None = None,
        when: RunsWhen | None = None,
    ) -> RunsPage:
        """One page of a schedule's runs, newest first; pass `next_before` as `before` for the
        next. `when`: "past" (their time has come) or "upcoming" (decided ahead of their time:
        an occurrence due within 15 minutes is sent early); each run says which (`upcoming`).
        Safe to repeat."""
        query = without_none({"limit": limit, "before": api_time(before), "when": when})
        path = f"/schedules/{segment(schedule_id)}/runs"
        return self._call(RunsPage, "GET", path, query=query, repeat=Repeat.SAFE)

    def update_schedule(
        self,
        schedule_id: str,
        *,
        cron: str | None = None,
        rate: str | None = None,
        timezone: str | None = None,
        priority: Priority | None = None,
        name: str | None = None,
        **nullable: Any,
    ) -> UpdatedScheduleDetail:
        """Change a schedule from its next undecided occurrence on (`applies_from` in the
        answer). Only what is given changes; `payload`, `max_attempts` and `retry` may be
        given as None to set them so (payload null, the queue's defaults), so they go by
        keyword. Safe to repeat: repeating an applied update changes nothing."""
        unknown = set(nullable) - {"payload", "max_attempts", "retry"}
        if unknown:
            raise TypeError(f"update_schedule() got unexpected fields {sorted(unknown)}")
        body: dict[str, Any] = without_none(
            {"cron": cron, "rate": rate, "timezone": timezone, "priority": priority, "name": name}
        )
        body |= nullable
        if "retry" in body:
            body["retry"] = retry_body(body["retry"])
        path = f"/schedules/{segment(schedule_id)}"
        return self._call(UpdatedScheduleDetail, "PATCH", path, body=body, repeat=Repeat.SAFE)

    def pause_schedule(self, schedule_id: str) -> ScheduleDetail:
        """Safe to repeat (pausing a paused schedule is harmless)."""
        return self._post(ScheduleDetail, f"/schedules/{segment(schedule_id)}/pause")

    def resume_schedule(self, schedule_id: str) -> ScheduleDetail:
        """Safe to repeat; a 503 must be repeated, which the client does."""
        return self._post(ScheduleDetail, f"/schedules/{segment(schedule_id)}/resume")

    def delete_schedule(self, schedule_id: str) -> Deleted:
        """Nothing more runs. Safe to repeat."""
        path = f"/schedules/{segment(schedule_id)}"
        return self._call(Deleted, "DELETE", path, repeat=Repeat.SAFE)
