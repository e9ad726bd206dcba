"""DAG workflows against moto: the consumer SDK runs the nodes (through sundial.runs.attempts, as
both runners do), the injected clock drives SQS delays and retries, nothing sleeps."""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sundial.clock import ManualClock
from sundial.consumer import NonRetryableError
from sundial.errors import Conflict, DagNotFound, InvalidInput, Unavailable
from sundial.ids import DagKey
from sundial.model.dag import DagStatus, DagView, SubmitDag
from sundial.model.job import Status
from sundial.store.job_items import job_to_item
from sundial.transport.envelope import Envelope
from sundial.wiring import Dependencies, configure
from tests.harness import ALL_SHARDS, Harness
from tests.support import (
    DAILY_REPORT,
    FakeLambdaContext,
    item_size,
    load_handler,
    serialize_dynamodb,
    sqs_event,
)

# A root and its child, on another queue
CHAIN: dict[str, Any] = {
    "name": "chain",
    "nodes": {"a": {"queue": "default"}, "b": {"queue": "email", "depends_on": ["a"]}},
}
# Two roots and a child of both
PAIR: dict[str, Any] = {
    "name": "pair",
    "nodes": {
        "a": {"queue": "default"},
        "b": {"queue": "default"},
        "c": {"queue": "email", "depends_on": ["a", "b"]},
    },
}

Behaviour = Callable[[Envelope], Any]


class DagRunner:
    """Consumers on every queue, running each node by its name; submits go through the same
    metered boto3 session, so the write meter sees the whole life of a DAG."""

    def __init__(
        self,
        deps: Dependencies,
        clock: ManualClock,
        behaviours: Mapping[str, Behaviour] | None = None,
        **options: Any,
    ) -> None:
        self.behaviours = dict(behaviours or {})
        self.ran: list[str] = []
        self.seen: dict[str, Envelope] = {}
        self.harness = Harness(deps, clock, self._run, **options)
        # The API side on the harness's session too, so its meter sees every write
        self.deps = configure(clock=clock, environ=dict(os.environ), session=self.harness.session)
        self.clock = clock

    def _run(self, job: Envelope) -> Any:
        assert job.dag is not None
        self.ran.append(job.dag.node)
        self.seen[job.dag.node] = job
        behaviour = self.behaviours.get(job.dag.node)
        return behaviour(job) if behaviour else {"node": job.dag.node}

    def submit(self, body: Mapping[str, Any]) -> DagView:
        return self.deps.dags.submit(SubmitDag.model_validate(body))

    def run_until_idle(self, *, rounds: int = 20) -> None:
        """Deliver until no queue has anything visible, letting retry delays pass."""
        for _ in range(rounds):
            before = len(self.harness.calls)
            for queue in ("default", "email"):
                self.harness.poll(queue)
            if len(self.harness.calls) == before:
                self.clock.advance(seconds=120)  # past any first-retry delay and visibility
                for queue in ("default", "email"):
                    self.harness.poll(queue)
                if len(self.harness.calls) == before:
                    return

    def deliver_one(self, queue: str) -> None:
        """Receive one message of `queue`, run it, and delete it."""
        url = self.deps.settings.queue_urls[queue]
        [message] = self.harness.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)[
            "Messages"
        ]
        event = sqs_event([message], f"arn:aws:sqs:us-east-1:123456789012:{queue}")
        result = self.harness.consumer.lambda_handler(event, FakeLambdaContext())
        assert result["batchItemFailures"] == []
        self.harness.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    def get(self, view: DagView) -> DagView:
        return self.deps.dags.get(view.id)


def _statuses(view: DagView) -> dict[str, Status]:
    return {node.dag.node: node.status for node in view.nodes if node.dag}


def test_the_daily_report_diamond_runs_each_node_once_after_its_parents(
    deps: Dependencies, clock: ManualClock
) -> None:
    runner = DagRunner(deps, clock)
    # Given the card's daily_report DAG
    view = runner.submit(DAILY_REPORT)
    # Then the root is queued at once and every other node is blocked
    assert _statuses(view) == {
        "extract": Status.QUEUED,
        "transform": Status.BLOCKED,
        "load_warehouse": Status.BLOCKED,
        "load_cache": Status.BLOCKED,
        "notify": Status.BLOCKED,
    }
    assert view.status is DagStatus.RUNNING
    # When the consumers run whatever arrives
    runner.run_until_idle()
    # Then every node ran exactly once, each after all of its parents
    assert sorted(runner.ran) == sorted(DAILY_REPORT["nodes"])
    order = {name: i for i, name in enumerate(runner.ran)}
    for name, node in DAILY_REPORT["nodes"].items():
        for parent in node.get("depends_on", []):
            assert order[parent] < order[name], (parent, name)
    # And the DAG succeeded, with every node's times
    done = runner.get(view)
    assert done.status is DagStatus.SUCCEEDED
    assert set(_statuses(done).values()) == {Status.SUCCEEDED}
    assert done.finished_at_ms is not None
    for node in done.nodes:
        assert node.attempts == 1 and node.finished_at_ms is not None
        assert node.dag is not None
        assert (node.dag.released_at_ms is None) == (node.dag.node == "extract")
    # And each node's message named its parents by job id
    notify = runner.seen["notify"].dag
    assert notify is not None
    assert notify.id == view.id and notify.name == "daily_report"
    ids = {node.dag.node: node.id for node in done.nodes if node.dag}
    assert {name: p.id for name, p in notify.parents.items()} == {
        "load_warehouse": ids["load_warehouse"],
        "load_cache": ids["load_cache"],
    }
    assert not any(p.inlined for p in notify.parents.values())


def test_write_units_per_dag_node(deps: Dependencies, clock: ManualClock) -> None:
    """The closing note's number: DynamoDB writes for a DAG node, submit → release → success.
    Items here are under 1 KB, so each write request is one write unit."""
    runner = DagRunner(deps, clock)
    view = runner.submit(DAILY_REPORT)
    runner.run_until_idle()
    writes = runner.harness.meter.requests
    total = runner.harness.meter.job_writes()
    print(f"\ndaily_report: {dict(writes)} = {total} writes for 5 nodes ({total / 5:.1f} per node)")
    # 5 puts, and the DAG's two index entries (one per queue it uses: default, email; GET
    # /dags?queue=), small items, one write each; claim of the root + release of the 4 others
    # ("claim": they set a claim token); 5 attempts taken (running), 5 successes + notify's two
    # parent counts ("other"). One-parent nodes are counted and released in one write, so they
    # cost what an ordinary job costs: 4.
    assert writes == Counter({"put": 5 + 2, "claim": 5, "other": 12})
    assert total == 22 + 2
    # And every node stays under 1 KB (items only grow here), so each write is one unit
    sizes = [item_size(job_to_item(node)) for node in runner.get(view).nodes]
    print(f"node item sizes: {sizes} bytes")
    assert max(sizes) < 1024


def test_a_50_parent_fan_in_is_released_exactly_once_when_all_finish_at_once(
    deps: Dependencies, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    serialize_dynamodb(monkeypatch)
    runner = DagRunner(deps, clock, visibility_timeout_s=None)
    parents = [f"p{i:02d}" for i in range(50)]
    nodes: dict[str, Any] = {name: {"queue": "default"} for name in parents}
    nodes["join"] = {"queue": "email", "depends_on": parents}
    # Given 50 roots, all queued, and a child that depends on all of them
    view = runner.submit({"name": "fan-in", "nodes": nodes})
    url = runner.deps.settings.queue_urls["default"]
    messages: list[Any] = []
    while len(messages) < 50:
        messages += runner.harness.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600
        ).get("Messages", [])
    # When 50 consumers finish their parent at the same moment, on 50 threads
    start = threading.Barrier(50)
    failures: list[BaseException] = []

    def finish(message: dict[str, Any]) -> None:
        event = sqs_event([message], "arn:aws:sqs:us-east-1:123456789012:default")
        start.wait()
        try:
            result = runner.harness.consumer.lambda_handler(event, FakeLambdaContext())
            assert result["batchItemFailures"] == []
        except BaseException as error:  # reported below, with the thread's result
            failures.append(error)

    threads = [threading.Thread(target=finish, args=(m,)) for m in messages]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    # Then the child was counted 50 times and released once: one message, one release
    join = next(n for n in runner.get(view).nodes if n.dag and n.dag.node == "join")
    assert join.dag is not None
    assert join.status is Status.QUEUED
    assert join.dag.waiting_on == 0
    assert join.dag.done_parents == frozenset(range(50))
    assert join.dag.released_by in range(50)
    email = runner.deps.settings.queue_urls["email"]
    arrived = runner.harness.sqs.receive_message(
        QueueUrl=email, MaxNumberOfMessages=10, VisibilityTimeout=0
    ).get("Messages", [])
    assert [json.loads(m["Body"])["dag"]["node"] for m in arrived] == ["join"]
    # And it runs once, and the DAG succeeds
    runner.run_until_idle()
    assert runner.ran.count("join") == 1
    assert runner.get(view).status is DagStatus.SUCCEEDED
    total = runner.harness.meter.job_writes()
    # Write units: each root's 4 writes are on an item under 1 KB; the join's 54 (put, 50
    # counts, release, running, success) are on an item that grows with its parent list and
    # count set
    stored = runner.get(view).nodes
    root_kb = max(-(-item_size(job_to_item(n)) // 1024) for n in stored[:50])
    join_size = item_size(job_to_item(stored[50]))
    units = 50 * 4 * root_kb + 54 * -(-join_size // 1024) + 2  # + the two index entries
    print(
        f"\n50-parent fan-in: {total} writes for 51 nodes ({total / 51:.2f} per node);"
        f" join item {join_size} bytes, so at most {units} write units ({units / 51:.2f} per node)"
    )
    assert total == 50 * 4 + 54 + 2  # + the DAG's index entries: one per queue it uses
    assert units == total  # the join stays under 1 KB: one unit per write


def test_a_duplicate_success_delivery_counts_the_parent_once(
    deps: Dependencies, clock: ManualClock
) -> None:
    runner = DagRunner(deps, clock)
    view = runner.submit(PAIR)
    url = runner.deps.settings.queue_urls["default"]
    messages = runner.harness.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600
    )["Messages"]
    first = next(m for m in messages if json.loads(m["Body"])["dag"]["node"] == "a")
    event = sqs_event([first], "arn:aws:sqs:us-east-1:123456789012:default")
    # When SQS delivers a's message twice
    runner.harness.consumer.lambda_handler(event, FakeLambdaContext())
    runner.harness.consumer.lambda_handler(event, FakeLambdaContext())
    # Then c still waits for b: a was counted once
    c = runner.get(view).nodes[2]
    assert c.dag is not None
    assert (c.status, c.dag.waiting_on, c.dag.done_parents) == (Status.BLOCKED, 1, frozenset({0}))
    assert runner.ran == ["a"]


def test_cycles_and_bad_references_are_rejected_before_anything_is_written(
    deps: Dependencies,
) -> None:
    cases: list[tuple[dict[str, Any], str, str]] = [
        (
            {
                "a": {"queue": "default", "depends_on": ["c"]},
                "b": {"queue": "default", "depends_on": ["a"]},
                "c": {"queue": "default", "depends_on": ["b"]},
            },
            "nodes",
            "dependency cycle: a → b → c → a",
        ),
        (
            {
                "root": {"queue": "default"},
                "x": {"queue": "default", "depends_on": ["root", "y"]},
                "y": {"queue": "default", "depends_on": ["x"]},
            },
            "nodes",
            "dependency cycle: x → y → x",
        ),
        (
            {"a": {"queue": "default", "depends_on": ["a"]}},
            "nodes.a.depends_on",
            "node 'a' depends on itself",
        ),
        (
            {"a": {"queue": "default"}, "b": {"queue": "default", "depends_on": ["nope"]}},
            "nodes.b.depends_on",
            "unknown node 'nope' (nodes: a, b)",
        ),
        (
            {"a": {"queue": "default"}, "b": {"queue": "default", "depends_on": ["a", "a"]}},
            "nodes.b.depends_on",
            "'a' is listed twice",
        ),
        (
            {"a": {"queue": "default"}, "b": {"queue": "nope", "depends_on": ["a"]}},
            "nodes.b.queue",
            "unknown queue 'nope' (known: default, email)",
        ),
    ]
    for nodes, field, reason in cases:
        with pytest.raises(InvalidInput) as raised:
            deps.dags.submit(SubmitDag.model_validate({"name": "bad", "nodes": nodes}))
        assert (raised.value.field, raised.value.reason) == (field, reason)
    assert deps.dag_nodes.dag_nodes(DagKey.new(shard=0, due_ms=0, node_count=1, now_ms=0)) == []


def test_a_dead_node_cancels_its_descendants_and_independent_branches_go_on(
    deps: Dependencies, clock: ManualClock
) -> None:
    def broken(job: Envelope) -> None:
        raise NonRetryableError("warehouse is read-only")

    runner = DagRunner(deps, clock, {"load_warehouse": broken})
    body = {
        **DAILY_REPORT,
        "nodes": {
            **DAILY_REPORT["nodes"],
            "archive": {"queue": "default", "depends_on": ["notify"]},
            # An independent branch, and one hanging off the diamond above the failure
            "audit": {"queue": "email"},
            "audit_report": {"queue": "email", "depends_on": ["audit"]},
            "cache_stats": {"queue": "email", "depends_on": ["load_cache"]},
        },
    }
    view = runner.submit(body)
    # When load_warehouse dies
    runner.run_until_idle()
    # Then what is downstream of it is cancelled, and everything else ran
    done = runner.get(view)
    assert _statuses(done) == {
        "extract": Status.SUCCEEDED,
        "transform": Status.SUCCEEDED,
        "load_warehouse": Status.DEAD,
        "load_cache": Status.SUCCEEDED,
        "notify": Status.CANCELLED,
        "archive": Status.CANCELLED,
        "audit": Status.SUCCEEDED,
        "audit_report": Status.SUCCEEDED,
        "cache_stats": Status.SUCCEEDED,
    }
    assert "notify" not in runner.ran and "archive" not in runner.ran
    assert done.status is DagStatus.FAILED
    # And the dead node went to its queue's DLQ like any dead job
    assert [m["id"] for m in runner.harness.dead_letters()] == [done.nodes[2].id]


def test_on_failure_continue_runs_the_children_and_tells_them_which_parent_failed(
    deps: Dependencies, clock: ManualClock
) -> None:
    def broken(job: Envelope) -> None:
        raise NonRetryableError("cache cluster down")

    runner = DagRunner(deps, clock, {"load_cache": broken})
    view = runner.submit({**DAILY_REPORT, "on_failure": "continue"})
    runner.run_until_idle()
    done = runner.get(view)
    assert _statuses(done)["load_cache"] is Status.DEAD
    assert _statuses(done)["notify"] is Status.SUCCEEDED
    notify = runner.seen["notify"].dag
    assert notify is not None
    assert {name: p.succeeded for name, p in notify.parents.items()} == {
        "load_warehouse": True,
        "load_cache": False,
    }
    assert done.status is DagStatus.FAILED  # all finished, one dead


def test_inline_parent_results_fill_a_16_kib_budget_then_go_by_reference(
    deps: Dependencies, clock: ManualClock
) -> None:
    big = "x" * 9_000  # two of these do not fit in 16 KiB together
    runner = DagRunner(
        deps,
        clock,
        {
            "small": lambda job: {"rows": 3},
            "big1": lambda job: big,
            "big2": lambda job: big,
            "single": lambda job: None,
        },
    )
    view = runner.submit(
        {
            "name": "results",
            "parent_results": "inline",
            "nodes": {
                "small": {"queue": "default"},
                "big1": {"queue": "default"},
                "big2": {"queue": "default"},
                "merge": {"queue": "email", "depends_on": ["small", "big1", "big2"]},
                "single": {"queue": "default"},
                "after_single": {"queue": "email", "depends_on": ["single"]},
            },
        }
    )
    runner.run_until_idle()
    assert runner.get(view).status is DagStatus.SUCCEEDED
    merge = runner.seen["merge"].dag
    assert merge is not None
    parents = merge.parents
    # Then results are inlined in node order while they fit; the rest by job id only
    assert (parents["small"].inlined, parents["small"].result) == (True, {"rows": 3})
    assert (parents["big1"].inlined, parents["big1"].result) == (True, big)
    assert (parents["big2"].inlined, parents["big2"].result) == (False, None)
    assert parents["big2"].id == view.nodes[2].id
    # And a parent that returned nothing is inlined as null (single parent: one-write release)
    after = runner.seen["after_single"].dag
    assert after is not None
    assert (after.parents["single"].inlined, after.parents["single"].result) == (True, None)


def test_a_runner_that_dies_before_sending_the_released_child_is_repaired_by_redelivery(
    deps: Dependencies, clock: ManualClock
) -> None:
    runner = DagRunner(deps, clock)
    view = runner.submit(CHAIN)
    sqs = runner.harness.sqs

    def die(**_: Any) -> None:
        raise SystemExit("Lambda killed")

    # Given a's consumer dies after recording success and releasing b, before sending it
    sqs.meta.events.register("before-call.sqs.SendMessageBatch", die)
    with pytest.raises(SystemExit):
        runner.harness.poll("default")
    sqs.meta.events.unregister("before-call.sqs.SendMessageBatch", die)
    a, b = runner.get(view).nodes
    assert (a.status, b.status) == (Status.SUCCEEDED, Status.QUEUED)
    assert runner.harness.poll("email") == [] and runner.ran == ["a"]  # b was never sent
    # When a's message comes back after its visibility timeout
    clock.advance(seconds=121)
    runner.run_until_idle()
    # Then the fence sees a succeeded, sends b again, and b runs; a did not run twice
    assert runner.ran == ["a", "b"]
    assert runner.get(view).status is DagStatus.SUCCEEDED


def test_a_runner_that_dies_between_the_last_count_and_the_release_is_repaired(
    deps: Dependencies, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = DagRunner(deps, clock)
    view = runner.submit(PAIR)
    nodes = runner.harness.dag_nodes
    real_release = nodes.release_node

    def die(*args: Any, **kwargs: Any) -> Any:
        raise SystemExit("Lambda killed")

    # Given the consumer that counts c's last parent dies before releasing c
    monkeypatch.setattr(nodes, "release_node", die)
    with pytest.raises(SystemExit):
        runner.harness.poll("default")
    monkeypatch.setattr(nodes, "release_node", real_release)
    c = runner.get(view).nodes[2]
    assert c.dag is not None
    assert (c.status, c.dag.waiting_on) == (Status.BLOCKED, 0)
    # When that parent's message is delivered again
    clock.advance(seconds=121)
    runner.run_until_idle()
    # Then c is released and runs, once
    assert sorted(runner.ran) == ["a", "b", "c"]
    assert runner.get(view).status is DagStatus.SUCCEEDED


def test_delete_cancels_every_unfinished_node_and_a_running_one_releases_nothing(
    deps: Dependencies, clock: ManualClock
) -> None:
    cancel_now: list[str] = []

    def cancel_while_running(job: Envelope) -> str:
        runner.deps.dags.cancel(cancel_now[0])  # DELETE /dags/{id} while transform runs
        return "done"

    # A consumer that records `running`, so a node being run is not cancellable
    runner = DagRunner(deps, clock, {"transform": cancel_while_running})
    view = runner.submit(DAILY_REPORT)
    cancel_now.append(view.id)
    runner.run_until_idle()
    done = runner.get(view)
    # Then transform finished, and nothing after it ran
    assert runner.ran == ["extract", "transform"]
    assert _statuses(done) == {
        "extract": Status.SUCCEEDED,
        "transform": Status.SUCCEEDED,
        "load_warehouse": Status.CANCELLED,
        "load_cache": Status.CANCELLED,
        "notify": Status.CANCELLED,
    }
    assert done.status is DagStatus.CANCELLED
    # And a repeat is harmless
    assert runner.deps.dags.cancel(view.id).status is DagStatus.CANCELLED


def test_delete_before_anything_ran_cancels_the_queued_root_too(
    deps: Dependencies, clock: ManualClock
) -> None:
    runner = DagRunner(deps, clock)
    view = runner.submit(DAILY_REPORT)
    cancelled = runner.deps.dags.cancel(view.id)
    assert set(_statuses(cancelled).values()) == {Status.CANCELLED}
    runner.run_until_idle()
    assert runner.ran == []  # the root's message reached the consumer, whose fence skipped it


def test_cancelling_one_node_applies_the_failure_rule_to_its_descendants(
    deps: Dependencies, clock: ManualClock
) -> None:
    runner = DagRunner(deps, clock)
    view = runner.submit(DAILY_REPORT)
    ids = {node.dag.node: node.id for node in view.nodes if node.dag}
    # When one blocked node is cancelled with DELETE /jobs/{id}
    assert runner.deps.jobs.cancel(ids["load_cache"]) is Status.CANCELLED
    runner.run_until_idle()
    # Then its descendants are cancelled too, and the rest runs
    assert _statuses(runner.get(view)) == {
        "extract": Status.SUCCEEDED,
        "transform": Status.SUCCEEDED,
        "load_warehouse": Status.SUCCEEDED,
        "load_cache": Status.CANCELLED,
        "notify": Status.CANCELLED,
    }
    assert runner.get(view).status is DagStatus.CANCELLED


def test_a_nodes_cascade_reaches_the_queues_of_every_node_downstream_of_it(
    deps: Dependencies,
) -> None:
    # Given the daily report: extract, transform, load_warehouse on `default`; load_cache and
    # notify (a child of both loads) on `email`
    view = deps.dags.submit(SubmitDag.model_validate(DAILY_REPORT))
    nodes = {node.dag.node: node for node in view.nodes if node.dag}
    cascade = deps.dag_progress.cascade_queues
    # Then a cancel of the root or of load_warehouse may cancel nodes on `email` (notify)
    assert cascade(nodes["extract"]) == {"default", "email"}
    assert cascade(nodes["load_warehouse"]) == {"email"}
    # And a leaf's cancel, or any cancel under on_failure=continue, cancels nothing else
    assert cascade(nodes["notify"]) == frozenset()
    continuing = deps.dags.submit(
        SubmitDag.model_validate({**DAILY_REPORT, "on_failure": "continue"})
    )
    assert all(cascade(node) == frozenset() for node in continuing.nodes)


def test_a_dag_due_later_waits_in_the_table_for_the_sweeper(
    deps: Dependencies, clock: ManualClock
) -> None:
    runner = DagRunner(deps, clock)
    # Given a DAG whose roots are due in an hour
    view = runner.submit({**DAILY_REPORT, "delay_seconds": 3600})
    assert _statuses(view)["extract"] is Status.PENDING
    assert view.key.due_ms == clock.now_ms() + 3_600_000
    runner.run_until_idle()
    assert runner.ran == []
    # When the sweeps come round to it
    for _ in range(60):
        runner.harness.sweeper.sweep(ALL_SHARDS)
        clock.advance(seconds=60)
    runner.run_until_idle()
    # Then the root ran at its time and the rest followed
    assert runner.ran[0] == "extract" and len(runner.ran) == 5
    assert runner.get(view).status is DagStatus.SUCCEEDED


def test_a_node_retries_like_any_job_and_its_retries_carry_the_dag(
    deps: Dependencies, clock: ManualClock
) -> None:
    failures = [RuntimeError("flaky")]

    def flaky(job: Envelope) -> str:
        if failures:
            raise failures.pop()
        return "ok"

    runner = DagRunner(deps, clock, {"transform": flaky})
    view = runner.submit(DAILY_REPORT)
    runner.run_until_idle()
    transform = next(n for n in runner.get(view).nodes if n.dag and n.dag.node == "transform")
    assert (transform.status, transform.attempts) == (Status.SUCCEEDED, 2)
    assert runner.seen["transform"].attempt == 2
    assert runner.seen["transform"].dag is not None
    assert runner.get(view).status is DagStatus.SUCCEEDED


def test_get_unknown_is_not_found_and_malformed_is_invalid(deps: Dependencies) -> None:
    unknown = DagKey.new(shard=1, due_ms=1_800_000_000_000, node_count=3, now_ms=0).dag_id
    with pytest.raises(DagNotFound):
        deps.dags.get(unknown)
    with pytest.raises(InvalidInput) as raised:
        deps.dags.get("garbage")
    assert raised.value.field == "dag_id"
    job_id = deps.dags.submit(SubmitDag.model_validate(DAILY_REPORT)).nodes[0].id
    with pytest.raises(InvalidInput):
        deps.dags.get(job_id)  # a node's job id is not a DAG id


def test_a_node_redriven_to_the_dlq_is_dead_and_its_descendants_are_cancelled(
    deps: Dependencies, clock: ManualClock
) -> None:
    runner = DagRunner(deps, clock)
    view = runner.submit(
        {
            "name": "crashy",
            "nodes": {
                "a": {"queue": "default"},
                "b": {"queue": "email", "depends_on": ["a"]},
                "c": {"queue": "email"},
            },
        }
    )
    sqs = runner.harness.sqs
    url = runner.deps.settings.queue_urls["default"]
    # Given a's consumer crashes on every delivery, never ending the attempt
    for _ in range(5):  # the queue's maxReceiveCount in tests/support.py
        assert sqs.receive_message(QueueUrl=url, VisibilityTimeout=30).get("Messages")
        clock.advance(seconds=31)
    assert sqs.receive_message(QueueUrl=url).get("Messages") is None
    # When SQS has redriven it and the dead-letter indexer drains the DLQ (twice over)
    dlq = runner.deps.settings.dead_letter_urls["default"]
    messages = sqs.receive_message(QueueUrl=dlq, AttributeNames=["All"])["Messages"]
    event = sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:default-dlq")
    indexer = load_handler("dead_letters")
    for _ in range(2):
        assert indexer.handler(event, FakeLambdaContext())["batchItemFailures"] == []
    runner.run_until_idle()
    # Then a is dead, b (downstream) cancelled, and c ran
    assert _statuses(runner.get(view)) == {
        "a": Status.DEAD,
        "b": Status.CANCELLED,
        "c": Status.SUCCEEDED,
    }
    assert runner.ran == ["c"]


def test_pause_holds_every_unreleased_node_and_resume_releases_what_became_ready(
    deps: Dependencies, clock: ManualClock
) -> None:
    runner = DagRunner(deps, clock)
    view = runner.submit(DAILY_REPORT)
    # Given the DAG is paused while its root is already queued
    paused = runner.deps.dags.pause(view.id)
    assert paused.status is DagStatus.PAUSED
    assert runner.deps.dags.pause(view.id).status is DagStatus.PAUSED  # again: harmless
    # When the consumers run what is in SQS
    runner.run_until_idle()
    # Then the released root ran and was counted, but its child was not released
    assert runner.ran == ["extract"]
    transform = runner.get(view).nodes[1]
    assert transform.dag is not None
    assert (transform.status, transform.dag.waiting_on) == (Status.BLOCKED, 0)
    assert runner.get(view).status is DagStatus.PAUSED
    # When it resumes, and is paused again while two nodes are queued
    assert runner.deps.dags.resume(view.id).status is DagStatus.RUNNING
    runner.deliver_one("default")  # transform runs, releasing both loads
    runner.deps.dags.pause(view.id)
    runner.run_until_idle()
    # Then the two loads ran (released before the pause), and notify waits, counted to 0
    assert runner.ran == ["extract", "transform", "load_warehouse", "load_cache"]
    notify = runner.get(view).nodes[4]
    assert notify.dag is not None
    assert (notify.status, notify.dag.waiting_on, notify.dag.held) == (Status.BLOCKED, 0, True)
    # And a resume releases it: the DAG finishes with each node run once
    runner.deps.dags.resume(view.id)
    runner.deps.dags.resume(view.id)  # again: harmless
    runner.run_until_idle()
    assert runner.ran == ["extract", "transform", "load_warehouse", "load_cache", "notify"]
    assert runner.get(view).status is DagStatus.SUCCEEDED
    # And a finished DAG cannot be paused
    with pytest.raises(Conflict):
        runner.deps.dags.pause(view.id)


def test_a_paused_dag_due_later_does_not_start_until_resumed(
    deps: Dependencies, clock: ManualClock
) -> None:
    runner = DagRunner(deps, clock)
    # Given a DAG due in an hour, paused
    view = runner.submit({**DAILY_REPORT, "delay_seconds": 3600})
    runner.deps.dags.pause(view.id)
    # When the sweeps run past its due time
    for _ in range(70):
        runner.harness.sweeper.sweep(ALL_SHARDS)
        clock.advance(seconds=60)
    runner.run_until_idle()
    # Then its root was not dispatched
    assert runner.ran == []
    assert _statuses(runner.get(view))["extract"] is Status.PENDING
    # When it resumes, the overdue root is sent at once and the DAG runs
    resumed = runner.deps.dags.resume(view.id)
    assert _statuses(resumed)["extract"] is Status.QUEUED
    runner.run_until_idle()
    assert runner.get(view).status is DagStatus.SUCCEEDED
    assert runner.ran[0] == "extract"


def test_a_paused_root_due_later_than_the_direct_window_is_left_to_the_sweeper(
    deps: Dependencies, clock: ManualClock
) -> None:
    runner = DagRunner(deps, clock)
    view = runner.submit({**DAILY_REPORT, "delay_seconds": 7200})
    runner.deps.dags.pause(view.id)
    # When it resumes long before its time
    resumed = runner.deps.dags.resume(view.id)
    root = resumed.nodes[0]
    assert (root.status, root.direct) == (Status.PENDING, False)
    # Then the sweeper dispatches it at its time, as any job
    for _ in range(120):
        runner.harness.sweeper.sweep(ALL_SHARDS)
        clock.advance(seconds=60)
    runner.run_until_idle()
    assert runner.get(view).status is DagStatus.SUCCEEDED


def test_a_repeated_success_report_finishes_a_release_cut_short(
    deps: Dependencies, clock: ManualClock
) -> None:
    runner = DagRunner(deps, clock)
    view = runner.submit(CHAIN)
    attempts = runner.harness.consumer.attempts
    sqs = runner.harness.sqs

    def throttle(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "RequestThrottled"}}, "SendMessageBatch")

    # Given a's success is recorded (as a worker's ack does) while SQS refuses b's message
    a = runner.get(view).nodes[0]
    held = attempts.start(a, 1, lease_until_ms=clock.now_ms() + 60_000)
    assert held is not None
    sqs.meta.events.register("before-call.sqs.SendMessageBatch", throttle)
    with pytest.raises(Unavailable):
        attempts.succeed(a, held, result="ok")
    sqs.meta.events.unregister("before-call.sqs.SendMessageBatch", throttle)
    assert [n.status for n in runner.get(view).nodes] == [Status.SUCCEEDED, Status.QUEUED]
    # When the success is reported again (the worker retries its ack)
    assert not attempts.succeed(a, held, result="ok")
    # Then b is sent after all, and runs
    runner.run_until_idle()
    assert runner.ran == ["b"]
    assert runner.get(view).status is DagStatus.SUCCEEDED
