"""A second tenant (issue 25; `--tenants`): the `billing` queue with its own DLQ, quota, API
callers, consumer and dead letters, and a hostile message naming the first tenant's job.

- **Tenants** (world.Tenant). The first tenant's actors are those of every other profile
  (queues `default` and `email`: the API clients, movers, the replayer, the consumers); the
  second tenant (queue `billing`, 2 submissions a second) has API callers of its own
  (`billing-api-1` submits, creates a schedule and submits a DAG whose nodes are all on
  `billing`; `billing-api-2` races the rest with cancels, moves, job, queue and schedule pauses
  and resumes, schedule updates and deletes, retries by id and replays of its own dead letters:
  a quarter of its jobs fail their first attempt for good) and its own consumer
  (`billing-consumer`). Each actor chooses only among its own tenant's queues, jobs and
  schedules. The sweepers, the dead-letter indexer (one function for every DLQ) and the
  drain's operator are Sundial's own.
- **The write recorder** (check_call, on every slot's `before-call` hook, after the scheduler
  let the call go and before it is made, so nothing runs between the check and the call): for
  each item, window or object the call changes, the queue it belongs to. DynamoDB (PutItem,
  UpdateItem, DeleteItem, each entry of TransactWriteItems and BatchWriteItem): a job item's
  `queue` (the item as stored, read just before the call; a moved job's pointer, its job's; a
  new item, its own), `quota#<queue>#...`, `dags#<queue>`, `schedules#<queue>`,
  `dead#<queue>`, the queue's state item, a schedule's items (its queue), an idempotency
  record (the queue its key was drawn for). S3: a payload object's key prefix
  (`payloads/<queue>/`), for writes and for reads. SQS: the queue (or its DLQ or priority
  queue) a message is sent to, deleted from or has its visibility changed on. Each slot may
  change its tenant's queues only (Slot.acting_for); the indexer, while it indexes one letter,
  only the queue of that letter's DLQ. Sundial's sweepers change every queue's items.
- **A hostile message** (`billing-hostile`, some ticks): the second tenant sends to its OWN
  queue, or its own DLQ, an envelope naming a job of the first tenant (built from that job as
  it is, as if its id and body had leaked; correlation id `hostile-N`). Its consumer's fence
  must refuse it (the job is of another queue) and the indexer must not mark that job dead:
  any write to it is a cross-tenant change by the consumer (or by the indexer acting for
  `billing`), and a run of it by the second tenant's consumer is one too.
- **Oracle** (Ledger.errors): no call of one tenant's actors changes another tenant's items,
  quota windows, payload objects or messages, nor reads its payload objects; no tenant's
  consumer runs another tenant's job; and every tenant's jobs pass the rest of the oracle.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from typing import Any

from sundial.history.capture import is_job_key
from sundial.ids import JobKey
from sundial.model.payloads import PAYLOAD_PREFIX
from sundial.store.dag_listing import DAG_LISTING_PREFIX
from sundial.store.dead_letters import DEAD_PREFIX
from sundial.store.queue_states import QUEUES_PK
from sundial.store.schedules import LISTING_PREFIX, SCHEDULE_PREFIX
from sundial.store.submission_windows import QUOTA_PREFIX
from sundial.transport.envelope import envelope_body
from tests.simulation.actors import Actors
from tests.simulation.aws import Slot
from tests.simulation.config import PAYLOAD_BUCKET
from tests.simulation.scheduler import Actor
from tests.simulation.world import Tenant
from tests.support import TABLE

SECOND_QUEUE = "billing"
SECOND_QUOTA = {"max_submissions_per_second": 2}
# The second tenant's DAG: every node on its own queue.
SECOND_DAG: dict[str, Any] = {
    "name": "month_close",
    "nodes": {
        "invoice": {"queue": SECOND_QUEUE, "payload": {"month": "2026-11"}},
        "charge": {"queue": SECOND_QUEUE, "depends_on": ["invoice"]},
        "ledger": {"queue": SECOND_QUEUE, "depends_on": ["invoice"]},
        "receipt": {"queue": SECOND_QUEUE, "depends_on": ["charge", "ledger"]},
    },
}
SECOND_SLOTS = ("billing-api-1", "billing-api-2", "billing-consumer", "billing-hostile")
# The first tenant's slots, in every profile that may run beside this one.
FIRST_SLOTS = frozenset(
    {"api-1", "api-2", "api-3", "mover", "limit-mover", "replayer", "consumer-1", "consumer-2"}
    | {"consumer-1b", "consumer-1c", "worker-1", "worker-2"}
)

_SQS_CHANGES = frozenset(
    {
        "SendMessage",
        "SendMessageBatch",
        "DeleteMessage",
        "DeleteMessageBatch",
        "ChangeMessageVisibility",
        "ChangeMessageVisibilityBatch",
    }
)
_S3_CHANGES = frozenset({"PutObject", "PutObjectTagging", "DeleteObject", "CopyObject"})


class Tenants(Actors):
    second: Tenant
    second_jobs_left: int
    _second_schedule_tick: int
    _second_dag_tick: int

    def prepare_tenants(self) -> None:
        """Before the world is set up: the second tenant's queue, quota and slots."""
        self.second = Tenant("second", (SECOND_QUEUE,), SECOND_DAG, dies=True)
        self.tenants.append(self.second)
        self.queues = (*self.queues, SECOND_QUEUE)
        self.quotas[SECOND_QUEUE] = SECOND_QUOTA
        self.consumer_pools[SECOND_QUEUE] = ["billing-consumer"]
        for name in SECOND_SLOTS:
            self.slot_tenants[name] = self.second

    def add_tenant_slots(self) -> None:
        for name in SECOND_SLOTS:
            self.slots[name] = Slot(self, name)

    def restrict_slots(self) -> None:
        """Once every profile's slots exist: what each may change (Slot.acting_for)."""
        for name, slot in self.slots.items():
            if name in self.slot_tenants:
                slot.acting_for = self.slot_tenants[name].queues
            elif name in FIRST_SLOTS:
                slot.acting_for = self.first.queues

    def plan_tenants(self) -> None:
        config = self.config
        self.second_jobs_left = config.jobs // 3
        self._second_schedule_tick = self.rng.randrange(config.ticks // 2)
        self._second_dag_tick = self.rng.randrange(config.ticks // 2)

    def tenant_actors(self, tick: int) -> list[Actor]:
        rng = self.rng
        actors = []
        submitter = "billing-api-1"
        if tick == self._second_schedule_tick:
            actors.append(
                Actor(f"{submitter}:create schedule", partial(self.op_create_schedule, submitter))
            )
        elif tick == self._second_dag_tick:
            actors.append(Actor(f"{submitter}:submit DAG", partial(self.op_submit_dag, submitter)))
        elif self.second_jobs_left > 0 and rng.random() < 0.6:
            count = min(self.second_jobs_left, rng.choice([1, 1, 2]))
            self.second_jobs_left -= count
            actors.append(
                Actor(f"{submitter}:submit x{count}", partial(self.op_submit, submitter, count))
            )
        if rng.random() < 0.5:
            name, op = rng.choice(self.racing_ops(self.second))
            actors.append(Actor(f"billing-api-2:{name}", partial(op, "billing-api-2")))
        if rng.random() < 0.3:
            actors.append(Actor("billing-hostile:hostile message", self.op_hostile))
        return actors

    def op_hostile(self) -> None:
        """The second tenant sends, to its own queue or DLQ, the envelope of a first tenant's
        job as it stands (its attempt to come, its revision)."""
        if not self.first.job_ids:
            return
        job_id = self.rng.choice(self.first.job_ids)
        job = self.observer.store.get(JobKey.from_job_id(job_id))  # leaked, as it stands
        if job is None:
            return
        body = json.loads(envelope_body(job, attempt=job.attempts + 1))
        body["correlation_id"] = f"hostile-{next(self.attempts)}"
        s = self.slots["billing-hostile"]
        settings = s.deps.settings
        to_dlq = self.rng.random() < 0.5
        url = (settings.dead_letter_urls if to_dlq else settings.queue_urls)[SECOND_QUEUE]
        s.sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))
        self.ledger.counts["hostile messages"] += 1
        self.trace(f"     a hostile envelope naming {job_id} ({job.queue}) on {url}")

    # -- the write recorder ---------------------------------------------------------------

    def check_call(self, slot: Slot, service: str, operation: str, params: dict[str, Any]) -> None:
        if not self.config.tenants or slot.acting_for is None:
            return
        for what, queue in self._targets(service, operation, params):
            self.ledger.counts["tenant calls checked"] += 1
            if queue is not None and queue not in slot.acting_for:
                actor = self.scheduler.current()
                self.ledger.errors.append(
                    f"cross-tenant: {actor.name if actor else slot.name} {service}.{operation} "
                    f"{what} of queue {queue} (it may act on {', '.join(slot.acting_for)})"
                )

    def check_run(self, job_id: str) -> None:
        """A run of the job function: the consumer that ran it must be of the job's tenant."""
        actor = self.scheduler.current()
        if not self.config.tenants or actor is None:
            return
        slot = self.slots.get(actor.name.split(":")[0])
        job = self.observer.store.get(JobKey.from_job_id(job_id))
        if slot and slot.acting_for and job is not None and job.queue not in slot.acting_for:
            self.ledger.errors.append(f"cross-tenant: {actor.name} ran {job_id} of {job.queue}")

    def _targets(
        self, service: str, operation: str, params: dict[str, Any]
    ) -> Iterator[tuple[str, str | None]]:
        if service == "dynamodb":
            for pk, sk, item in _item_writes(operation, params):
                yield f"changes item {pk}/{sk}", self._item_queue(pk, sk, item)
        elif service == "s3" and params.get("Bucket") == PAYLOAD_BUCKET:
            keys = [params.get("Key", "")]
            if operation == "DeleteObjects":
                keys = [o["Key"] for o in params.get("Delete", {}).get("Objects", [])]
            elif operation == "GetObject":
                yield f"reads object {keys[0]}", _payload_queue(keys[0])
                return
            elif operation not in _S3_CHANGES:
                return
            for key in keys:
                yield f"changes object {key}", _payload_queue(key)
        elif service == "sqs" and operation in _SQS_CHANGES:
            url = params.get("QueueUrl", "")
            yield f"{operation} on {url.rsplit('/', 1)[-1]}", self._queue_of_url(url)

    def _queue_of_url(self, url: str) -> str | None:
        settings = self.observer.settings
        for urls in (settings.queue_urls, settings.dead_letter_urls, settings.priority_queue_urls):
            for queue, known in urls.items():
                if known == url:
                    return queue
        return None

    def _item_queue(self, pk: str, sk: str, item: dict[str, Any] | None) -> str | None:
        """The queue an item belongs to; None for Sundial's own (cursors, sweep records)."""
        if item is not None and "queue" in item:
            return str(item["queue"]["S"])
        if pk.startswith(SCHEDULE_PREFIX):
            schedule = self.observer.schedule_store.get(pk.removeprefix(SCHEDULE_PREFIX))
            return schedule.queue if schedule is not None else None
        if is_job_key(pk, sk):
            stored = self._stored(pk, sk)
            if stored is not None and "moved_to" in stored:
                stored = self._stored(pk, stored["moved_to"]["S"])
            return str(stored["queue"]["S"]) if stored and "queue" in stored else None
        return self._keyed_queue(pk, sk)

    def _keyed_queue(self, pk: str, sk: str) -> str | None:
        """The queue an item of another kind than a job or a schedule names in its key."""
        if pk.startswith(QUOTA_PREFIX):
            return pk.removeprefix(QUOTA_PREFIX).split("#")[0]
        for prefix in (DAG_LISTING_PREFIX, LISTING_PREFIX, DEAD_PREFIX):
            if pk.startswith(prefix):
                return pk.removeprefix(prefix)
        if pk == QUEUES_PK:
            return sk
        return self.idempotency_queues.get(pk)  # None for every other item (Sundial's own)

    def _stored(self, pk: str, sk: str) -> dict[str, Any] | None:
        key = {"pk": {"S": pk}, "sk": {"S": sk}}
        item: dict[str, Any] | None = self.reader.get_item(TableName=TABLE, Key=key).get("Item")
        return item


def _item_writes(
    operation: str, params: dict[str, Any]
) -> Iterator[tuple[str, str, dict[str, Any] | None]]:
    """(pk, sk, the item put or None) of each item a DynamoDB call writes."""
    if operation == "PutItem":
        item = params["Item"]
        yield item["pk"]["S"], item["sk"]["S"], item
    elif operation in ("UpdateItem", "DeleteItem"):
        yield params["Key"]["pk"]["S"], params["Key"]["sk"]["S"], None
    elif operation == "TransactWriteItems":
        for entry in params["TransactItems"]:
            if "Put" in entry:
                item = entry["Put"]["Item"]
                yield item["pk"]["S"], item["sk"]["S"], item
            for kind in ("Update", "Delete"):
                if kind in entry:
                    key = entry[kind]["Key"]
                    yield key["pk"]["S"], key["sk"]["S"], None
    elif operation == "BatchWriteItem":
        for requests in params["RequestItems"].values():
            for request in requests:
                if "PutRequest" in request:
                    item = request["PutRequest"]["Item"]
                    yield item["pk"]["S"], item["sk"]["S"], item
                else:
                    key = request["DeleteRequest"]["Key"]
                    yield key["pk"]["S"], key["sk"]["S"], None


def _payload_queue(key: str) -> str | None:
    parts = key.split("/")
    return parts[1] if len(parts) >= 3 and parts[0] == PAYLOAD_PREFIX else None
