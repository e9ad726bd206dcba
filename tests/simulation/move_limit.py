"""The move limit (issue 25, item 2; `--move-limit`): jobs pushed to the most changes one job
keeps, with crashes around the last allowed change's send.

The seam: `sundial.services.moves.MAX_MOVES` is patched to MOVE_LIMIT for the run (simulate),
so a job reaches the limit within a few ticks; the mover reads that module's name at each call,
so the patched value is the limit every path applies.

- **The limit mover** (slot `limit-mover`), most ticks: keeps one target job of the first
  tenant until it reached the limit (a plain job waiting for its first attempt), and moves it:
  beyond the direct window (400 to 1800 s) while it has fewer than MOVE_LIMIT - 1 moves, then
  its last allowed move due soon (0 or 5 s), which the move itself sends, with a fault planned
  around that send (Slot.planned): a crash before SendMessageBatch (the transaction landed and
  nothing was sent: the job is pending and direct), a crash after it (sent, not yet claimed),
  SQS refusing it (503, the move answers 503), or none. The client repeats that request as
  every client does (at once, or in the drain). Each move has a body of its own (a new payload),
  so a repeat is only ever a repeat. Once at the limit, one more change with a new body, which
  must be refused (409) and, if the job is still stranded, sends it first.
  Interleavings it relies on: the repeat races the sweeps, the consumer of the message the
  crashed call did send, and the racing clients' own moves, cancels and pauses of the job.
- **Oracle:** every accepted job ran (lost); a repeat of a move that landed (its body is the
  job's last change, within REPEAT_WINDOW_MS of it) never answers the limit's 409; no job keeps
  more than MOVE_LIMIT moves, nor two consecutive moves of one body within the repeat window
  (a repeat counted as another move).
"""

from __future__ import annotations

from typing import Any

from sundial.errors import Conflict, InvalidInput, SundialError
from sundial.ids import JobKey
from sundial.model.job import Job, Status
from sundial.model.submission import ChangeJob
from sundial.services.moves import REPEAT_WINDOW_MS
from sundial.wiring import Dependencies
from tests.simulation.actors import Actors
from tests.simulation.scheduler import Actor
from tests.simulation.world import canonical

MOVE_LIMIT = 4
_LIMIT_REFUSAL = "times already"  # the limit's 409 says "job was changed N times already"
_FAULTS = ("crash_before", "crash_after", "refuse", None)


class MoveLimit(Actors):
    limit_target: str | None = None
    # Requests of the mover that got no answer (or a 409 "retry"), repeated by the mover once
    # the in-flight window has passed (its client repeats within seconds, not at the drain):
    # (when, job id, the same change).
    limit_repeats: list[tuple[int, str, ChangeJob]]

    def limit_actors(self) -> list[Actor]:
        now = self.clock.now_ms()
        due = [r for r in self.limit_repeats if r[0] <= now]
        if due:
            self.limit_repeats.remove(due[0])
            _, job_id, change = due[0]
            repeat = lambda: self._limited_move("limit-mover", job_id, change)  # noqa: E731
            return [Actor("limit-mover:repeat its move", repeat)]
        if self.rng.random() < 0.8:
            return [Actor("limit-mover:move to the limit", self.op_limit_move)]
        return []

    def op_limit_move(self) -> None:
        slot = "limit-mover"
        job = self._limit_target()
        if job is None:
            return
        moves = len(job.moves)
        fields: dict[str, Any] = {"payload": {"limit": next(self.attempts)}}
        if moves >= MOVE_LIMIT:
            fields["delay_seconds"] = self.rng.choice([60, 1800])
            self.limit_target = None  # one more change, then another job
        elif moves == MOVE_LIMIT - 1:
            fields["delay_seconds"] = self.rng.choice([0, 5])
            fault = self.rng.choice(_FAULTS)
            if fault is not None:
                self.slots[slot].planned["SendMessageBatch"] = fault
            self.ledger.counts["last allowed moves"] += 1
        else:
            fields["delay_seconds"] = self.rng.choice([400, 950, 1800])
        change = ChangeJob.model_validate(fields)
        self._limited_move(slot, job.id, change)

    def _limit_target(self) -> Job | None:
        """The mover's job: the one it is pushing to the limit, or a new one waiting for its
        first attempt (the client's own view of it: a read outside the actors)."""
        if self.limit_target is not None:
            job = self.observer.store.get(JobKey.from_job_id(self.limit_target))
            if job is not None and _movable(job):
                return job
            self.limit_target = None
        candidates = list(self.first.job_ids)
        self.rng.shuffle(candidates)
        for job_id in candidates[:5]:
            job = self.observer.store.get(JobKey.from_job_id(job_id))
            if job is not None and _movable(job) and len(job.moves) < MOVE_LIMIT:
                self.limit_target = job_id
                return job
        return None

    def _limited_move(self, slot: str, job_id: str, change: ChangeJob) -> None:
        """The move as `op_move_job` records it; a 409 of the limit is checked against the job:
        if this very request is its last change, within the repeat window, the repeat of a move
        that landed was counted as another."""
        now = self.clock.now_ms()
        payload = canonical(change.payload)
        floor = now + (change.delay_seconds or 0) * 1000

        def call(deps: Dependencies) -> Job:
            try:
                return deps.moves.move(job_id, change)
            except Conflict as conflict:
                if _LIMIT_REFUSAL in str(conflict):
                    self._check_limit_refusal(job_id, change)
                raise

        repeat = (now + 31_000, job_id, change)  # past SUBMIT_IN_FLIGHT_MS
        try:
            job = self._client_call(slot, call)
        except Conflict as conflict:
            if "retry" in str(conflict):
                self.ledger.unanswered_moves.setdefault(job_id, []).append((floor, payload))
                self.limit_repeats.append(repeat)
            return
        except InvalidInput:
            return
        except BaseException:
            self.ledger.unanswered_moves.setdefault(job_id, []).append((floor, payload))
            self.limit_repeats.append(repeat)
            raise
        self.ledger.moves.setdefault(job_id, []).append((job.revision, job.due_ms, payload))

    def _check_limit_refusal(self, job_id: str, change: ChangeJob) -> None:
        job = self.observer.store.get(JobKey.from_job_id(job_id))
        if job is None or not job.moves:
            return
        last = job.moves[-1]
        repeat = last.request == change.fingerprint()
        if repeat and self.clock.now_ms() - last.at_ms < REPEAT_WINDOW_MS:
            self.ledger.errors.append(
                f"move limit: a repeat of {job_id}'s last move (which landed) was refused as "
                "another move"
            )

    def check_move_counts(self) -> list[str]:
        """No job keeps more than MOVE_LIMIT moves, nor a repeat counted as another move."""
        errors = []
        for job_id in self.first.job_ids:
            try:
                job = self.observer.store.get(JobKey.from_job_id(job_id))
            except SundialError:
                continue
            if job is None:
                continue
            if len(job.moves) > MOVE_LIMIT:
                errors.append(f"move limit: {job_id} keeps {len(job.moves)} moves")
            for before, after in zip(job.moves, job.moves[1:], strict=False):
                if (
                    before.request is not None
                    and before.request == after.request
                    and after.at_ms - before.at_ms < REPEAT_WINDOW_MS
                ):
                    errors.append(f"move limit: {job_id}: a repeat of a move counted as another")
        return errors


def _movable(job: Job) -> bool:
    return (
        job.dag is None
        and job.schedule_id is None
        and job.attempts == 0
        and job.status in (Status.PENDING, Status.PAUSED, Status.QUEUED)
    )
