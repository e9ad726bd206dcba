"""DagNodeStore against moto: each condition of the DAG node writes, one write at a time."""

from __future__ import annotations

from dataclasses import replace

from ulid import ULID

from sundial.ids import DagKey, JobKey
from sundial.model.job import DagLink, Job, OnFailure, ParentResults, Priority, Status
from sundial.store.job_items import item_to_job, job_to_item
from sundial.wiring import Dependencies

NOW = 1_795_267_200_000
DAG = DagKey.new(shard=3, due_ms=NOW, node_count=3, now_ms=NOW)


def _node(index: int, *, waiting_on: int, **changes: object) -> Job:
    job = Job(
        key=DAG.node_key(index),
        queue="default",
        payload_json="{}",
        priority=Priority.NORMAL,
        max_attempts=3,
        created_at_ms=NOW,
        status=Status.BLOCKED if waiting_on else Status.PENDING,
        direct=True,
        dag=DagLink(
            dag_id=DAG.dag_id,
            dag_name="d",
            node=f"n{index}",
            index=index,
            parents=tuple((f"n{i}", i) for i in range(waiting_on)),
            waiting_on=waiting_on,
        ),
    )
    for name, value in changes.items():
        setattr(job, name, value)
    return job


def test_a_node_round_trips_with_its_dag_link() -> None:
    node = _node(2, waiting_on=2)
    assert node.dag is not None
    link = replace(
        node.dag,
        children=((0, 1), (1, 3)),
        on_failure=OnFailure.CONTINUE,
        parent_results=ParentResults.INLINE,
        done_parents=frozenset({0}),
        failed_parents=frozenset({0}),
        released_by=0,
        released_at_ms=NOW,
        results_json='{"n0":1}',
        held=True,
    )
    node.dag = link
    assert item_to_job(job_to_item(node)) == node


def test_a_parent_is_counted_once_and_the_last_count_reads_zero(deps: Dependencies) -> None:
    store, nodes = deps.store, deps.dag_nodes
    child = _node(2, waiting_on=2)
    store.put_new([child], now_ms=NOW)
    # When parent 0 is counted twice and parent 1 once
    first = nodes.count_finished_parent(child.key, parent=0, failed=False)
    again = nodes.count_finished_parent(child.key, parent=0, failed=False)
    last = nodes.count_finished_parent(child.key, parent=1, failed=True)
    # Then the repeat was refused, and the last count left nothing to wait for
    assert first[0] and not again[0] and last[0]
    assert again[1] is not None and again[1].dag is not None
    assert again[1].dag.waiting_on == 1  # the item as it was
    after = last[1]
    assert after is not None and after.dag is not None
    assert (after.dag.waiting_on, after.dag.done_parents) == (0, frozenset({0, 1}))
    assert after.dag.failed_parents == frozenset({1})
    assert after.status is Status.BLOCKED and after.expires_at_s is None  # waits any time


def test_release_needs_no_parent_left_and_happens_once(deps: Dependencies) -> None:
    store, nodes = deps.store, deps.dag_nodes
    child = _node(2, waiting_on=1)
    store.put_new([child], now_ms=NOW)
    assert not nodes.release_node(child.key, token="t", now_ms=NOW)[0]  # still waiting
    nodes.count_finished_parent(child.key, parent=0, failed=False)
    released, after = nodes.release_node(child.key, token="t", now_ms=NOW + 5, released_by=0)
    assert released and after is not None and after.dag is not None
    assert (after.status, after.queued_at_ms, after.expires_at_s) == (Status.QUEUED, NOW + 5, None)
    assert (after.dag.released_by, after.dag.released_at_ms) == (0, NOW + 5)
    assert not nodes.release_node(child.key, token="t", now_ms=NOW + 6)[0]


def test_the_only_parent_counts_and_releases_in_one_write(deps: Dependencies) -> None:
    store, nodes = deps.store, deps.dag_nodes
    child = _node(1, waiting_on=1)
    store.put_new([child], now_ms=NOW)
    released, after = nodes.release_node(
        child.key, token="t", now_ms=NOW, last_parent=0, released_by=0, results_json='{"n0":7}'
    )
    assert released and after is not None and after.dag is not None
    assert (after.status, after.dag.waiting_on, after.dag.done_parents) == (
        Status.QUEUED,
        0,
        frozenset({0}),
    )
    assert after.dag.results_json == '{"n0":7}'
    # A repeat is refused and shows the node as it is
    again, current = nodes.release_node(child.key, token="t", now_ms=NOW, last_parent=0)
    assert not again and current is not None and current.status is Status.QUEUED


def test_a_held_node_is_counted_but_not_released(deps: Dependencies) -> None:
    store, nodes = deps.store, deps.dag_nodes
    child = _node(1, waiting_on=1)
    assert child.dag is not None
    child.dag = replace(child.dag, held=True)
    store.put_new([child], now_ms=NOW)
    assert not nodes.release_node(child.key, token="t", now_ms=NOW, last_parent=0)[0]
    assert nodes.count_finished_parent(child.key, parent=0, failed=False)[0]
    assert not nodes.release_node(child.key, token="t", now_ms=NOW)[0]


def test_dag_nodes_reads_the_range_and_only_the_dags_nodes(deps: Dependencies) -> None:
    store, nodes = deps.store, deps.dag_nodes
    store.put_new([_node(0, waiting_on=0), _node(2, waiting_on=1)], now_ms=NOW)
    # A stranger inside the range: same shard and due time, a ULID between two nodes
    inside = ULID.from_int(int(ULID.from_str(DAG.base_ulid)) + 1)
    stranger = _node(0, waiting_on=0, key=JobKey(shard=3, due_ms=NOW, ulid=str(inside)))
    stranger.dag = None
    store.put_new([stranger], now_ms=NOW)
    assert [n.key for n in nodes.dag_nodes(DAG)] == [DAG.node_key(0), DAG.node_key(2)]
