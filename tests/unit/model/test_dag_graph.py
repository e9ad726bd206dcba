"""The DAG shape checks: pure functions, so properties are checked over many random graphs."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sundial.errors import InvalidInput
from sundial.model.dag_graph import check_graph, children_of, find_cycle


@st.composite
def acyclic(draw: st.DrawFn) -> dict[str, list[str]]:
    """A random DAG: each node may depend only on nodes listed before it (then shuffled)."""
    count = draw(st.integers(min_value=1, max_value=30))
    names = [f"n{i}" for i in range(count)]
    graph = {
        name: draw(st.lists(st.sampled_from(names[:i]), unique=True)) if i else []
        for i, name in enumerate(names)
    }
    order = draw(st.permutations(names))
    return {name: graph[name] for name in order}


# Drawing a 30-node graph takes a few ms; on a loaded machine (CI runners are shared) that
# trips Hypothesis' generation-speed health check, which says nothing about the code.
GRAPHS = settings(suppress_health_check=[HealthCheck.too_slow])


@GRAPHS
@given(acyclic())
def test_a_random_dag_passes(graph: dict[str, list[str]]) -> None:
    check_graph(graph)
    assert find_cycle(graph) is None


@GRAPHS
@given(acyclic(), st.data())
def test_a_back_edge_is_reported_as_a_real_cycle(
    graph: dict[str, list[str]], data: st.DataObject
) -> None:
    # Given a DAG with an edge ancestor → descendant, plus the edge back
    children = children_of(graph)
    assume(any(children.values()))
    ancestor = data.draw(st.sampled_from([name for name in graph if children[name]]))
    descendant = data.draw(st.sampled_from(children[ancestor]))
    graph[ancestor] = [*graph[ancestor], descendant]
    # When it is checked
    cycle = find_cycle(graph)
    # Then the cycle it names is closed, and each step is an edge parent → child
    assert cycle is not None and cycle[0] == cycle[-1] and len(cycle) >= 3
    for parent, child in itertools.pairwise(cycle):
        assert parent in graph[child]
    with pytest.raises(InvalidInput) as raised:
        check_graph(graph)
    assert raised.value.field == "nodes"
    assert raised.value.reason == f"dependency cycle: {' → '.join(cycle)}"


def test_a_cycle_starts_at_its_node_listed_first() -> None:
    graph = {"z": ["y"], "a": ["z"], "y": ["a"]}
    assert find_cycle(graph) == ["z", "a", "y", "z"]


def test_a_long_chain_needs_no_recursion() -> None:
    graph = {f"n{i}": [f"n{i - 1}"] if i else [] for i in range(5_000)}
    assert find_cycle(graph) is None
    graph["n0"] = ["n4999"]
    cycle = find_cycle(graph)
    assert cycle is not None and len(cycle) == 5_001
