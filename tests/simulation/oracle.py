"""The oracle: what must hold after a run's drain (tests.simulation.sim's docstring)."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict

from sundial.clock import to_rfc3339
from sundial.ids import JobKey
from sundial.runs.dlq_indexer import REDRIVE_ERROR
from tests.simulation.config import (
    SHARDS,
)
from tests.simulation.ledger import RunResult
from tests.simulation.oracle_schedules import ScheduleOracle
from tests.support import (
    TABLE,
)


class Oracle(ScheduleOracle):
    def check(self) -> RunResult:
        ledger, deps = self.ledger, self.observer
        runs_by_job: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for job_id, attempt, at in ledger.runs:
            runs_by_job[job_id].append((attempt, at))
        order = {job_id: i for i, (job_id, _, _) in reversed(list(enumerate(ledger.runs)))}
        lost, early, dup_clean, cancelled_ran = [], [], [], []
        dup_fault = 0
        for job_id, due_ms in ledger.accepted.items():
            runs = runs_by_job.get(job_id, [])
            if job_id in ledger.cancelled:
                after = ledger.cancelled_after[job_id]
                ran_after = any(j == job_id for j, _, _ in ledger.runs[after:])
                if ran_after and job_id not in ledger.retried:
                    cancelled_ran.append(job_id)
                continue
            if not runs and job_id not in ledger.maybe_cancelled:
                job = deps.store.get(JobKey.from_job_id(job_id))  # read only to say why
                lost.append(f"{job_id} ({job.status if job else 'missing'})")
            first = min((at for attempt, at in runs if attempt == 1), default=None)
            if job_id in ledger.moves or job_id in ledger.unanswered_moves:
                early += self._check_moved(job_id, due_ms)
            elif first is not None and first < due_ms // 1000 * 1000:
                early.append(f"{job_id} ran {first - due_ms} ms early")
            attempts = Counter(attempt for attempt, _ in runs)
            if any(n > 1 for n in attempts.values()):
                if ledger.crashed():
                    dup_fault += 1
                else:
                    dup_clean.append(job_id)
        schedule_errors = self._check_schedules(runs_by_job, dup_clean) + self._check_listings()
        dag_errors = [
            f"DAG node {name} ran before its parent {parent}"
            for job_id, (name, parents) in ledger.dag_nodes.items()
            for parent in parents
            if job_id in order and self._parent_order(job_id, parent, order) is False
        ]
        written = self._correlation_ids()
        ledger.refused_but_written += [
            f"attempt {cid} wrote a job" for cid in ledger.refused if cid in written
        ]
        quiet, late, pacing = self._check_flood()
        never_back, stale = self._check_dead_letters(runs_by_job)
        errors = ledger.errors + self._check_payloads() + self.profile_checks(runs_by_job)
        return RunResult(
            errors=errors,
            counts=ledger.counts,
            never_brought_back=never_back,
            killed_by_stale_letters=stale,
            died_and_came_back=len(ledger.poisoned & ledger.succeeded & set(runs_by_job)),
            moves_answered=sum(len(moves) for moves in ledger.moves.values()),
            moved_and_ran=sum(1 for job_id in ledger.moves if job_id in runs_by_job),
            refusals=ledger.refusals,
            refused_but_written=ledger.refused_but_written,
            quiet_lateness_ms=quiet,
            late=late,
            pacing_errors=pacing,
            seed=self.config.seed,
            jobs=len(ledger.accepted),
            faults=ledger.faults,
            lost=lost,
            early=early,
            duplicates_clean=dup_clean,
            duplicates_after_fault=dup_fault,
            cancelled_then_ran=cancelled_ran,
            schedule_errors=schedule_errors,
            dag_errors=dag_errors,
            trace=self.lines,
        )

    def _check_payloads(self) -> list[str]:
        """Every run of a plain job never moved had exactly the payload it was submitted with
        (one stored in S3 included: fetched, checked against its hash, parsed)."""
        ledger = self.ledger
        moved = ledger.moves.keys() | ledger.unanswered_moves.keys()
        errors = []
        for index, (job_id, attempt, _) in enumerate(ledger.runs):
            submitted = ledger.submitted_payload.get(job_id)
            if submitted is None or job_id in moved:
                continue
            if ledger.run_payloads[index] != submitted:
                errors.append(f"{job_id} attempt {attempt} ran with a payload it was not given")
        return errors

    def profile_checks(self, runs_by_job: dict[str, list[tuple[int, int]]]) -> list[str]:
        """The checks of the profiles of issues 25 and 31 made after the drain (the others are
        made as the run goes: Ledger.errors)."""
        ledger = self.ledger
        errors = [f"still waiting after the drain: {name}" for name in ledger.stuck]
        settled = ledger.cancelled | ledger.maybe_cancelled | ledger.succeeded
        errors += [
            f"flaky job {job_id} never ran to the end"
            for job_id in sorted(ledger.flaky - settled)
            if job_id in runs_by_job
        ]
        if self.config.holders:
            errors += self.check_holders()
        if self.config.move_limit:
            errors += self.check_move_counts()
        return errors

    def _check_dead_letters(
        self, runs_by_job: dict[str, list[tuple[int, int]]]
    ) -> tuple[list[str], list[str]]:
        """Jobs that died (poisoned) and never ran to the end after the drain's replays; and,
        in a run where no consumer crashed, jobs marked dead for a redrive that never was."""
        ledger, deps = self.ledger, self.observer
        never_back = [
            job_id
            for job_id in sorted(ledger.poisoned)
            if job_id in runs_by_job
            and job_id not in ledger.succeeded
            and job_id not in ledger.cancelled | ledger.maybe_cancelled
        ]
        stale = []
        if not ledger.crashed():
            # No consumer crashed, so SQS redrove nothing: a job marked dead for a redrive was
            # killed by a stale letter (one indexed after the job was retried).
            for job_id in sorted(ledger.poisoned):
                job = deps.store.get(JobKey.from_job_id(job_id))
                if job is not None and any(e.error_type == REDRIVE_ERROR for e in job.history):
                    stale.append(job_id)
        return never_back, stale

    def _check_moved(self, job_id: str, submitted_due_ms: int) -> list[str]:
        """A moved job's runs: each run of its first attempt comes no earlier than the due time
        of a move that can be the last one to have landed, and carries that move's payload.
        Those moves: the answered move with the highest revision (the last answered one to have
        landed; with no answered move, the submit itself), and every move that got no answer
        (it may have landed after)."""
        ledger = self.ledger
        answered = ledger.moves.get(job_id, [])
        if answered:
            # A move that kept the payload ("") allows any: an earlier move may have changed it.
            _, due, payload = max(answered)
            candidates = [(due, payload)]
        else:
            candidates = [(submitted_due_ms, ledger.submitted_payload.get(job_id, ""))]
        candidates += ledger.unanswered_moves.get(job_id, [])
        errors = []
        for index, (run_id, attempt, at) in enumerate(ledger.runs):
            if run_id != job_id or attempt != 1:
                continue
            payload = ledger.run_payloads[index]
            if not any(
                at >= due // 1000 * 1000 and (not wanted or payload == wanted)
                for due, wanted in candidates
            ):
                errors.append(
                    f"{job_id} (moved) ran at {to_rfc3339(at)} with payload {payload}: no move "
                    f"that can have landed last allows it ({candidates})"
                )
        return errors

    def _correlation_ids(self) -> set[str]:
        """The correlation id of every item in the table (jobs and DAG nodes carry one)."""
        ids: set[str] = set()
        for page in self.reader.get_paginator("scan").paginate(TableName=TABLE):
            ids.update(i["correlation_id"]["S"] for i in page["Items"] if "correlation_id" in i)
        return ids

    def _check_flood(self) -> tuple[list[int], list[str], list[str]]:
        """The quiet queue's lateness and its bound; the flood's pacing (see the docstring)."""
        flood, ledger = self.config.flood, self.ledger
        if flood is None:
            return [], [], []
        lateness: list[int] = []
        late: list[str] = []
        bound = flood.bound_ms(self.config.faults)
        for job_id, due_ms in self._quiet_jobs(flood.quiet).items():
            visible = ledger.visible.get((job_id, 1))
            if visible is None:
                late.append(f"{job_id}: never visible")
                continue
            lateness.append(visible - due_ms)
            if visible - due_ms > bound:
                late.append(f"{job_id}: visible {visible - due_ms} ms after its due time")
        pacing: list[str] = []
        if not self.config.faults.any:
            gap_ms = 1000 * SHARDS / flood.per_second
            paused_at = ledger.flood_paused_at or 2**62
            by_shard: dict[int, list[int]] = defaultdict(list)
            for job_id in ledger.flood:
                visible = ledger.visible.get((job_id, 1))
                if visible is not None and visible < paused_at:
                    by_shard[JobKey.from_job_id(job_id).shard].append(visible)
            for shard, times in sorted(by_shard.items()):
                times.sort()
                for before, after in itertools.pairwise(times):
                    if after - before < gap_ms - 1000:  # DelaySeconds rounds to whole seconds
                        pacing.append(f"flood on shard {shard}: {after - before} ms apart")
        return lateness, late, pacing

    def _quiet_jobs(self, quiet: str) -> dict[str, int]:
        """{job id: due} of the quiet queue's jobs the lateness bound applies to: not cancelled,
        paused, a DAG node or of unknown time. A moved job is due when its last move (the
        highest revision) put it; one with a move that may have landed unanswered is left out."""
        ledger = self.ledger
        excluded = ledger.cancelled | ledger.maybe_cancelled | ledger.paused_jobs
        excluded |= set(ledger.dag_nodes) | ledger.flood | set(ledger.unanswered_moves)
        return {
            job_id: max(ledger.moves[job_id])[1] if job_id in ledger.moves else due_ms
            for job_id, due_ms in ledger.accepted.items()
            if job_id not in excluded and ledger.queue_of.get(job_id) == quiet
        }

    def _parent_order(self, job_id: str, parent: str, order: dict[str, int]) -> bool | None:
        name, _ = self.ledger.dag_nodes[job_id]
        dag = name.split("/")[0]
        for other_id, (other, _) in self.ledger.dag_nodes.items():
            if other == f"{dag}/{parent}":
                return other_id in order and order[other_id] < order[job_id]
        return None
