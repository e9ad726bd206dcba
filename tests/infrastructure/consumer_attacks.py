"""What a hostile consumer's code could try on the job table with its own role (issue 25, item 5),
each made with Sundial's own store code where a store makes such a write (a plain call where
none does), so the least-privilege test evaluates the requests AWS would authorize
(tests/infrastructure/test_least_privilege.py).

ATTACKS must all be denied by a consumer's role. RESIDUAL are what the role still allows on a
job item whose key the consumer knows (its own jobs, and the nodes of a DAG it runs a node of):
the partition key names no queue, so IAM cannot tell another queue's job item from its own;
the runtime answers them instead (the fence runs only what a job's own item holds, and never
a retry timer's item as a job: sundial.runs.consumer.as_stored).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from typing import Any

from botocore.exceptions import ClientError

from sundial.ids import JobKey
from sundial.model.job import Job, Priority, retry_timer
from sundial.model.schedule import Misfire, Schedule
from sundial.store.dag_listing import DagEntry, DagListingStore
from sundial.store.dead_letters import DeadLetter, DeadLetterStore
from sundial.store.idempotency import IdempotencyKeys, IdempotencyRecord
from sundial.store.jobs import JobStore
from sundial.store.queue_states import QueueStateStore
from sundial.store.schedules import ScheduleStore
from sundial.store.submission_windows import SubmissionWindows
from sundial.store.sweeps import SweepStore
from sundial.store.table import key_item

ULID = "01KAJ0S8ZJ0000000000000000"
DAG_ID = "AUQAAAGbG4WAAAGbG4WAAZqFhKAAAAAAAAAAAAAAAAAC"
# A job of another queue (`email`) whose key the attacker knows.
VICTIM = JobKey(shard=3, due_ms=1_800_000_000_000, ulid=ULID)

Attack = Callable[[Any, str, int], None]


def _victim(now_ms: int) -> Job:
    return Job(
        key=VICTIM,
        queue="email",
        payload_json='{"to":"a"}',
        priority=Priority.NORMAL,
        max_attempts=3,
        created_at_ms=now_ms,
    )


def _update(db: Any, table: str, expression: str, names: dict[str, str], **extra: Any) -> None:
    """SET one attribute of the victim's item to a value it may hold."""
    db.update_item(
        TableName=table,
        Key=key_item(VICTIM),
        UpdateExpression=expression,
        ExpressionAttributeNames=names,
        ExpressionAttributeValues={":v": {"S": extra.pop("value", "email")}},
        **extra,
    )


def _pause(db: Any, table: str, now: int) -> None:
    QueueStateStore(db, table).pause("email", now_ms=now, pause_from="0")


def _count(db: Any, table: str, now: int) -> None:
    windows = SubmissionWindows(db, table)
    windows.take(queue="email", lane=0, window_s=now // 1000, count=1000, limit=1000)


def _plant(db: Any, table: str, now: int) -> None:
    JobStore(db, table).put_if_absent(_victim(now), now_ms=now)


def _schedule(db: Any, table: str, now: int) -> None:
    schedule = Schedule(
        id="planted",
        queue="email",
        payload_json="{}",
        priority=Priority.NORMAL,
        timezone="UTC",
        misfire=Misfire.SKIP,
        shard=0,
        created_at_ms=now,
        anchor_ms=now,
        first_at_ms=now + 3_600_000,
        rate="1 day",
    )
    ScheduleStore(db, table).put_new(schedule)


def _list_dag(db: Any, table: str, now: int) -> None:
    DagListingStore(db, table).put(DagEntry("email", DAG_ID, now))


def _index_letter(db: Any, table: str, now: int) -> None:
    letter = DeadLetter("email", now, "ref", None, None, "Planted", "planted", "{}")
    DeadLetterStore(db, table).put(letter, expires_at_s=now // 1000 + 86_400)


def _take_key(db: Any, table: str, now: int) -> None:
    record = IdempotencyRecord(job_id=VICTIM.job_id, fingerprint="f", created_at_ms=now)
    keys = IdempotencyKeys(db, table)
    keys.remember(queue="email", key="k", record=record)


def _move_cursor(db: Any, table: str, now: int) -> None:
    SweepStore(db, table).advance_cursor(0, "9999999999999#")


def _read_state(db: Any, table: str, now: int) -> None:
    QueueStateStore(db, table).get("email")


def _read_schedule(db: Any, table: str, now: int) -> None:
    ScheduleStore(db, table).get("planted")


def _redirect(db: Any, table: str, now: int) -> None:
    _update(db, table, "SET #q = :v", {"#q": "queue"})


def _rewrite_payload(db: Any, table: str, now: int) -> None:
    _update(db, table, "SET #p = :v", {"#p": "payload"}, value='{"to":"b"}')


def _read_through_write(db: Any, table: str, now: int) -> None:
    _update(db, table, "SET #s = :v", {"#s": "status"}, value="pending", ReturnValues="ALL_NEW")


ATTACKS: dict[str, Attack] = {
    "pause another queue": _pause,
    "count another queue's submission window": _count,
    "put a job on another queue": _plant,
    "put a schedule": _schedule,
    "list a DAG under another queue": _list_dag,
    "index a dead letter of another queue": _index_letter,
    "take another queue's idempotency key": _take_key,
    "move a shard's sweep cursor": _move_cursor,
    "read another queue's state": _read_state,
    "read a schedule": _read_schedule,
    "send a job to another queue": _redirect,
    "rewrite a job's payload": _rewrite_payload,
    "read a whole job back through a write": _read_through_write,
}


def _cancel(db: Any, table: str, now: int) -> None:
    JobStore(db, table, read_back=True).cancel(VICTIM, now_ms=now, expires_at_s=now // 1000)


def _expire(db: Any, table: str, now: int) -> None:
    db.update_item(
        TableName=table,
        Key=key_item(VICTIM),
        UpdateExpression="SET expires_at = :t",
        ExpressionAttributeValues={":t": {"N": "1"}},
    )


def _timer(db: Any, table: str, now: int) -> None:
    timer = retry_timer(_victim(now), attempt=2, at_ms=now + 3_600_000)
    JobStore(db, table).put_if_absent(timer, now_ms=now)


def _read_job(db: Any, table: str, now: int) -> None:
    JobStore(db, table).get(VICTIM)


RESIDUAL: dict[str, Attack] = {
    "cancel a job whose key it knows": _cancel,
    "expire a job whose key it knows (TTL then deletes it)": _expire,
    "put a retry timer naming another queue (the fence never runs it)": _timer,
    "read a job item whose key it knows": _read_job,
}


def attempt(attack: Attack, db: Any, table: str, now_ms: int) -> None:
    """Make the attack's requests (recorded by the client's session); what the emulator
    answers does not matter here."""
    with suppress(ClientError):
        attack(db, table, now_ms)
