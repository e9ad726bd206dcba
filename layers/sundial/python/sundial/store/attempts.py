"""The writes of an attempt's runner: take the attempt, keep it (a worker's heartbeat), record
its outcome, and the two transitions that end or restart a job from outside a run (a DLQ
redrive, a manual retry).

An attempt running has ONE holder, recorded on the job item when it is taken: `runner` (a
random token of the taking delivery) and `runner_until` (until when that holder is provably
alive: a Lambda consumer's deadline, which it cannot outlive, or a worker's lease, which its
heartbeats extend). Only the holder may end the attempt or extend it; a take-over (running ->
running by another delivery) or a redrive's death happens only once `runner_until` is past
(by more than the clocks' skew), whatever the message that asks: how many times SQS delivered
it says nothing about whether the holder still runs.

WHAT A TAKE ACCEPTS (the attempt's first message). A job waits for its take in one of three
forms: `queued` (sent by a path that marked it so: a direct send's follow-up write, a release),
`pending` and `direct` (a direct send whose follow-up write has not landed), or `pending` and
due (a sweep sends jobs under its shard's lease and writes no job item: sundial.store.sweeps,
THE SHARD LEASE). The last is told from a job the sweep has not sent by its due time, which
is in its sort key: a message of attempt 1 is visible at the job's due second, never before
(SQS DelaySeconds, sundial.transport.sender), so a take refused for a job not yet due would
lose a message that was on time by another clock; the condition allows CLOCK_SKEW_MS. What
makes a stale or second message a no-op is the rest of the condition, as for every other form:
the attempt count (a second message of an attempt that is running, or finished, fails it; the
holder rule turns a live holder's second message away as busy), the revision (a moved or
retried job is not run from a message of before), and the status itself: a cancel, a pause, a
DAG's hold or a move lands on the pending item like on any other and the take then fails, so
a cancel that answered 200 before the take means the job never runs.

The take also removes the item's expiry: a direct job carries one until its sender's
follow-up write, and when the consumer's take lands first that write is refused (the job is no
longer pending), so without this a job retried for weeks kept the expiry of a job that would
never run again, and DynamoDB's TTL deleted it while it was still being retried. The job's end
sets the expiry it keeps (record_attempt).

Interleavings:
- The consumer takes the attempt (-> running, conditional on the attempt) before it calls
  the function, and a cancel is conditional on the job not running. The two writes are
  serialised on the job's item: a cancel that answered 200 came first, and the take then fails
  (the function never runs); a take that came first makes the cancel a 409 (running).
- THE ATTEMPT'S HOLDER (sundial.store.attempts). The take records one holder (a random token)
  and until when it is provably alive (a Lambda's deadline, a worker's lease). Two deliveries
  of one attempt (two messages, or one delivered again) race on the take: one sets the holder,
  the other's condition fails (it is turned away as busy); a take-over needs the holder's
  lease past by CLOCK_SKEW_MS, and only the holder ends or extends the attempt, so a holder
  that lost its attempt (its lease ran out) writes nothing. A redrive's mark_dead is bound to
  the same rule (a live holder's attempt is never killed by a second message's letter), and to
  the letter's revision: a move or a retry by id raises the revision, so what was sent before
  them is stale for the fence, the take and the redrive alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sundial.ids import JobKey, due_sk_bound
from sundial.model.job import (
    AttemptError,
    Job,
    Status,
)

if TYPE_CHECKING:
    pass
from sundial.store.job_items import MARK_DEAD, JobItemStore, appended_error
from sundial.store.table import Item, num_attr, str_attr
from sundial.timing import CLOCK_SKEW_MS, LEGACY_RUNNER_MS


def revision_condition(revision: int) -> str:
    """The condition that a job item is still of `revision` (an item never changed has none)."""
    return "revision = :revision" if revision else "attribute_not_exists(revision)"


def revision_values(revision: int) -> Item:
    return {":revision": num_attr(revision)} if revision else {}


class AttemptStore(JobItemStore):
    """Attempt bookkeeping on job items (sundial.runs.attempts is its main user)."""

    # A node of a paused DAG (`held`) is never taken: its DAG's resume sends it again. A pending
    # job is taken if a direct send owns it, or if it is due (a sweep sent it; module doc).
    _RUNNABLE = (
        "(attempts = :prev AND attribute_not_exists(held) AND (#status IN (:queued, :failed)"
        " OR (#status = :pending AND (direct = :true OR sk <= :due))))"
    )

    def _attempt_values(self, attempt: int, now_ms: int) -> Item:
        return {
            ":due": str_attr(due_sk_bound(now_ms + CLOCK_SKEW_MS, upper=True)),
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
        runner: str,
        runner_until_ms: int,
        revision: int = 0,
        take_over: bool = False,
    ) -> tuple[bool, Job | None]:
        """Take attempt `attempt`: queued/failed (or pending, and direct or due) -> running,
        recording its holder, `runner`, and until when that holder is provably alive
        (`runner_until_ms`:
        a Lambda's deadline, a worker's lease), if that attempt is still due and the job is
        still of `revision` (the message's: a job changed since is not run from an older one).

        With `take_over`, also running -> running for an attempt whose holder has provably
        stopped: its `runner_until` is more than CLOCK_SKEW_MS past (an item taken before holders
        were recorded: started more than LEGACY_RUNNER_MS ago). Whatever message asks, a live
        holder's attempt is never taken, and two takers cannot both win (the write sets a
        holder the other's condition no longer matches)."""
        condition = self._RUNNABLE
        values: Item = {
            **self._attempt_values(attempt, now_ms),
            ":now": num_attr(now_ms),
            ":runner": str_attr(runner),
            ":until": num_attr(runner_until_ms),
        }
        if take_over:
            condition = (
                f"({condition} OR (attempts = :n AND #status = :running AND"
                " (runner_until < :stopped OR"
                " (attribute_not_exists(runner_until) AND started_at < :legacy))))"
            )
            values[":stopped"] = num_attr(now_ms - CLOCK_SKEW_MS)
            values[":legacy"] = num_attr(now_ms - LEGACY_RUNNER_MS)
        # Both forms are parenthesised already (DynamoDB refuses redundant parentheses).
        condition = f"{condition} AND {revision_condition(revision)}"
        values |= revision_values(revision)
        return self._update_job(
            key,
            update="SET #status = :running, attempts = :n, started_at = :now,"
            " runner = :runner, runner_until = :until REMOVE expires_at",
            condition=condition,
            values=values,
            returns=None,
        )

    def extend_runner(
        self, key: JobKey, *, attempt: int, runner: str, until_ms: int
    ) -> tuple[bool, Job | None]:
        """A live holder's heartbeat: its attempt is its own until `until_ms`. Refused once the
        attempt ended or another runner took it over (the holder lost it)."""
        return self._update_job(
            key,
            update="SET runner_until = :until",
            condition="attempts = :n AND #status = :running AND runner = :runner",
            values={
                ":n": num_attr(attempt),
                ":running": str_attr(Status.RUNNING),
                ":runner": str_attr(runner),
                ":until": num_attr(until_ms),
            },
        )

    def record_attempt(
        self,
        key: JobKey,
        *,
        attempt: int,
        runner: str,
        outcome: Status,
        started_at_ms: int,
        now_ms: int,
        result_json: str | None = None,
        error: AttemptError | None = None,
        next_attempt_at_ms: int | None = None,
        expires_at_s: int | None = None,
    ) -> tuple[bool, Job | None]:
        """End attempt `attempt` as succeeded, failed (a retry is due) or dead, in one
        conditional write, by its holder (`runner`) only. Refused if the attempt is no longer
        this runner's to end (a duplicate delivery, a cancel, a later attempt, or another
        runner that took it over after this one's lease ran out)."""
        sets = ["#status = :outcome", "attempts = :n", "started_at = :started"]
        removes = ["claim_token", "lease_until", "runner", "runner_until"]
        values: Item = {
            ":n": num_attr(attempt),
            ":running": str_attr(Status.RUNNING),
            ":runner": str_attr(runner),
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
            condition="attempts = :n AND #status = :running AND runner = :runner",
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
        """`attempt` of `revision` (waiting to start, or running with a holder that has provably
        stopped) -> dead, with `error` added to the history: for a message of that attempt
        that SQS redrove to the DLQ because its consumer kept crashing before ending it. Bound
        to the attempt AND the revision the letter carries, as running an attempt is: a letter
        read after the job was moved or retried (a later revision or attempt waits or runs) or
        ended leaves it alone, and so does one whose attempt a live holder runs (a second
        message of that attempt, turned away as busy until SQS redrove it)."""
        return self._update_job(
            key,
            update=MARK_DEAD + ", runner, runner_until",
            condition=(
                f"({self._RUNNABLE} OR (attempts = :n AND #status = :running AND"
                " (runner_until < :stopped OR"
                " (attribute_not_exists(runner_until) AND started_at < :legacy))))"
                f" AND {revision_condition(revision)}"
            ),
            values={
                **revision_values(revision),
                ":stopped": num_attr(now_ms - CLOCK_SKEW_MS),
                ":legacy": num_attr(now_ms - LEGACY_RUNNER_MS),
                **self._attempt_values(attempt, now_ms),
                ":dead": str_attr(Status.DEAD),
                ":now": num_attr(now_ms),
                ":expires": num_attr(expires_at_s),
                **appended_error(error),
            },
        )
