from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ulid import ULID

from sundial.errors import InvalidInput
from sundial.ids import (
    DAG_TOKEN_LENGTH,
    MAX_DAG_NODES,
    MAX_DUE_MS,
    TOKEN_LENGTH,
    DagKey,
    JobKey,
    due_sk_bound,
)


@given(
    shard=st.integers(min_value=0, max_value=4095),
    due_ms=st.integers(min_value=0, max_value=MAX_DUE_MS),
    ulid_bytes=st.binary(min_size=16, max_size=16),
)
def test_job_id_round_trips_shard_due_time_and_ulid(
    shard: int, due_ms: int, ulid_bytes: bytes
) -> None:
    # Given a job key
    key = JobKey(shard=shard, due_ms=due_ms, ulid=str(ULID.from_bytes(ulid_bytes)))
    # When it is encoded as an id and decoded again
    job_id = key.job_id
    # Then the id is URL-safe, fixed-length, and decodes to the same item key
    assert len(job_id) == TOKEN_LENGTH
    assert set(job_id) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert JobKey.from_job_id(job_id) == key


def test_sort_key_is_zero_padded_due_ms_then_ulid() -> None:
    key = JobKey(shard=7, due_ms=1_763_726_400_000, ulid="01KAKZ9Q2X8Q9JZ8W7M5N4P3R2")
    assert key.pk == "shard#7"
    assert key.sk == "1763726400000#01KAKZ9Q2X8Q9JZ8W7M5N4P3R2"
    assert JobKey(shard=0, due_ms=5, ulid=key.ulid).sk.startswith("0000000000005#")


def test_sort_key_bounds_bracket_every_job_due_at_that_ms() -> None:
    key = JobKey(shard=1, due_ms=1000, ulid=str(ULID()))
    assert due_sk_bound(1000, upper=False) < key.sk < due_sk_bound(1000, upper=True)
    assert due_sk_bound(999, upper=True) < key.sk < due_sk_bound(1001, upper=False)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "abc",
        "x" * TOKEN_LENGTH,  # right length, wrong checksum
        "!" * TOKEN_LENGTH,  # not base64url
        "é" * TOKEN_LENGTH,  # not ASCII
        "A" * 100,
    ],
)
def test_malformed_ids_are_invalid_input_naming_job_id(bad: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        JobKey.from_job_id(bad)
    assert raised.value.field == "job_id"


def test_a_single_changed_character_is_detected() -> None:
    job_id = JobKey(shard=3, due_ms=123_456, ulid=str(ULID())).job_id
    flipped = job_id[:10] + ("A" if job_id[10] != "A" else "B") + job_id[11:]
    with pytest.raises(InvalidInput):
        JobKey.from_job_id(flipped)


@given(
    shard=st.integers(min_value=0, max_value=4095),
    due_ms=st.integers(min_value=0, max_value=MAX_DUE_MS),
    node_count=st.integers(min_value=1, max_value=MAX_DAG_NODES - 1),
    now_ms=st.integers(min_value=0, max_value=2**48 - 1),
)
def test_dag_id_round_trips_and_addresses_a_contiguous_range_of_nodes(
    shard: int, due_ms: int, node_count: int, now_ms: int
) -> None:
    # Given a new DAG key
    key = DagKey.new(shard=shard, due_ms=due_ms, node_count=node_count, now_ms=now_ms)
    # Then its id is a 40-character URL-safe token that decodes to the same key
    assert len(key.dag_id) == DAG_TOKEN_LENGTH
    assert DagKey.from_dag_id(key.dag_id) == key
    # And its nodes are jobs on its shard at its due time, in sort-key order
    first, last = key.node_key(0), key.node_key(node_count - 1)
    assert (first.shard, first.due_ms) == (shard, due_ms)
    assert first.sk <= last.sk and first.ulid == key.base_ulid
    with pytest.raises(ValueError, match="out of range"):
        key.node_key(node_count)


def test_dags_made_in_the_same_millisecond_never_share_nodes() -> None:
    # Given many DAG keys made at one moment, for one shard and due time (a frozen clock, or a
    # batch of submits within a millisecond)
    keys = [DagKey.new(shard=3, due_ms=1_000, node_count=5, now_ms=1_000) for _ in range(1_000)]
    # Then no two DAGs address the same node
    nodes = [key.node_key(i).sk for key in keys for i in range(5)]
    assert len(set(nodes)) == len(nodes)
    # And each base still carries the creation time
    assert {ULID.from_str(key.base_ulid).milliseconds for key in keys} == {1_000}


def test_job_and_dag_ids_are_not_mistaken_for_each_other() -> None:
    key = DagKey.new(shard=1, due_ms=5, node_count=3, now_ms=5)
    with pytest.raises(InvalidInput) as raised:
        JobKey.from_job_id(key.dag_id)
    assert raised.value.field == "job_id"
    with pytest.raises(InvalidInput) as raised:
        DagKey.from_dag_id(key.node_key(0).job_id)
    assert raised.value.field == "dag_id"
    tampered = ("B" if key.dag_id[5] != "B" else "C").join((key.dag_id[:5], key.dag_id[6:]))
    with pytest.raises(InvalidInput, match="checksum"):
        DagKey.from_dag_id(tampered)
