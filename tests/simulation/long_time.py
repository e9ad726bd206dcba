"""Time long enough for DynamoDB's TTL and S3's lifecycle to act (issue 25; `--long`).

- **AWS's background processes** (moto runs neither), every third tick and at each step of a
  jump: DynamoDB's TTL (tests.support.expire_by_ttl) and the payload bucket's lifecycle
  (tests.support.expire_by_lifecycle, with the rules the stack synthesizes:
  tests.support.payload_lifecycle_rules). Each acts atomically: between its scan and its
  deletes no other actor runs (its client has no scheduling hook), as the real processes
  decide on an item's or object's state when they remove it. And the history Lambda: the real
  HistoryRecorder with its JobRetention, as sundial.wiring.history builds it, on a slot of its
  own (its calls interleave with everyone's and take faults), fed from moto's stream of the
  table (tests.support.StreamReader, marking the REMOVE records of TTL's deletions as TTL's).
  A crashed invocation, or a record it reports failed, is delivered again with the records
  after it (as Lambda retries a stream batch), so its deletes and tags are repeated.
- **Jumps of days** (three of the ticks, 1 to 70 days each), with faults off: the clients first
  repeat what got no answer (as they would within seconds), what is on its way is delivered,
  then time runs in steps of 3 days (below SQS's message retention of 4 days): a sweep, then
  15 minutes later (every DelaySeconds has run out) the consumers drain their queues and the
  background processes act, then a visibility timeout later the consumers take what came
  back. (With faults, a delivery that failed would come back only at the next step, days
  later, where a consumer running all along has it again within minutes.) Before a jump, a
  client pauses some jobs not yet dispatched (preferring stored payloads), a schedule and the
  DAG; after it, it resumes them: paused for weeks or months. A queue a racing client paused
  may stay paused across a jump too. Flaky jobs (a fifth of the plain jobs, failing their
  first 1 to 3 attempts, retryable) have a retry policy of one to four days: their retries are
  timer items the jumps' sweeps reach, days apart. A submit that crashed (in a tick) between
  its payload's put and its job's write leaves an object no job references, which the
  lifecycle expires a week later.
- **The retention** after the drain: 40 more days in steps of 3 (a retention of 30 days, then
  the lifecycle's 7), so every job that ended expires and what it owned must go.
- **Oracle:** at the end of every tick and step, for every job item alive (check_ownership),
  what it owns is still there: its payload object, its idempotency record (naming it), its
  DAG's listing entry on its queue, a moved job's pointer (naming its item); and no job ran
  into PayloadUnavailable. Every accepted, not cancelled job ran with its exact payload, and
  every flaky job ran to the end (the rest of the oracle). After the retention
  (check_orphans): no idempotency record of a job that lived and is gone, no DAG listing entry
  or pointer of a job that is gone, and no object tagged referenced that no live job
  references, nor one tagged unreferenced past the lifecycle's days. Two leaks the design
  accepts are counted, not violations: a payload a move replaced whose re-tagging a crash cut
  off, and the record of a request that died before writing its job and was never repeated
  (sundial.store.idempotency: the batch's client got a per-job 409 "retry shortly" and moved
  on).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Collection, Iterator
from typing import Any

import boto3

from sundial.history.capture import HistoryRecorder, is_job_key
from sundial.ids import DagKey, JobKey
from sundial.model.job import Job, Status
from sundial.model.payloads import (
    REFERENCE_TAG,
    REFERENCED,
    UNREFERENCED_DAYS,
    owned_by_one_job,
)
from sundial.store.dag_listing import DAG_LISTING_PREFIX
from sundial.store.idempotency import IDEM_SK, idempotency_pk
from sundial.store.job_items import item_to_job
from sundial.wiring import Dependencies, history_recorder
from tests.simulation.actors import Actors
from tests.simulation.aws import Slot
from tests.simulation.config import PAYLOAD_BUCKET, VISIBILITY_S
from tests.simulation.scheduler import Actor
from tests.support import (
    TABLE,
    FakeLambdaContext,
    StreamReader,
    expire_by_lifecycle,
    expire_by_ttl,
    payload_lifecycle_rules,
)

HISTORY_BUCKET = "sundial-history-raw"
DAY_MS = 86_400_000
STEP_MS = 3 * DAY_MS  # below SQS's default message retention (4 days)
JUMP_DAYS = (1, 9, 40, 70)
JUMPS = 3
RETENTION_STEPS = 14  # 42 days: the retention (30) and the lifecycle's days (7), and a margin
_PAYLOAD_UNAVAILABLE = "PayloadUnavailable"


@functools.cache
def lifecycle_rules() -> list[dict[str, Any]]:
    """The payload bucket's lifecycle rules as the stack synthesizes them (computed once per
    process, before moto starts: synthesizing runs the CDK)."""
    for warning in ("DEPRECATED", "END_OF_LIFE", "UNTESTED"):
        os.environ.setdefault(f"JSII_SILENCE_WARNING_{warning}_NODE_VERSION", "1")
    return payload_lifecycle_rules()


class LongTime(Actors):
    jump_ticks: dict[int, int]  # tick -> days the clock jumps before it
    long_paused: list[tuple[str, str]]  # ("job" | "schedule" | "dag", id) paused for a jump
    history: HistoryRecorder
    stream: ResumingStreamReader
    history_backlog: list[dict[str, Any]]  # records a failed invocation leaves to the next
    ttl_removed: set[tuple[str, str]]

    def add_long_slots(self) -> None:
        dynamodb = boto3.client("dynamodb")
        arn = dynamodb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
        boto3.client("s3").create_bucket(Bucket=HISTORY_BUCKET)
        streams = boto3.client(
            "dynamodbstreams", endpoint_url="https://streams.dynamodb.us-east-1.amazonaws.com"
        )
        self.stream = ResumingStreamReader(streams, arn)
        self.slots["history"] = Slot(self, "history")
        self.slots["pauser"] = Slot(self, "pauser")
        environ = {
            "SUNDIAL_HISTORY_BUCKET": HISTORY_BUCKET,
            "SUNDIAL_TABLE_NAME": TABLE,
            "SUNDIAL_PAYLOAD_BUCKET": PAYLOAD_BUCKET,
        }
        self.history = history_recorder(environ=environ, session=self.slots["history"].session)
        self.history_backlog = []
        self.ttl_removed = set()
        self.long_paused = []
        self.seen_jobs: set[str] = set()  # every job id whose item a check saw alive
        # The background processes' own clients: no scheduling hook, so each acts at once.
        self.quiet_dynamodb = boto3.client("dynamodb")
        self.quiet_s3 = boto3.client("s3")

    def plan_long(self) -> None:
        ticks = self.rng.sample(range(3, self.config.ticks - 3), JUMPS)
        self.jump_ticks = {tick: self.rng.choice(JUMP_DAYS) for tick in sorted(ticks)}

    def long_actors(self, tick: int) -> list[Actor]:
        actors = self.background_actors() if tick % 3 == 0 else []
        if tick + 1 in self.jump_ticks:
            actors.append(Actor("pauser:pause for the jump", self.op_pause_for_jump))
        if tick - 1 in self.jump_ticks and self.long_paused:
            actors.append(Actor("pauser:resume after the jump", self.op_resume_after_jump))
        return actors

    def background_actors(self) -> list[Actor]:
        return [
            Actor("history:read the stream", self.op_history),
            Actor("aws:ttl", self.op_ttl),
            Actor("aws:lifecycle", self.op_lifecycle),
        ]

    # -- AWS's background processes and the history Lambda ---------------------------------

    def op_history(self) -> None:
        """One invocation of the history Lambda on what the stream has (after the records a
        failed invocation left); a record reported failed comes again, with those after it."""
        records = (
            self.history_backlog + self.stream.next_event(ttl_removed=self.ttl_removed)["Records"]
        )
        self.history_backlog = records  # until this invocation returns
        if not records:
            return
        response = self.history.handle({"Records": records}, FakeLambdaContext())
        failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
        self.history_backlog = []
        if failed:
            sequences = [r["dynamodb"]["SequenceNumber"] for r in records]
            self.history_backlog = records[sequences.index(failed[0]) :]
        self.ledger.counts["stream records handled"] += len(records)

    def op_ttl(self) -> None:
        removed = expire_by_ttl(self.quiet_dynamodb, TABLE, self.clock.now_ms())
        self.ttl_removed |= removed
        self.ledger.counts["items removed by TTL"] += len(removed)
        if removed:
            self.trace(f"     TTL removed {len(removed)} items")

    def op_lifecycle(self) -> None:
        deleted = expire_by_lifecycle(
            self.quiet_s3, PAYLOAD_BUCKET, lifecycle_rules(), self.clock.now_ms()
        )
        self.ledger.counts["objects expired by the lifecycle"] += len(deleted)
        if deleted:
            self.trace(f"     the lifecycle expired {len(deleted)} objects")

    # -- jumps ---------------------------------------------------------------------------------

    def jump(self, tick: int) -> None:
        days = self.jump_ticks[tick]
        self.trace(f"jump of {days} days")
        self.ledger.counts["days jumped"] += days
        # Without faults: a delivery that failed comes back only at the next step, days later,
        # where a consumer running all along would have had it again within minutes (and SQS
        # drops a message after 4 days).
        faults_on, self.faults_on = self.faults_on, False
        self.clock.advance(seconds=31)  # past the in-flight window: the clients' repeats
        self.repeat_later()
        self.time_step(0, f"before the jump before tick {tick}")  # what is on its way arrives
        remaining = days * DAY_MS
        while remaining > 0:
            step = min(STEP_MS, remaining)
            remaining -= step
            self.time_step(step, f"jump before tick {tick}")
        self.faults_on = faults_on

    def time_step(self, step_ms: int, where: str) -> None:
        """Time runs `step_ms` with nothing but the sweepers, the consumers and AWS's
        background processes at work: a sweep, then (every DelaySeconds run out) the consumers
        drain their queues and the background processes act, then (a visibility timeout
        later) the consumers take what came back."""
        self.clock.advance(ms=step_ms)
        sweep = Actor("sweeper-1:sweep", lambda: self.op_sweep("sweeper-1"))
        self.waiting = self.scheduler.run([*self.waiting, sweep])
        self.clock.advance(seconds=901)
        actors = self.consumer_actors(drain=True) + self.background_actors()
        self.waiting = self.scheduler.run(self.waiting + actors)
        self.clock.advance(seconds=VISIBILITY_S + 1)
        self.waiting = self.scheduler.run(self.waiting + self.consumer_actors(drain=True))
        self.check_ownership(where)

    def op_pause_for_jump(self) -> None:
        """Pause what will wait for weeks: a few jobs not yet dispatched (stored payloads
        first), a schedule, the DAG."""
        now = self.clock.now_ms()
        waiting = []
        for job_id in self.first.job_ids:
            job = self.observer.store.get(JobKey.from_job_id(job_id))  # the client's GET
            if job is not None and job.status is Status.PENDING and job.due_ms > now + 900_000:
                waiting.append((job.payload_ref is None, job_id))
        chosen = [("job", job_id) for _, job_id in sorted(waiting)[:3]]
        self.ledger.paused_jobs.update(job_id for _, job_id in chosen)
        if self.first.schedule_ids:
            chosen.append(("schedule", self.rng.choice(self.first.schedule_ids)))
            self.ledger.paused_schedules.add(chosen[-1][1])
        chosen += [("dag", dag_id) for dag_id in self.dag_ids[:1]]
        for kind, ident in chosen:
            self.long_paused.append((kind, ident))
            self._pause_or_resume(kind, ident, pause=True)

    def op_resume_after_jump(self) -> None:
        paused, self.long_paused = self.long_paused, []
        for kind, ident in paused:
            self.ledger.counts[f"{kind}s resumed after a jump"] += 1
            self._pause_or_resume(kind, ident, pause=False)

    def _pause_or_resume(self, kind: str, ident: str, *, pause: bool) -> None:
        def call(deps: Dependencies) -> Any:
            services: dict[str, Any] = {
                "job": deps.jobs,
                "schedule": deps.schedules,
                "dag": deps.dags,
            }
            service = services[kind]
            return service.pause(ident) if pause else service.resume(ident)

        self._answered("pauser", call)

    def resume_long_paused(self) -> None:
        """The drain's: a DAG still paused is resumed (jobs and schedules are, by the drain)."""
        for dag_id in self.dag_ids:
            self._pause_or_resume("dag", dag_id, pause=False)

    def retain(self) -> None:
        """After the drain: a retention and the lifecycle's days pass; then what expired jobs
        owned must be gone."""
        self.trace("retention")
        for step in range(RETENTION_STEPS):
            self.time_step(STEP_MS, f"retention step {step}")
        self.waiting = self.scheduler.run(self.waiting + self.background_actors())
        self.ledger.errors.extend(self.check_orphans())

    # -- the oracle ----------------------------------------------------------------------------

    def _table_items(self) -> Iterator[dict[str, Any]]:
        for page in self.reader.get_paginator("scan").paginate(TableName=TABLE):
            yield from page["Items"]

    def _objects(self) -> dict[str, Any]:
        s3 = self.quiet_s3
        objects = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=PAYLOAD_BUCKET):
            for listed in page.get("Contents", []):
                objects[listed["Key"]] = listed
        return objects

    def check_ownership(self, where: str) -> None:
        """Every live job item's owned records and object are there (see the docstring)."""
        items = list(self._table_items())
        self.seen_jobs.update(job.id for job in filter(None, map(_live_job, items)))
        keys = {(i["pk"]["S"], i["sk"]["S"]): i for i in items}
        entries = {
            (i["pk"]["S"].removeprefix(DAG_LISTING_PREFIX), i["dag_id"]["S"])
            for i in items
            if i["pk"]["S"].startswith(DAG_LISTING_PREFIX) and "dag_id" in i
        }
        objects = self._objects()
        errors = self.ledger.errors
        for item in items:
            job = _live_job(item)
            if job is None:
                continue
            if any(e.error_type == _PAYLOAD_UNAVAILABLE for e in job.history):
                _once(errors, f"{job.id} ran into PayloadUnavailable ({where})")
            ref = job.payload_ref
            if ref is not None and owned_by_one_job(ref.key) and ref.key not in objects:
                _once(errors, f"{job.id}: its payload object is gone while it lives ({where})")
            if job.idempotency_key is not None:
                record = keys.get((_idem_pk(job), IDEM_SK))
                if record is None or record["job_id"]["S"] != job.id:
                    _once(errors, f"{job.id}: its idempotency record is gone ({where})")
            if job.dag is not None and (job.queue, job.dag.dag_id) not in entries:
                _once(errors, f"{job.id}: its DAG's listing entry is gone ({where})")
            if job.origin is not None and job.origin != job.key:
                pointer = keys.get((job.origin.pk, job.origin.sk))
                if pointer is None or pointer.get("moved_to", {}).get("S") != job.key.sk:
                    _once(errors, f"{job.id}: its pointer is gone while it lives ({where})")

    def check_orphans(self) -> list[str]:
        """After the retention: nothing is left of a job that is gone."""
        items = list(self._table_items())
        live = {job.key: job for job in filter(None, map(_live_job, items))}
        timers = [item_to_job(i) for i in items if "retry_of" in i]
        referenced = {j.payload_ref.key for j in [*live.values(), *timers] if j.payload_ref}
        errors = []
        for item in items:
            pk, sk = item["pk"]["S"], item["sk"]["S"]
            if sk == IDEM_SK and pk.startswith("idem#"):
                job_id = item["job_id"]["S"]
                if self.observer.store.get(JobKey.from_job_id(job_id)) is not None:
                    continue
                if job_id in self.seen_jobs:
                    errors.append(f"orphan: the idempotency record of {job_id} outlived it")
                else:  # the documented leak (sundial.store.idempotency: remember)
                    self.ledger.counts["records of requests that never wrote their job"] += 1
            elif pk.startswith(DAG_LISTING_PREFIX):
                queue, dag_id = pk.removeprefix(DAG_LISTING_PREFIX), item["dag_id"]["S"]
                nodes = self.observer.dag_nodes.dag_nodes(DagKey.from_dag_id(dag_id))
                if not any(node.queue == queue for node in nodes):
                    errors.append(f"orphan: DAG {dag_id}'s listing entry on {queue}")
            elif (
                "moved_to" in item
                and is_job_key(pk, sk)
                and JobKey.from_item_keys(pk, item["moved_to"]["S"]) not in live
            ):
                errors.append(f"orphan: the pointer {pk}/{sk} outlived its job")
        errors += self._orphan_objects(referenced)
        self.trace(f"retention: {len(live)} job items live, {len(errors)} orphans")
        return errors

    def _orphan_objects(self, referenced: set[str]) -> list[str]:
        errors = []
        now = self.clock.now_ms()
        replaced = self._replaced_payload_jobs()
        for key, listed in self._objects().items():
            if not owned_by_one_job(key) or key in referenced:
                continue
            tags = self.quiet_s3.get_object_tagging(Bucket=PAYLOAD_BUCKET, Key=key)["TagSet"]
            tag = {t["Key"]: t["Value"] for t in tags}.get(REFERENCE_TAG)
            age_days = (now - listed["LastModified"].timestamp() * 1000) / DAY_MS
            if tag == REFERENCED and key.split("/")[2] in replaced:
                self.ledger.counts["replaced payloads kept (a crashed move's accepted leak)"] += 1
            elif tag == REFERENCED:
                errors.append(f"orphan: object {key} tagged referenced, no job references it")
            elif age_days >= UNREFERENCED_DAYS:
                errors.append(f"orphan: object {key} unreferenced for {age_days:.0f} days")
        return errors

    def _replaced_payload_jobs(self) -> set[str]:
        """The ULIDs of jobs given a new payload by a move (answered or not)."""
        moved = {
            job_id
            for job_id, moves in self.ledger.moves.items()
            if any(payload for _, _, payload in moves)
        } | {
            job_id
            for job_id, moves in self.ledger.unanswered_moves.items()
            if any(payload for _, payload in moves)
        }
        return {JobKey.from_job_id(job_id).ulid for job_id in moved}


class ResumingStreamReader(StreamReader):
    """The stream read as an event source mapping reads it, from where the last read ended:
    each read takes a new iterator after the last sequence number read. (moto replaces the
    table, its stream shard included, with a copy when a TransactWriteItems fails, so an
    iterator taken before reads a shard that no longer grows; AWS's iterators have no such
    quirk.)"""

    def __init__(self, client: Any, stream_arn: str) -> None:
        super().__init__(client, stream_arn)
        self._streams = client
        self._last: str | None = None

    def next_event(self, *, ttl_removed: Collection[tuple[str, str]] = ()) -> dict[str, Any]:
        if self._last is not None:
            [shard] = self._streams.describe_stream(StreamArn=self._arn)["StreamDescription"][
                "Shards"
            ]
            self._iterator = self._streams.get_shard_iterator(
                StreamArn=self._arn,
                ShardId=shard["ShardId"],
                ShardIteratorType="AFTER_SEQUENCE_NUMBER",
                SequenceNumber=self._last,
            )["ShardIterator"]
        event = super().next_event(ttl_removed=ttl_removed)
        if event["Records"]:
            self._last = event["Records"][-1]["dynamodb"]["SequenceNumber"]
        return event


def _live_job(item: dict[str, Any]) -> Job | None:
    """The job an item is, if it is a job's own item (not a pointer, a timer or another
    kind of item)."""
    pk, sk = item["pk"]["S"], item["sk"]["S"]
    if not is_job_key(pk, sk) or "moved_to" in item or "retry_of" in item:
        return None
    return item_to_job(item)


def _idem_pk(job: Job) -> str:
    assert job.idempotency_key is not None
    return idempotency_pk(job.queue, job.idempotency_key)


def _once(errors: list[str], error: str) -> None:
    """Add an error once, whatever the step that found it first (the rest say the same)."""
    what = error.rsplit(" (", 1)[0]
    if not any(e.startswith(what) for e in errors):
        errors.append(error)
