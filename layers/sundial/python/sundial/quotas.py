"""Per-queue quotas: what one team may submit to its queue (issue 16, item 2).

The one set of quota settings: a queue in cdk.json declares them (stacks/settings.py builds its
QueueSettings on QueueQuota), the stack hands the limited queues to the functions that create
jobs from a client request as SUNDIAL_QUOTAS (JSON {queue: {max_submissions_per_second,
max_payload_bytes}}), and the runtime's Settings parse it back with this model. How a request is
admitted or refused is sundial.services.admission; the counters are
sundial.store.submission_windows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

# The API's inline payload limit, for every queue (sundial.model.submission checks it at the
# boundary); a queue's max_payload_bytes may only lower it.
MAX_PAYLOAD_BYTES = 65_536
# The API's limit for a payload stored in the payload bucket (sundial.model.payloads): 5 MiB.
# A queue's max_payload_bytes may lower this too.
MAX_STORED_PAYLOAD_BYTES = 5 * 1024 * 1024

# A queue's submission counter takes one DynamoDB write per admitted request, on one item. One
# item (one partition key) sustains about 1,000 write units a second, and a refused conditional
# write costs a unit too, so one counter item ("lane") admits at most this many submissions a
# second: a higher limit is split over ceil(limit / SUBMISSIONS_PER_LANE) lanes.
SUBMISSIONS_PER_LANE = 500

# The highest limit a queue may declare (2,000 lanes): far above what the API stage's throttle
# (`api` in cdk.json) and API Gateway's account quota let one deployment receive.
MAX_SUBMISSIONS_PER_SECOND = 1_000_000


class QueueQuota(BaseModel):
    """What a queue admits. Each limit is off (None, the default) unless declared; a queue with
    no limit costs nothing extra per submission.

    `max_submissions_per_second`: jobs accepted per second on this queue, counted per job (a
    batch of 25 counts 25, a DAG each of its nodes on this queue) over fixed one-second windows
    of the clock. A request over it is refused whole with 429 and a Retry-After, and nothing
    is written. Why: one team's burst must not take the table's write capacity or the
    sweepers' time from the others. Every other API call that makes jobs appear on the queue
    counts too: a schedule's create, update and resume (the occurrences it writes at once:
    those due within 15 minutes and the next; more than a second admits are counted over the
    seconds after), a move or run-now (1), a retry by id and each job of a dead-letter replay
    (1). The occurrences the sweepers write as schedules go on are not (one per occurrence, at
    most one every 10 seconds per schedule): `max_dispatch_per_second` paces those
    (sundial.services.admission lists every path and why).
    `max_payload_bytes`: the largest payload (compact UTF-8 JSON) a job of this queue may carry,
    at most the API's MAX_STORED_PAYLOAD_BYTES (a job's payload over MAX_PAYLOAD_BYTES is stored in
    S3; a schedule's or a DAG node's may not be); a larger one is refused with 413 (the same payload
    never fits later, so it is not a 429). Why: a team whose consumers or downstream systems
    take small messages can say so once, where every producer meets it."""

    # Strict: JSON numbers only, so a `true` or a "100" in cdk.json is an error.
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_submissions_per_second: int | None = Field(
        default=None, ge=1, le=MAX_SUBMISSIONS_PER_SECOND, strict=True
    )
    max_payload_bytes: int | None = Field(
        default=None, ge=1, le=MAX_STORED_PAYLOAD_BYTES, strict=True
    )

    @property
    def limited(self) -> bool:
        """Whether this queue declares any limit."""
        return self.max_submissions_per_second is not None or self.max_payload_bytes is not None

    def limits(self) -> QueueQuota:
        """Just the quota (a subclass, e.g. the CDK's QueueSettings, carries more)."""
        return QueueQuota(
            max_submissions_per_second=self.max_submissions_per_second,
            max_payload_bytes=self.max_payload_bytes,
        )


def parse_quotas(value: str | Mapping[str, object]) -> dict[str, QueueQuota]:
    """SUNDIAL_QUOTAS (JSON {queue: {...}}) -> {queue: QueueQuota}."""
    raw = json.loads(value) if isinstance(value, str) else value
    if not isinstance(raw, Mapping):
        raise ValueError("SUNDIAL_QUOTAS must be a JSON object of {queue: quota}")
    return {str(queue): QueueQuota.model_validate(quota) for queue, quota in raw.items()}


def quotas_json(queues: Mapping[str, QueueQuota]) -> str:
    """SUNDIAL_QUOTAS for these queues: only those that declare a limit, compact JSON with
    sorted keys, leaving out the limits that are off."""
    return json.dumps(
        {
            name: quota.limits().model_dump(exclude_none=True)
            for name, quota in sorted(queues.items())
            if quota.limited
        },
        sort_keys=True,
        separators=(",", ":"),
    )
