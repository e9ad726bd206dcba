"""The writes of an attempt's runner: take the attempt, record its outcome, and the two
transitions that end or restart a job from outside a run (a DLQ redrive, a manual retry)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sundial.ids import JobKey
from sundial.model.job import (
    AttemptError,
    Job,
    Status,
)

if TYPE_CHECKING:
    pass
from sundial.store.job_items import MARK_DEAD, JobItemStore, appended_error
from sundial.store.table import Item, num_attr, str_attr


def revision_condition(revision: int) -> str:
    """The condition that a job item is still of `revision` (an item never changed has none)."""
    return "revision = :revision" if revision else "attribute_not_exists(revision)"


def revision_values(revision: int) -> Item:
    return {":revision": num_attr(revision)} if revision else {}


class AttemptStore(JobItemStore):
    """Attempt bookkeeping on job items (sundial.runs.attempts is its main user)."""

    _RUNNABLE = (
        "(attempts = :prev AND (#status IN (:queued, :failed)"
        " OR (#status = :pending AND direct = :true)))"
    )

    def _attempt_values(self, attempt: int) -> Item:
        return {
            ":prev": num_attr(attempt - 1),
            ":n": num_attr(attempt),
            ":queued": str_attr(Status.QUEUED),
            ":failed": str_attr(Status.FAILED),
            ":pending": str_attr(Status.PENDING),
            ":running": str_attr(Status.RUNNING),
            ":true": {"BOOL": True},
        }

    def mark_running(
        self,
        key: JobKey,
        *,
        attempt: int,
        now_ms: int,
        revision: int = 0,
        taking_over_from_ms: int | None = None,
    ) -> tuple[bool, Job | None]:
        """queued/failed -> running for attempt `attempt`, if that attempt is still due and the
        job is still of `revision` (the message's: a job changed since by PATCH /jobs/{id} is
        not run from an older message). With `taking_over_from_ms`, also running -> running for
        a runner that went silent, only if the attempt still has that start time (so two takers
        cannot both win)."""
        condition = self._RUNNABLE
        values = {**self._attempt_values(attempt), ":now": num_attr(now_ms)}
        if taking_over_from_ms is not None:
            condition = (
                f"({condition} OR (attempts = :n AND #status = :running AND started_at = :seen))"
            )
            values[":seen"] = num_attr(taking_over_from_ms)
        # Both forms are parenthesised already (DynamoDB refuses redundant parentheses).
        condition = f"{condition} AND {revision_condition(revision)}"
        values |= revision_values(revision)
        return self._update_job(
            key,
            update="SET #status = :running, attempts = :n, started_at = :now",
            condition=condition,
            values=values,
            returns=None,
        )

    def record_attempt(
        self,
        key: JobKey,
        *,
        attempt: int,
        outcome: Status,
        started_at_ms: int,
        now_ms: int,
        result_json: str | None = None,
        error: AttemptError | None = None,
        next_attempt_at_ms: int | None = None,
        expires_at_s: int | None = None,
    ) -> tuple[bool, Job | None]:
        """End attempt `attempt` as succeeded, failed (a retry is due) or dead, in one
        conditional write. Refused if the attempt is no longer this consumer's to end (a
        duplicate delivery, a cancel, or a later attempt)."""
        sets = ["#status = :outcome", "attempts = :n", "started_at = :started"]
        removes = ["claim_token", "lease_until"]
        values: Item = {
            **self._attempt_values(attempt),
            ":outcome": str_attr(outcome),
            ":started": num_attr(started_at_ms),
        }
        if outcome is Status.FAILED:
            assert next_attempt_at_ms is not None
            sets.append("next_attempt_at = :next")
            values[":next"] = num_attr(next_attempt_at_ms)
        else:
            sets += ["finished_at = :now", "expires_at = :expires"]
            removes.append("next_attempt_at")
            values[":now"] = num_attr(now_ms)
            values[":expires"] = num_attr(expires_at_s or 0)
        if result_json is not None:
            sets.append("#result = :result")
            values[":result"] = str_attr(result_json)
        if error is not None:
            sets.append("history = list_append(if_not_exists(history, :empty), :error)")
            values |= appended_error(error)
        return self._update_job(
            key,
            update=f"SET {', '.join(sets)} REMOVE {', '.join(removes)}",
            condition=f"{self._RUNNABLE} OR (attempts = :n AND #status = :running)",
            values=values,
            names={"#result": "result"},
            returns=None,
        )

    def requeue(
        self,
        key: JobKey,
        *,
        extra_attempts: int,
        now_ms: int,
        stale_before_ms: int,
        only_dead: bool = False,
    ) -> tuple[bool, Job | None]:
        """A manual retry: dead, failed or cancelled -> pending (direct), with `extra_attempts`
        more attempts. The caller then sends the job and claims it, as the submit path does.
        A retry that died before its send left the job pending and direct; once older than
        `stale_before_ms` it may be retried again.

        The retry raises the job's `revision`, as a move does: every message sent before it (an
        attempt still being redelivered on its way to the DLQ, a scheduled retry's message or
        timer) is of an older revision, so the consumer's fence skips it and its dead letter
        cannot end the retried attempt (mark_dead is bound to the revision)."""
        return self._update_job(
            key,
            update=(
                "SET #status = :pending, direct = :true, max_attempts = attempts + :extra,"
                " retried_at = :now, revision = if_not_exists(revision, :zero) + :one"
                " REMOVE finished_at, next_attempt_at, expires_at,"
                " cancelled_at, claim_token, lease_until"
            ),
            condition=(
                ("#status = :dead" if only_dead else "#status IN (:dead, :failed, :cancelled)")
                + " OR (#status = :pending AND direct = :true AND retried_at < :stale)"
            ),
            values={
                ":pending": str_attr(Status.PENDING),
                ":dead": str_attr(Status.DEAD),
                **(
                    {}
                    if only_dead
                    else {
                        ":failed": str_attr(Status.FAILED),
                        ":cancelled": str_attr(Status.CANCELLED),
                    }
                ),
                ":true": {"BOOL": True},
                ":extra": num_attr(extra_attempts),
                ":now": num_attr(now_ms),
                ":stale": num_attr(stale_before_ms),
                ":zero": num_attr(0),
                ":one": num_attr(1),
            },
        )

    def mark_dead(
        self,
        key: JobKey,
        *,
        attempt: int,
        revision: int,
        error: AttemptError,
        now_ms: int,
        expires_at_s: int,
    ) -> tuple[bool, Job | None]:
        """`attempt` of `revision` (waiting to start, or running) -> dead, with `error` added to
        the history: for a message of that attempt that SQS redrove to the DLQ because its
        consumer kept crashing before ending it. Bound to the attempt AND the revision the
        letter carries, as running an attempt is: a letter read after the job was moved or
        retried (a later revision or attempt waits or runs) or ended leaves it alone."""
        return self._update_job(
            key,
            update=MARK_DEAD,
            condition=(
                f"({self._RUNNABLE} OR (attempts = :n AND #status = :running))"
                f" AND {revision_condition(revision)}"
            ),
            values={
                **revision_values(revision),
                **self._attempt_values(attempt),
                ":dead": str_attr(Status.DEAD),
                ":now": num_attr(now_ms),
                ":expires": num_attr(expires_at_s),
                **appended_error(error),
            },
        )
