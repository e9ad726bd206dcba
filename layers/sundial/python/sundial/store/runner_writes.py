"""What a consumer Lambda may write on the job table, by attribute name: its role allows exactly
these through dynamodb:Attributes (stacks/job_table.py, grant_runner_items), and only on job
partitions (dynamodb:LeadingKeys "shard#*"). The least-privilege test evaluates the role's
statements against every call the consumer SDK makes (tests/infrastructure/
test_least_privilege.py), so a write that names another attribute fails there before it fails
in AWS. AWS counts every name a request uses: the key's, the update expression's and the
condition's."""

from __future__ import annotations

# The consumer's updates: the attempt's take and end (store.attempts), a DAG node's count, release
# (never conditioned on its queue in a consumer's lifecycle: services.deferral), cancel
# (JobStore.cancel) and take (JobStore.take_direct). A job's queue, payload, payload_ref,
# priority, schedule, idempotency key, moves and DAG definition are not among them.
RUNNER_UPDATED = frozenset(
    {
        "pk",
        "sk",
        "status",
        "attempts",
        "started_at",
        # the attempt's holder (store.attempts): set by the take, removed by the end
        "runner",
        "runner_until",
        # read by take_direct's condition (a job is stale only when every call that made it
        # direct is): a condition's names count as the request's, as AWS counts them
        "created_at",
        "retried_at",
        "finished_at",
        "next_attempt_at",
        "expires_at",
        "result",
        "history",
        "claim_token",
        "lease_until",
        "direct",
        "revision",
        "queued_at",
        "cancelled_at",
        "resumed_at",
        "waiting_on",
        "done_parents",
        "failed_parents",
        "released_at",
        "released_by",
        "parent_results",
        "held",
    }
)
# A retry timer's item (model.job.retry_timer through job_to_item), the one item a consumer may
# put: a retry beyond SQS's delay window, or a DAG node's deferred send. Every such put carries
# `retry_of`, so what it makes is bookkeeping the consumer's fence never runs as a job.
TIMER_ATTRIBUTES = frozenset(
    {
        "pk",
        "sk",
        "queue",
        "payload",
        "payload_ref",
        "priority",
        "status",
        "attempts",
        "max_attempts",
        "created_at",
        "expires_at",
        "retry_of",
        "retry_attempt",
        "revision",
        "dag_id",
        "dag",
        "waiting_on",
        "done_parents",
        "failed_parents",
        "released_by",
        "released_at",
        "parent_results",
        "held",
    }
)
