"""What the simulation records as it runs (the Ledger) and what its oracle concludes (the
RunResult)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# -- the ledger and the oracle ------------------------------------------------------------------


@dataclass(frozen=True)
class ScheduleUpdateSeen:
    """An update (PATCH) of a schedule that answered 200: its revision and settings, and the
    occurrences already decided when it answered (read right after: the only ones of an older
    revision that may still run)."""

    schedule_id: str
    revision: int
    cron: str
    payload: Any
    decided: frozenset[str]


@dataclass
class Ledger:
    accepted: dict[str, int] = field(default_factory=dict)  # job id -> due ms (2xx answered)
    cancelled: set[str] = field(default_factory=set)  # cancel answered 200
    # How many runs were recorded when a job's first cancel answered 200: a run after it is a
    # cancelled job's run (one before it, e.g. a failed attempt whose retry was cancelled, not).
    cancelled_after: dict[str, int] = field(default_factory=dict)
    maybe_cancelled: set[str] = field(default_factory=set)  # a cancel got no answer
    runs: list[tuple[str, int, int]] = field(default_factory=list)  # (job id, attempt, at ms)
    dag_nodes: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    schedules: set[str] = field(default_factory=set)
    deleted_schedules: set[str] = field(default_factory=set)
    paused_schedules: set[str] = field(default_factory=set)  # a pause was asked for
    # Updates answered 200, with what the oracle needs (ScheduleUpdateSeen), in answer order.
    schedule_updates: list[ScheduleUpdateSeen] = field(default_factory=list)
    payloads: dict[str, Any] = field(default_factory=dict)  # job id -> payload, as it ran
    faults: Counter[str] = field(default_factory=Counter)
    # Quota refusals: the correlation ids of the attempts refused, and how many of each kind.
    refused: list[str] = field(default_factory=list)
    refusals: Counter[str] = field(default_factory=Counter)
    refused_but_written: list[str] = field(default_factory=list)  # found at the refusal
    # (job id, attempt) -> when SQS first made it visible (send time + DelaySeconds)
    visible: dict[tuple[str, int], int] = field(default_factory=dict)
    paused_jobs: set[str] = field(default_factory=set)  # a pause was asked for
    flood: set[str] = field(default_factory=set)  # the flooding queue's job ids
    queue_of: dict[str, str] = field(default_factory=dict)  # job id -> queue, for plain jobs
    flood_paused_at: int | None = None  # the first pause of the flooding queue asked for
    # Moves (PATCH /jobs/{id}): per job, the moves answered 200 as (revision, due ms, payload
    # JSON), and those that got no answer as (the lowest due they can have set, payload JSON).
    moves: dict[str, list[tuple[int, int, str]]] = field(default_factory=dict)
    unanswered_moves: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    submitted_payload: dict[str, str] = field(default_factory=dict)  # job id -> payload JSON
    run_payloads: list[str] = field(default_factory=list)  # the payload of each run, as `runs`
    poisoned: set[str] = field(default_factory=set)  # submitted to fail their first attempt
    succeeded: set[str] = field(default_factory=set)  # ran to the end at least once
    retried: set[str] = field(default_factory=set)  # a retry by id answered 200

    # The profiles of issues 25 and 31: their violations, each a line saying what and why, in
    # the order found (a move's repeat refused by the limit, a write to another tenant's item, a
    # job's owned record or object gone while it lives, an orphan after the retention, a job
    # that ran with a payload it does not have, an actor still waiting after the drain).
    errors: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)  # actors still waiting after the drain
    flaky: set[str] = field(default_factory=set)  # submitted to fail their first attempts
    # Events the profiles make happen, counted for the summary (jumps, TTL removals, objects
    # expired, hostile messages, runs longer than a visibility timeout, second messages, ...).
    counts: Counter[str] = field(default_factory=Counter)

    def crashed(self) -> bool:
        return bool(
            self.faults["crash_before"] + self.faults["crash_after"] + self.faults["throttle"]
        )


@dataclass
class RunResult:
    seed: int
    jobs: int
    faults: Counter[str]
    lost: list[str]
    early: list[str]
    duplicates_clean: list[str]
    duplicates_after_fault: int
    cancelled_then_ran: list[str]
    schedule_errors: list[str]
    dag_errors: list[str]
    trace: list[str]
    refusals: Counter[str] = field(default_factory=Counter)
    refused_but_written: list[str] = field(default_factory=list)
    # Fair dispatch (Config.flood): the quiet queue's lateness per job (visible - due, ms),
    # those beyond the bound, and the flood's pacing errors.
    quiet_lateness_ms: list[int] = field(default_factory=list)
    late: list[str] = field(default_factory=list)
    pacing_errors: list[str] = field(default_factory=list)
    moves_answered: int = 0  # moves (PATCH /jobs/{id}) answered 200
    moved_and_ran: int = 0  # jobs moved (200) that then ran
    # Dead letters (Config.dead_letters): jobs that died and were never run again to the end,
    # and how many died and came back.
    never_brought_back: list[str] = field(default_factory=list)
    killed_by_stale_letters: list[str] = field(default_factory=list)
    died_and_came_back: int = 0
    errors: list[str] = field(default_factory=list)  # the profiles' (Ledger.errors)
    counts: Counter[str] = field(default_factory=Counter)  # Ledger.counts

    @property
    def violations(self) -> list[str]:
        out = [f"lost {job}" for job in self.lost]
        out += [f"early {job}" for job in self.early]
        out += [f"duplicate without a crash {job}" for job in self.duplicates_clean]
        out += [f"cancelled then ran {job}" for job in self.cancelled_then_ran]
        out += [f"refused by a quota, yet written: {what}" for what in self.refused_but_written]
        out += [f"late {job}" for job in self.late]
        out += [f"dead and never brought back by a replay {job}" for job in self.never_brought_back]
        out += [f"marked dead by a stale dead letter {job}" for job in self.killed_by_stale_letters]
        out += self.errors
        return out + self.schedule_errors + self.dag_errors + self.pacing_errors
