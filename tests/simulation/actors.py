"""The actors' operations: the API clients', the sweeper's, the consumers' and the
dead-letter handlers' work, one operation per actor."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from functools import partial
from typing import Any

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from sundial.errors import (
    Conflict,
    InvalidInput,
    SubmissionRateExceeded,
    SundialError,
    TooLargeForQueue,
)
from sundial.local.triggers import sqs_record
from sundial.model.dag import SubmitDag
from sundial.model.job import Status
from sundial.model.payloads import INLINE_PAYLOAD_BYTES, PayloadStorage
from sundial.model.schedule import (
    CreateSchedule,
    Misfire,
    RunOutcome,
    UpdateSchedule,
    schedule_id_for,
)
from sundial.model.submission import ChangeJob, SubmitJob
from sundial.services.dead_letters import DeadLetterFilter
from sundial.services.schedules import RunView
from sundial.store.idempotency import idempotency_pk
from sundial.wiring import Dependencies
from tests.simulation.config import (
    FLAKY_RETRY,
    LONG_RETRY,
    SHARDS,
)
from tests.simulation.ledger import ScheduleUpdateSeen
from tests.simulation.scheduler import Actor
from tests.simulation.world import Tenant, WorldBase, canonical, submit_one
from tests.support import (
    FakeLambdaContext,
    sqs_event,
)


class Actors(WorldBase):
    def op_submit(self, slot: str, count: int) -> None:
        tenant = self.tenant_of(slot)
        requests = [
            SubmitJob(
                queue=self.rng.choice(tenant.queues),
                delay_seconds=self.rng.choice([0, 5, 30, 200, 600, 950, 1500]),
                **self._payload_fields(tenant),
                idempotency_key=f"k{self.rng.randrange(10**9)}"
                if self.rng.random() < 0.5
                else None,
            )
            for _ in range(count)
        ]
        keys = [(r.queue, r.idempotency_key) for r in requests if r.idempotency_key]
        self.idempotency_queues |= {idempotency_pk(q, k): q for q, k in keys}
        first = [True]
        try:
            results = self._client_call(
                slot,
                lambda deps: self._quota_checked(
                    deps,
                    lambda d, cid: d.jobs.submit_many(requests, correlation_id=cid),
                    keys,
                    first,
                ),
            )
        except (SubmissionRateExceeded, TooLargeForQueue):
            return  # refused by the `email` quota: nothing was accepted
        for request, result in zip(requests, results, strict=True):
            if isinstance(result, SundialError):
                continue
            self.ledger.accepted[result.job.id] = result.job.due_ms
            self.ledger.queue_of[result.job.id] = request.queue
            self.ledger.submitted_payload[result.job.id] = canonical(request.payload)
            if isinstance(request.payload, dict) and request.payload.get("poison"):
                self.ledger.poisoned.add(result.job.id)
                tenant.poisoned.add(result.job.id)
            if isinstance(request.payload, dict) and request.payload.get("flaky"):
                self.ledger.flaky.add(result.job.id)
            tenant.job_ids.append(result.job.id)
            if request.idempotency_key and self.rng.random() < 0.2:  # a repeat, later
                try:
                    submit = partial(submit_one, request=request)
                    repeat = self._client_call(
                        slot, partial(self._quota_checked, submit=submit, keys=[], first=[False])
                    )
                except SubmissionRateExceeded:
                    continue  # the client repeats it after Retry-After (the drain)
                assert repeat.job.id == result.job.id, "an idempotent repeat made a new job"

    def _payload(self, tenant: Tenant) -> dict[str, Any]:
        payload: dict[str, Any] = {"n": self.rng.randrange(1000)}
        # Drawn only with dead letters on: the other profiles' seeds replay as they did.
        if (self.config.dead_letters or tenant.dies) and self.rng.random() < 0.25:
            payload["poison"] = True
        # Drawn only in the profiles with flaky jobs (holders: one failed attempt, retried
        # within 10 minutes; long: up to three, retried days apart).
        if (self.config.holders or self.config.long_time) and self.rng.random() < 0.2:
            payload["flaky"] = 1 if self.config.holders else self.rng.randint(1, 3)
        return payload

    def op_cancel(self, slot: str) -> None:
        job_ids = self.tenant_of(slot).job_ids
        if not job_ids:
            return
        now = self.clock.now_ms()
        # Half the time a job due about now: the cancel then races its dispatch and its run.
        due_now = [j for j in job_ids if abs(self.ledger.accepted[j] - now) < 60_000]
        job_id = self.rng.choice(due_now if due_now and self.rng.random() < 0.5 else job_ids)
        try:
            status = self._client_call(slot, lambda deps: deps.jobs.cancel(job_id))
        except Conflict:
            return
        except BaseException:
            self.ledger.maybe_cancelled.add(job_id)
            raise
        if status is Status.CANCELLED:
            self.ledger.cancelled.add(job_id)
            self.ledger.cancelled_after.setdefault(job_id, len(self.ledger.runs))

    def _payload_fields(self, tenant: Tenant) -> dict[str, Any]:
        """A job's payload (`_payload`): one in four stored in S3 (issue 17, item 5), either
        over the inline limit or asked for, so the oracle checks that its runs saw exactly it.
        Drawn from a generator of its own, so the other draws replay as they did."""
        payload = self._payload(tenant)
        fields = self.flaky_fields() if payload.get("flaky") else {}
        kind = self.payload_rng.random()
        if kind < 1 / 8:
            blob = "x" * (INLINE_PAYLOAD_BYTES + self.payload_rng.randrange(1000))
            return fields | {"payload": payload | {"blob": blob}}
        if kind < 1 / 4:
            return fields | {"payload": payload, "payload_storage": PayloadStorage.S3}
        return fields | {"payload": payload}

    def flaky_fields(self) -> dict[str, Any]:
        """A flaky job's submit fields: its retry policy and attempts (by profile)."""
        if self.config.long_time:
            return {"retry": LONG_RETRY, "max_attempts": 5}
        return {"retry": FLAKY_RETRY, "max_attempts": 4}

    def op_move_job(self, slot: str, due_now_bias: float = 0.5) -> None:
        """PATCH /jobs/{id}: a new time (now, within the direct window or beyond it), and half
        the time a new payload, for a job chosen as a cancel chooses (half the time one due
        about now, racing its dispatch and its run)."""
        job_ids = self.tenant_of(slot).job_ids
        if not job_ids:
            return
        now = self.clock.now_ms()
        due_now = [j for j in job_ids if abs(self.ledger.accepted[j] - now) < 60_000]
        chosen = due_now if due_now and self.rng.random() < due_now_bias else job_ids
        job_id = self.rng.choice(chosen)
        fields: dict[str, Any] = {"delay_seconds": self.rng.choice([0, 5, 60, 400, 950, 1800])}
        if self.rng.random() < 0.5:
            fields["payload"] = {"moved": next(self.attempts)}
            if self.payload_rng.random() < 0.25:  # a new payload stored in S3
                fields["payload_storage"] = "s3"
        change = ChangeJob.model_validate(fields)
        payload = canonical(change.payload) if change.changes_payload else None
        floor = now + fields["delay_seconds"] * 1000  # the earliest due it can set
        try:
            job = self._client_call(slot, lambda deps: deps.moves.move(job_id, change))
        except Conflict as conflict:
            if "retry" in str(conflict):  # the client repeats it later (the drain): it may land
                self.ledger.unanswered_moves.setdefault(job_id, []).append((floor, payload or ""))
            return  # otherwise refused: nothing changed
        except InvalidInput:
            return
        except BaseException:
            # No answer: it may have landed, now or when the client repeats it (the drain).
            self.ledger.unanswered_moves.setdefault(job_id, []).append((floor, payload or ""))
            raise
        self.ledger.moves.setdefault(job_id, []).append((job.revision, job.due_ms, payload or ""))

    def op_pause_job(self, slot: str) -> None:
        if job_ids := self.tenant_of(slot).job_ids:
            job_id = self.rng.choice(job_ids)
            self.ledger.paused_jobs.add(job_id)
            self._answered(slot, lambda deps: deps.jobs.pause(job_id))

    def op_resume_job(self, slot: str) -> None:
        if job_ids := self.tenant_of(slot).job_ids:
            job_id = self.rng.choice(job_ids)
            self._answered(slot, lambda deps: deps.jobs.resume(job_id))

    def op_pause_queue(self, slot: str) -> None:
        queue = self.rng.choice(self.tenant_of(slot).queues)
        if self.config.flood is not None:
            # Only the flooding queue: its deferred jobs meet the pause, the quiet one's bound
            # holds for every job.
            queue = self.config.flood.queue
            if self.ledger.flood_paused_at is None:
                self.ledger.flood_paused_at = self.clock.now_ms()
        self._answered(slot, lambda deps: deps.queue_control.pause(queue))

    def op_resume_queue(self, slot: str) -> None:
        queue = self.rng.choice(self.tenant_of(slot).queues)
        if self.config.flood is not None:
            queue = self.config.flood.queue
        self._answered(slot, lambda deps: deps.queue_control.resume(queue))

    def op_create_schedule(self, slot: str) -> None:
        tenant = self.tenant_of(slot)
        cron = self.rng.choice(["* * * * *", "*/2 * * * *", "*/5 * * * *"])
        request = CreateSchedule(
            queue=self.rng.choice(tenant.queues),
            cron=cron,
            idempotency_key=f"s{self.rng.randrange(10**9)}",
            misfire=self.rng.choice(list(Misfire)),
        )

        def create(deps: Dependencies) -> None:
            """The request; a repeat (the drain's, after a 429 or no answer) records it too."""
            created = deps.schedules.create(request)
            if created.schedule.id not in self.ledger.schedules:
                self.ledger.schedules.add(created.schedule.id)
                tenant.schedule_ids.append(created.schedule.id)

        try:
            self._client_call(slot, create)
        except SubmissionRateExceeded as refusal:
            # Refused by `email`'s quota: no schedule of this key may exist (an attempt that
            # wrote one before a crash makes the client's retry find it, uncounted). The
            # drain repeats the request.
            self.ledger.refusals["429"] += 1
            self.trace(f"     refused 429: {refusal}")
            assert request.idempotency_key is not None
            schedule_id = schedule_id_for(request.queue, request.idempotency_key)
            if self.observer.schedule_store.get(schedule_id) is not None:
                self.ledger.refused_but_written.append(f"schedule {schedule_id}")
            raise

    def op_pause_schedule(self, slot: str) -> None:
        if schedule_ids := self.tenant_of(slot).schedule_ids:
            schedule_id = self.rng.choice(schedule_ids)
            self.ledger.paused_schedules.add(schedule_id)
            self._answered(slot, lambda deps: deps.schedules.pause(schedule_id))

    def op_resume_schedule(self, slot: str) -> None:
        if schedule_ids := self.tenant_of(slot).schedule_ids:
            schedule_id = self.rng.choice(schedule_ids)
            self._answered(slot, lambda deps: deps.schedules.resume(schedule_id))

    def op_delete_schedule(self, slot: str) -> None:
        if schedule_ids := self.tenant_of(slot).schedule_ids:
            schedule_id = self.rng.choice(schedule_ids)
            self.ledger.deleted_schedules.add(schedule_id)  # whatever it answers
            self._answered(slot, lambda deps: deps.schedules.delete(schedule_id))

    def op_update_schedule(self, slot: str) -> None:
        """A new cron and payload for a schedule, racing sweeps, pauses, resumes, deletes and
        other updates. A 200 is recorded with the occurrences decided by then."""
        schedule_ids = self.tenant_of(slot).schedule_ids
        if not schedule_ids:
            return
        schedule_id = self.rng.choice(schedule_ids)
        cron = self.rng.choice(["* * * * *", "*/2 * * * *", "*/3 * * * *", "*/5 * * * *"])
        request = UpdateSchedule(cron=cron, payload={"update": next(self.update_numbers)})
        try:
            updated = self._client_call(
                slot, lambda deps: deps.schedules.update(schedule_id, request)
            )
        except SundialError:
            return  # a 4xx (deleted, ended, kept changing), or no answer: the drain repeats it
        decided = frozenset(
            view.run.job_id
            for view in self._all_runs(schedule_id)
            if view.run.outcome is not RunOutcome.REPLACED
        )
        seen = ScheduleUpdateSeen(
            schedule_id, updated.schedule.revision, cron, request.payload, decided
        )
        self.ledger.schedule_updates.append(seen)
        self.trace(f"     updated {schedule_id} to revision {seen.revision}: {cron}")

    def _all_runs(self, schedule_id: str) -> list[RunView]:
        """Every run record of a schedule, oldest first (the oracle's read, outside actors)."""
        views: list[RunView] = []
        before: int | None = None
        while True:
            page, before = self.observer.schedules.runs(schedule_id, limit=100, before_ms=before)
            views += page
            if before is None:
                return sorted(views, key=lambda v: v.run.at_ms)

    def op_submit_dag(self, slot: str) -> None:
        # (It used to add an idempotency_key, which SubmitDag refuses: every DAG submit of the
        # simulation failed validation, so no DAG ever ran in it.)
        dag = SubmitDag.model_validate(self.tenant_of(slot).dag)
        try:
            view = self._client_call(
                slot,
                lambda deps: self._quota_checked(
                    deps,
                    lambda d, cid: d.dags.submit(dag, correlation_id=cid),
                    [],
                    [True],
                ),
            )
        except (SubmissionRateExceeded, TooLargeForQueue):
            return  # refused by the `email` quota (its two `email` nodes): nothing accepted
        self.dag_ids.append(view.id)
        for node in view.nodes:
            assert node.dag is not None
            parents = tuple(name for name, _ in node.dag.parents)
            self.ledger.dag_nodes[node.id] = (f"{view.id}/{node.dag.node}", parents)
            self.ledger.accepted[node.id] = node.due_ms

    def op_index_dead(self, slot: str) -> None:
        """The dead-letter indexer Lambda: each DLQ's messages indexed (a redriven one marked
        dead), each deleted once indexed; one that failed comes back after its visibility."""
        s = self.slots[slot]
        for queue, url in s.deps.settings.dead_letter_urls.items():
            messages = s.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]
            ).get("Messages", [])
            arn = f"arn:aws:sqs:us-east-1:123456789012:{url.rsplit('/', 1)[-1]}"
            for message in messages:
                # While it indexes a letter of `queue`, the indexer may change only that
                # queue's items (the tenants profile's write recorder checks it).
                s.acting_for = (queue,)
                s.deps.dead_letter_indexer.index(SQSRecord(sqs_record(dict(message), arn)))
                s.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                s.acting_for = None
                self.trace(f"     indexed a dead letter of {queue}")

    def op_replay_dead(self, slot: str) -> None:
        """POST /queues/{q}/dead/replay: every letter of a queue, a few at a time, or one job's
        (the admin UI's replay of one letter)."""
        tenant = self.tenant_of(slot)
        queue = self.rng.choice(tenant.queues)
        job_id = None
        if tenant.poisoned and self.rng.random() < 0.5:
            job_id = self.rng.choice(sorted(tenant.poisoned))
        which = DeadLetterFilter(job_id=job_id)
        limit = self.rng.choice([1, 3, 500])
        self._answered(slot, lambda deps: deps.dead_letters.replay(queue, which, limit=limit))

    def op_retry_job(self, slot: str) -> None:
        """POST /jobs/{id}/retry of a job submitted to die, racing its replay and its death.
        A retry re-runs a cancelled job too, by request: such a job is let off the oracle's
        "cancelled then ran" (recorded before the call: a retry with no answer may land)."""
        poisoned = self.tenant_of(slot).poisoned
        if not poisoned:
            return
        job_id = self.rng.choice(sorted(poisoned))
        self.ledger.retried.add(job_id)
        self._answered(slot, lambda deps: deps.jobs.retry(job_id))

    def op_sweep(self, slot: str) -> None:
        shards = list(range(SHARDS))
        self.slots[slot].deps.sweeper.sweep(shards)

    def op_consume(self, slot: str, queue: str) -> None:
        """The consumer Lambda of `queue` on one batch (a slot runs one invocation at a time:
        with runs longer than a tick, the holders profile gives a queue a pool of them)."""
        self.busy.add(slot)
        try:
            self._consume(slot, queue)
        finally:
            self.busy.discard(slot)

    def _consume(self, slot: str, queue: str) -> None:
        s = self.slots[slot]
        url = s.deps.settings.queue_urls[queue]
        messages = s.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=self.batch_size, AttributeNames=["All"]
        ).get("Messages", [])
        if not messages:
            return
        arn = f"arn:aws:sqs:us-east-1:123456789012:{queue}"
        self.note_invocation(slot, deadline_ms=self.clock.now_ms() + self.lambda_remaining_ms)
        context = FakeLambdaContext(self.lambda_remaining_ms)
        result = s.consumer.lambda_handler(sqs_event(messages, arn), context)
        failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
        for message in messages:
            if message["MessageId"] not in failed and not self.keep_undeleted(message["Body"]):
                s.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    def consumer_actors(self, *, drain: bool = False) -> list[Actor]:
        """A consumer invocation per queue, on the first slot of its pool not still running an
        earlier one (in the drain: one that consumes until the queue is empty)."""
        actors = []
        for queue, pool in self.consumer_pools.items():
            slot = next((name for name in pool if name not in self.busy), None)
            if slot is None:
                continue
            if drain:
                actors.append(Actor(f"{slot}:consume", partial(self._consume_all, slot, queue)))
            else:
                actors.append(
                    Actor(f"{slot}:consume {queue}", partial(self.op_consume, slot, queue))
                )
        return actors

    def _consume_all(self, slot: str, queue: str) -> None:
        for _ in range(20):
            s = self.slots[slot]
            url = s.deps.settings.queue_urls[queue]
            before = len(self.ledger.runs)
            self.op_consume(slot, queue)
            attrs = s.sqs.get_queue_attributes(
                QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
            )
            if (
                len(self.ledger.runs) == before
                and attrs["Attributes"]["ApproximateNumberOfMessages"] == "0"
            ):
                return

    def racing_ops(self, tenant: Tenant | None = None) -> list[tuple[str, Callable[[str], None]]]:
        """The operations the API clients of `tenant` (the first's by default) race the rest
        with, one drawn per idle client and tick."""
        tenant = tenant or self.first
        dead_letters = [("retry job", self.op_retry_job)] if self.config.dead_letters else []
        if tenant.dies:
            dead_letters = [("retry job", self.op_retry_job), ("replay", self.op_replay_dead)]
        return [
            *dead_letters,
            ("cancel", self.op_cancel),
            ("cancel", self.op_cancel),
            ("pause job", self.op_pause_job),
            ("move job", self.op_move_job),
            ("move job", self.op_move_job),
            ("resume job", self.op_resume_job),
            ("pause queue", self.op_pause_queue),
            ("resume queue", self.op_resume_queue),
            ("resume queue", self.op_resume_queue),
            ("pause schedule", self.op_pause_schedule),
            ("resume schedule", self.op_resume_schedule),
            ("resume schedule", self.op_resume_schedule),
            ("delete schedule", self.op_delete_schedule),
            ("update schedule", self.op_update_schedule),
        ]

    def repeat_later(self) -> None:
        """The clients repeat every request that got no answer, a 5xx or a 409 "retry" (past
        the in-flight window), a 429 again after its Retry-After; with faults off."""
        deps = self.observer
        later, self.later = self.later, []
        for call in later:
            self.trace("  a client repeats a request that got no answer, a 5xx or a 409 retry")
            with suppress(SundialError):
                self.until_admitted(partial(call, deps))

    def until_admitted(self, call: Callable[[], Any]) -> None:
        """A drain's request, repeated after each 429's Retry-After (time moves on meanwhile)."""
        for _ in range(10):
            try:
                call()
            except SubmissionRateExceeded as refusal:
                self.clock.advance(seconds=refusal.retry_after_s)
                continue
            return
        raise AssertionError("a drain request was refused by a quota ten times")
