"""The oracle's schedule and listing checks (tests.simulation.sim's docstring, Oracle)."""

from __future__ import annotations

from collections import Counter, defaultdict

from sundial.ids import JobKey
from sundial.model.job import Status
from sundial.model.recurrence import CronRecurrence, zone
from sundial.model.schedule import (
    RunOutcome,
    ScheduleState,
)
from sundial.services.schedules import RunView
from tests.simulation.holders import Holders
from tests.simulation.long_time import LongTime
from tests.simulation.move_limit import MoveLimit
from tests.simulation.tenants import Tenants


class ScheduleOracle(LongTime, Tenants, Holders, MoveLimit):
    """The schedule checks; the profiles' actors and checks come in with its bases."""

    def _check_schedules(
        self, runs_by_job: dict[str, list[tuple[int, int]]], dup_clean: list[str]
    ) -> list[str]:
        errors: list[str] = []
        for schedule_id in sorted(self.ledger.schedules - self.ledger.deleted_schedules):
            records = self._all_runs(schedule_id)
            errors += self._check_chain(schedule_id, records)
            for view in records:
                record = view.run
                ran = runs_by_job.get(record.job_id, [])
                due = record.at_ms <= self.clock.now_ms() - 60_000  # not one still ahead
                # Sent early, then held by a pause and missed by the time of the resume: its
                # misfire policy skipped it (the job is cancelled; the run says when it fired).
                skipped = (
                    schedule_id in self.ledger.paused_schedules
                    and view.job is not None
                    and view.job.status is Status.CANCELLED
                )
                if record.outcome.value == "fired" and not ran and due and not skipped:
                    errors.append(f"schedule {schedule_id}: occurrence {record.at_ms} never ran")
                if record.outcome is RunOutcome.REPLACED and ran:
                    errors.append(f"schedule {schedule_id}: replaced {record.at_ms} ran")
                first = min((at for attempt, at in ran if attempt == 1), default=None)
                if first is not None and first < record.at_ms // 1000 * 1000:
                    errors.append(f"schedule {schedule_id}: occurrence {record.at_ms} ran early")
            errors += self._check_updates(schedule_id, records, runs_by_job)
            fired = [v.run.job_id for v in records]
            for job_id in fired:
                attempts = Counter(a for a, _ in runs_by_job.get(job_id, []))
                if any(n > 1 for n in attempts.values()) and not self.ledger.crashed():
                    dup_clean.append(job_id)
        return errors

    def _check_listings(self) -> list[str]:
        """Every live schedule in the table (whatever its create answered) is in its queue's
        listing exactly once, and no deleted one is (the index is written and removed in the
        create's and the delete's transactions)."""
        deps = self.observer
        listed: Counter[str] = Counter()
        for queue in self.queues:
            cursor: str | None = None
            while True:
                page, cursor = deps.schedules.of_queue(queue, limit=7, cursor=cursor)
                listed.update(schedule.id for schedule in page)
                if cursor is None:
                    break
        errors = []
        live = set()
        for schedule in deps.schedule_store.schedule_items():
            if schedule.state is ScheduleState.DELETED:
                if listed[schedule.id]:
                    errors.append(f"schedule {schedule.id}: deleted, and listed")
                continue
            live.add(schedule.id)
            if listed[schedule.id] != 1:
                errors.append(f"schedule {schedule.id}: listed {listed[schedule.id]} times")
        errors += [f"listed {i}, which is no live schedule" for i in set(listed) - live]
        deleted = self.ledger.deleted_schedules & set(self.schedule_ids)
        self.trace(f"listings: {len(live)} live schedules listed once, {len(deleted)} deleted")
        return errors + self._check_dag_listings()

    def _check_dag_listings(self) -> list[str]:
        """Every DAG with nodes in the table is in the listing of each queue it uses exactly
        once, and in no other (an entry whose submit died before its nodes is passed over)."""
        deps = self.observer
        uses: dict[str, set[str]] = defaultdict(set)
        for node in deps.dag_listing.node_refs():
            uses[node.dag_id].add(node.queue)
        errors = []
        for queue in self.queues:
            listed: Counter[str] = Counter()
            cursor: str | None = None
            while True:
                views, cursor = deps.dags.of_queue(
                    queue, readable=self.queues, limit=3, cursor=cursor
                )
                listed.update(view.id for view in views)
                if cursor is None:
                    break
            expected = {dag_id for dag_id, queues in uses.items() if queue in queues}
            errors += [
                f"DAG {dag_id}: listed {listed[dag_id]} times on {queue}"
                for dag_id in expected | set(listed)
                if listed[dag_id] != (dag_id in expected)
            ]
        self.trace(f"listings: {len(uses)} DAGs listed once on each queue they use")
        return errors

    def _check_chain(self, schedule_id: str, records: list[RunView]) -> list[str]:
        """The run records form one chain: each names its successor (time and revision, so
        its job), none is named twice (no fork: no duplicate), one starts it, and the one
        successor not yet decided is still ahead (no gap; the chain never stopped)."""
        schedule = self.observer.schedule_store.get(schedule_id)
        assert schedule is not None
        ids = {view.run.job_id for view in records}
        successors = [
            schedule.occurrence_key(view.run.next_at_ms, view.run.next_revision).job_id
            for view in records
            if view.run.next_at_ms is not None
        ]
        named = Counter(successors)
        errors = [
            f"schedule {schedule_id}: {job} follows two runs" for job, n in named.items() if n > 1
        ]
        starts = [view.run.at_ms for view in records if view.run.job_id not in named]
        if len(starts) != 1:
            errors.append(f"schedule {schedule_id}: the chain starts at {starts} (a gap)")
        waiting = [
            view.run
            for view in records
            if view.run.next_at_ms is not None
            and schedule.occurrence_key(view.run.next_at_ms, view.run.next_revision).job_id
            not in ids
        ]
        if len(waiting) != 1 or (waiting[0].next_at_ms or 0) < self.drain_until:
            last = records[-1].run.at_ms if records else None
            errors.append(f"schedule {schedule_id}: its chain stopped (last run {last})")
        return errors

    def _check_updates(
        self,
        schedule_id: str,
        records: list[RunView],
        runs_by_job: dict[str, list[tuple[int, int]]],
    ) -> list[str]:
        """After an update answered 200, an occurrence of an older revision runs only if it
        was decided by then; an occurrence of that update's revision has its payload and
        falls on its cron."""
        schedule = self.observer.schedule_store.get(schedule_id)
        assert schedule is not None
        revision_of: dict[str, int] = {}
        for view in records:
            key = JobKey.from_job_id(view.run.job_id)
            revision_of[view.run.job_id] = next(
                r
                for r in range(schedule.revision + 1)
                if schedule.occurrence_key(key.due_ms, r) == key
            )
        errors: list[str] = []
        for update in (u for u in self.ledger.schedule_updates if u.schedule_id == schedule_id):
            cron = CronRecurrence.parse(update.cron, zone("UTC"))
            for view in records:
                job_id = view.run.job_id
                if not runs_by_job.get(job_id):
                    continue
                revision = revision_of[job_id]
                if revision < update.revision and job_id not in update.decided:
                    errors.append(
                        f"schedule {schedule_id}: {view.run.at_ms} of revision {revision} ran "
                        f"after revision {update.revision} answered, undecided by then"
                    )
                if revision == update.revision:
                    if self.ledger.payloads.get(job_id) != update.payload:
                        errors.append(f"schedule {schedule_id}: {job_id} ran an old payload")
                    if cron.next_after(view.run.at_ms - 1) != view.run.at_ms:
                        errors.append(f"schedule {schedule_id}: {job_id} is off its cron")
        return errors
