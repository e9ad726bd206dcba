"""A whole-queue pause holds DAG nodes as it holds any job of the queue (store.queue_states):
roots released at DAG submit, children released when their parents finish, and what a DAG
resume releases are sent exactly once, after the queue resumes. Against moto, with the injected
clock.

A child released by an API function or a worker's ack (`lifecycle="worker"`) stays `pending`,
recorded for the queue's catch-up (`held`). One released by a consumer Lambda, whose role may
not write a queue's state, is released `queued` and `direct` and sent by a timer
(services.deferral): at the resume, or DEFERRED_SEND after its release, whichever is later."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import pytest

from sundial.clock import ManualClock
from sundial.model.dag import DagStatus, DagView
from sundial.model.job import Job, Status
from sundial.services.deferral import DeferredSends
from sundial.store.job_items import item_to_job
from sundial.store.queue_states import QueueStateStore
from sundial.timing import DEFERRED_SEND_MS
from sundial.wiring import Dependencies
from tests.harness import ALL_SHARDS
from tests.support import DAILY_REPORT
from tests.unit.services.test_dags import CHAIN, PAIR, DagRunner


def _nodes(runner: DagRunner, view: DagView) -> dict[str, Job]:
    return {node.dag.node: node for node in runner.get(view).nodes if node.dag}


def _statuses(runner: DagRunner, view: DagView) -> dict[str, Status]:
    return {name: node.status for name, node in _nodes(runner, view).items()}


def _assert_waiting(runner: DagRunner, node: Job, lifecycle: str) -> None:
    """`node` waits for its paused queue: pending and recorded for the queue's catch-up (as a
    worker releases it), or queued and `direct` (no sweep sends it) behind a timer for its
    first attempt (as a consumer releases it), the queue's state untouched."""
    held = runner.deps.queue_states.get(node.queue).held
    if lifecycle == "worker":
        assert (node.status, node.direct, held) == (Status.PENDING, False, frozenset({node.id}))
        return
    assert (node.status, node.direct, held) == (Status.QUEUED, True, frozenset())
    [timer] = _timers_of(runner, node)
    assert (timer.status, timer.retry_attempt, timer.queue) == (Status.PENDING, 1, node.queue)
    assert node.dag is not None and node.dag.released_at_ms is not None
    assert timer.due_ms == node.dag.released_at_ms + DEFERRED_SEND_MS


def _timers_of(runner: DagRunner, node: Job) -> list[Job]:
    """The retry timers standing for `node`'s attempts (the test's own scan)."""
    items = runner.deps.dynamodb.scan(TableName=runner.deps.settings.table_name)["Items"]
    return [
        timer
        for timer in (item_to_job(item) for item in items if "retry_of" in item)
        if timer.retry_of == (node.origin or node.key)
    ]


def _sweep_and_run(runner: DagRunner, minutes: int) -> None:
    """`minutes` of sweeps, each followed by the consumers taking whatever is visible."""
    for _ in range(minutes):
        runner.clock.advance(seconds=60)
        runner.harness.sweeper.sweep(ALL_SHARDS)
        runner.run_until_idle()


@pytest.mark.parametrize("lifecycle", ["consumer", "worker"])
def test_a_diamond_on_paused_queues_waits_then_each_node_is_sent_once(
    deps: Dependencies, clock: ManualClock, lifecycle: str
) -> None:
    runner = DagRunner(deps, clock, lifecycle=lifecycle)
    sent = runner.harness.sent
    # Given both of the diamond's queues are paused
    runner.deps.queue_control.pause("default")
    runner.deps.queue_control.pause("email")
    # When the diamond is submitted, due now
    view = runner.submit(DAILY_REPORT)
    # Then its root is left pending (not sent), like any job submitted to a paused queue
    assert _statuses(runner, view)["extract"] is Status.PENDING
    # And after an hour of sweeps nothing reached SQS and nothing ran
    _sweep_and_run(runner, minutes=60)
    assert sent.ids == Counter()
    assert runner.ran == []
    assert runner.get(view).status is DagStatus.RUNNING
    # When `default` resumes: its catch-up sends the root, and the nodes on `default` run
    runner.deps.queue_control.resume("default")
    runner.run_until_idle()
    assert runner.ran == ["extract", "transform", "load_warehouse"]
    # Then load_cache, released by transform while `email` is paused, waits in the table:
    # recorded for email's catch-up, or (released by a consumer) queued behind a timer;
    # notify still waits for it
    nodes = _nodes(runner, view)
    load_cache = nodes["load_cache"]
    assert load_cache.dag is not None and load_cache.dag.released_by == 1
    _assert_waiting(runner, load_cache, lifecycle)
    assert nodes["notify"].status is Status.BLOCKED
    _sweep_and_run(runner, minutes=30)
    assert load_cache.id not in sent.ids
    # When `email` resumes, the DAG completes
    runner.deps.queue_control.resume("email")
    assert not runner.deps.queue_states.get("email").catching_up
    _sweep_and_run(runner, minutes=30)
    assert runner.get(view).status is DagStatus.SUCCEEDED
    # And each node was sent exactly once, and ran once, each after its parents
    assert sent.ids == Counter({node.id: 1 for node in runner.get(view).nodes})
    assert runner.ran == ["extract", "transform", "load_warehouse", "load_cache", "notify"]


@pytest.mark.parametrize("lifecycle", ["consumer", "worker"])
def test_a_child_released_while_its_queue_is_paused_is_sent_once_on_resume(
    deps: Dependencies, clock: ManualClock, lifecycle: str
) -> None:
    runner = DagRunner(deps, clock, lifecycle=lifecycle)
    sent = runner.harness.sent
    # Given a chain a (on default) -> b (on email), with email paused
    runner.deps.queue_control.pause("email")
    view = runner.submit(CHAIN)
    # When a runs and succeeds
    runner.run_until_idle()
    assert runner.ran == ["a"]
    # Then b is released (its parent counted) but left unsent, for email's catch-up
    b = _nodes(runner, view)["b"]
    assert b.dag is not None
    assert (b.dag.waiting_on, b.dag.done_parents) == (0, frozenset({0}))
    _assert_waiting(runner, b, lifecycle)
    _sweep_and_run(runner, minutes=20)
    assert b.id not in sent.ids
    # When email resumes, b is sent by the resume itself, once, and runs
    resumed = runner.deps.queue_control.resume("email")
    assert resumed.dispatched == 1
    assert sent.ids[b.id] == 1
    _sweep_and_run(runner, minutes=20)
    assert runner.ran == ["a", "b"]
    assert runner.get(view).status is DagStatus.SUCCEEDED
    assert sent.ids == Counter({node.id: 1 for node in runner.get(view).nodes})


@pytest.mark.parametrize("lifecycle", ["consumer", "worker"])
def test_a_join_whose_last_parent_finishes_during_the_pause_gets_its_inline_results(
    deps: Dependencies, clock: ManualClock, lifecycle: str
) -> None:
    runner = DagRunner(deps, clock, lifecycle=lifecycle)
    sent = runner.harness.sent
    # Given c (on email) waits for a and b (on default), with their results inline
    view = runner.submit({**PAIR, "parent_results": "inline"})
    runner.deliver_one("default")  # one parent finishes while email runs
    runner.deps.queue_control.pause("email")
    runner.deliver_one("default")  # the other finishes once email is paused
    # Then c is counted to 0 but held for email's catch-up
    c = _nodes(runner, view)["c"]
    assert c.dag is not None and c.dag.waiting_on == 0
    _assert_waiting(runner, c, lifecycle)
    # And on resume it is sent once (a consumer's timer a quarter of an hour after c's
    # release), with both parents' results
    runner.deps.queue_control.resume("email")
    _sweep_and_run(runner, minutes=20)
    assert runner.ran.count("c") == 1 and sent.ids[c.id] == 1
    parents = runner.seen["c"].dag
    assert parents is not None
    assert {name: p.result for name, p in parents.parents.items()} == {
        "a": {"node": "a"},
        "b": {"node": "b"},
    }
    assert runner.get(view).status is DagStatus.SUCCEEDED


@pytest.mark.parametrize("below_the_catch_up", [False, True])
def test_a_queue_resumed_while_a_parent_releases_its_child_sends_the_child_once(
    deps: Dependencies,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    below_the_catch_up: bool,
) -> None:
    """(As a worker's ack releases: it records the child for the catch-up.)"""
    runner = DagRunner(deps, clock, lifecycle="worker")
    sent = runner.harness.sent
    view = runner.submit(CHAIN)
    if below_the_catch_up:
        # The sweeps pass b's due time before email is paused, so the resume's catch-up range
        # (from the lowest sweep cursor at pause time) starts above b: only the record of b
        # (`held`) or a's runner can send it
        runner.harness.sweeper.sweep(ALL_SHARDS)
        # (a sweep moves on only the cursors of shards with jobs; these have none yet)
        frontier = max(runner.deps.sweeps.read_cursors(ALL_SHARDS).values())
        for shard in ALL_SHARDS:
            runner.deps.sweeps.advance_cursor(shard, frontier)
        clock.advance(seconds=120)
    state = runner.deps.queue_control.pause("email")
    assert state.pause_from is not None
    assert (state.pause_from > _nodes(runner, view)["b"].key.sk) is below_the_catch_up
    # Given email resumes (and runs its catch-up, nothing held yet) just after a's success
    # has released b as pending, and before b is recorded for the catch-up
    hold = QueueStateStore.hold
    resumed: list[int] = []

    def resume_first(states: QueueStateStore, queue: str, job_id: str) -> bool:
        if not resumed:
            resumed.append(runner.deps.queue_control.resume(queue).dispatched)
        return hold(states, queue, job_id)

    monkeypatch.setattr(QueueStateStore, "hold", resume_first)
    runner.deliver_one("default")
    b = _nodes(runner, view)["b"]
    if below_the_catch_up:
        # Then the catch-up did not see b, the record was refused (the queue runs again), and
        # a's runner sent b itself
        assert resumed == [0]
    else:
        # Then the catch-up's range read sent b, and a's runner, refused the record, found b
        # taken and sent nothing
        assert resumed == [1]
    assert b.status is Status.QUEUED and sent.ids[b.id] == 1
    assert not runner.deps.queue_states.get("email").catching_up
    # And b runs once, and nothing is sent again
    _sweep_and_run(runner, minutes=20)
    assert runner.ran == ["a", "b"]
    assert sent.ids == Counter({node.id: 1 for node in runner.get(view).nodes})
    assert runner.get(view).status is DagStatus.SUCCEEDED


def test_a_runner_that_dies_before_recording_a_held_child_is_repaired_by_redelivery(
    deps: Dependencies, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(As a worker's ack releases: it records the child for the catch-up.)"""
    runner = DagRunner(deps, clock, lifecycle="worker")
    sent = runner.harness.sent
    runner.deps.queue_control.pause("email")
    view = runner.submit(CHAIN)
    # Given a's runner dies after releasing b as pending, before recording it for the catch-up
    hold = QueueStateStore.hold
    crashes = iter([True])

    def crash_once(states: QueueStateStore, queue: str, job_id: str) -> bool:
        if next(crashes, False):
            raise RuntimeError("the runner died here")
        return hold(states, queue, job_id)

    monkeypatch.setattr(QueueStateStore, "hold", crash_once)
    assert runner.harness.poll("default")  # the delivery failed: SQS will deliver it again
    b = _nodes(runner, view)["b"]
    assert b.status is Status.PENDING and not runner.deps.queue_states.get("email").held
    # When a's message comes back (its visibility timeout has passed), the fence finishes the
    # job: b is recorded for the catch-up, and not sent
    clock.advance(seconds=121)
    assert runner.harness.poll("default") == []
    assert runner.ran == ["a"]
    assert runner.deps.queue_states.get("email").held == {b.id}
    assert b.id not in sent.ids
    # And the queue's resume sends it, once
    runner.deps.queue_control.resume("email")
    _sweep_and_run(runner, minutes=20)
    assert runner.ran == ["a", "b"]
    assert sent.ids == Counter({node.id: 1 for node in runner.get(view).nodes})


def test_a_queue_resumed_between_a_consumers_release_and_its_timer_sends_the_child_once(
    deps: Dependencies, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consumer Lambda releases b (queued, direct) while email is paused; email's resume and
    its catch-up run before the consumer puts b's timer: the catch-up finds nothing, and the
    timer, put above every cursor, is sent by the sweeper at its time."""
    runner = DagRunner(deps, clock)
    sent = runner.harness.sent
    runner.deps.queue_control.pause("email")
    view = runner.submit(CHAIN)
    defer = DeferredSends.defer
    resumed: list[int] = []

    def resume_first(deferral: DeferredSends, nodes: Sequence[Job]) -> None:
        if not resumed:
            resumed.append(runner.deps.queue_control.resume("email").dispatched)
        defer(deferral, nodes)

    monkeypatch.setattr(DeferredSends, "defer", resume_first)
    runner.deliver_one("default")
    # Then the resume sent nothing, and b waits behind its timer, unsent
    b = _nodes(runner, view)["b"]
    assert resumed == [0]
    assert (b.status, b.direct) == (Status.QUEUED, True)
    [timer] = _timers_of(runner, b)
    assert not runner.deps.queue_states.get("email").catching_up
    # And the sweeps send b once, and it runs once, not before its timer's time
    _sweep_and_run(runner, minutes=20)
    assert runner.ran == ["a", "b"]
    b = _nodes(runner, view)["b"]
    assert b.started_at_ms is not None and b.started_at_ms >= timer.due_ms
    assert sent.ids == Counter({node.id: 1 for node in runner.get(view).nodes})
    assert runner.get(view).status is DagStatus.SUCCEEDED


def test_a_consumer_that_dies_before_putting_a_childs_timer_is_repaired_by_redelivery(
    deps: Dependencies, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = DagRunner(deps, clock)
    sent = runner.harness.sent
    runner.deps.queue_control.pause("email")
    view = runner.submit(CHAIN)
    # Given a's consumer dies after releasing b, before putting its timer
    defer = DeferredSends.defer
    crashes = iter([True])

    def crash_once(deferral: DeferredSends, nodes: Sequence[Job]) -> None:
        if next(crashes, False):
            raise RuntimeError("the consumer died here")
        defer(deferral, nodes)

    monkeypatch.setattr(DeferredSends, "defer", crash_once)
    assert runner.harness.poll("default")  # the delivery failed: SQS will deliver it again
    b = _nodes(runner, view)["b"]
    assert (b.status, b.direct) == (Status.QUEUED, True) and _timers_of(runner, b) == []
    # When a's message comes back, the fence finishes the job: b gets its timer, unsent
    clock.advance(seconds=121)
    assert runner.harness.poll("default") == []
    assert runner.ran == ["a"]
    assert len(_timers_of(runner, b)) == 1 and b.id not in sent.ids
    # And after the queue's resume b is sent once and runs
    runner.deps.queue_control.resume("email")
    _sweep_and_run(runner, minutes=20)
    assert runner.ran == ["a", "b"]
    assert sent.ids == Counter({node.id: 1 for node in runner.get(view).nodes})


def test_a_dag_resumed_while_its_queue_is_paused_releases_nothing_until_the_queue_resumes(
    deps: Dependencies, clock: ManualClock
) -> None:
    runner = DagRunner(deps, clock)
    sent = runner.harness.sent
    # Given a DAG due in an hour, paused, whose nodes' queue is paused too
    view = runner.submit({**DAILY_REPORT, "delay_seconds": 3600})
    runner.deps.dags.pause(view.id)
    runner.deps.queue_control.pause("default")
    _sweep_and_run(runner, minutes=90)
    # When the DAG resumes (its root overdue) while the queue is still paused
    resumed = runner.deps.dags.resume(view.id)
    # Then the root stays pending, recorded for the queue's catch-up, and nothing is sent
    root = resumed.nodes[0]
    assert (root.status, root.direct) == (Status.PENDING, False)
    assert runner.deps.queue_states.get("default").held == {root.id}
    _sweep_and_run(runner, minutes=20)
    assert sent.ids == Counter() and runner.ran == []
    # When the queue resumes, the DAG runs, each node sent once
    runner.deps.queue_control.resume("default")
    _sweep_and_run(runner, minutes=20)
    assert runner.get(view).status is DagStatus.SUCCEEDED
    assert sent.ids == Counter({node.id: 1 for node in runner.get(view).nodes})


def test_a_queue_resumed_while_a_dag_is_paused_leaves_the_dags_root_to_the_dag(
    deps: Dependencies, clock: ManualClock
) -> None:
    runner = DagRunner(deps, clock)
    sent = runner.harness.sent
    # Given a queue paused, a DAG submitted to it (its root due now, left pending in the
    # catch-up's range), and the DAG paused too
    runner.deps.queue_control.pause("default")
    view = runner.submit(DAILY_REPORT)
    runner.deps.dags.pause(view.id)
    # When the queue resumes: its catch-up reads the DAG's pending root
    runner.deps.queue_control.resume("default")
    _sweep_and_run(runner, minutes=20)
    # Then the paused DAG's root is neither sent nor taken
    root = runner.get(view).nodes[0]
    assert (root.status, root.direct) == (Status.PENDING, False)
    assert sent.ids == Counter() and runner.ran == []
    # And the DAG's resume sends it, once, and the DAG completes
    runner.deps.dags.resume(view.id)
    _sweep_and_run(runner, minutes=20)
    assert runner.get(view).status is DagStatus.SUCCEEDED
    assert sent.ids == Counter({node.id: 1 for node in runner.get(view).nodes})


@pytest.mark.parametrize("lifecycle", ["consumer", "worker"])
def test_write_units_of_a_node_held_by_its_queue_pause(
    deps: Dependencies, clock: ManualClock, lifecycle: str
) -> None:
    """What a queue pause adds to a DAG node released during it. Items here are under 1 KB,
    so each write request is one write unit."""
    runner = DagRunner(deps, clock, lifecycle=lifecycle)
    meter = runner.harness.meter

    def writes_of(run: Callable[[], None]) -> Counter[str]:
        before = Counter(meter.requests)
        run()
        return Counter(meter.requests) - before

    def chain(*, paused: bool) -> None:
        if paused:
            runner.deps.queue_control.pause("email")
        runner.submit(CHAIN)
        runner.run_until_idle()
        if paused:
            runner.deps.queue_control.resume("email")
            clock.advance(seconds=DEFERRED_SEND_MS // 1000)  # (a consumer's timer is due)
            runner.run_until_idle()

    def pause_and_resume() -> None:
        runner.deps.queue_control.pause("email")
        runner.deps.queue_control.resume("email")

    # Given the chain a -> b costs 4 writes a node while b's queue runs (and a write for each
    # of its two queues' index entries, GET /dags?queue=)
    running = writes_of(lambda: chain(paused=False))
    assert running == Counter({"put": 2 + 2, "claim": 2, "other": 4})
    # When it runs with email paused while a finishes (and then resumed)
    held = writes_of(lambda: chain(paused=True))
    # And apart from what pausing and resuming a queue costs whatever it holds
    per_pause = writes_of(pause_and_resume)
    extra = held - running - per_pause
    print(
        f"\nchain a -> b while b's queue runs: {dict(running)};"
        f" with b held by its queue's pause: {dict(held)};"
        f" the pause and resume alone: {dict(per_pause)};"
        f" so b held costs {sum(extra.values())} writes more: {dict(extra)}"
    )
    if lifecycle == "worker":
        # Then b cost 5 writes more than on a running queue: on b's item, its one-write
        # release refused (its queue is paused; "claim": it carries a claim token) and done
        # again as pending, and the catch-up's take; on the queue's item, the record of b and
        # its strike
        assert extra == Counter({"claim": 1, "other": 2, "queue": 2})
    else:
        # Then b cost 3 writes more: its release is the same one write (queued and direct),
        # and its timer is put, taken by the catch-up and marked sent; the queue's item is
        # not written
        assert extra == Counter({"put": 1, "other": 1, "claim": 1})
