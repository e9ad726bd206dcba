"""The shape of a DAG, checked before anything is written: pure functions over node names.

A DAG is given as {node: [the nodes it depends on]}. An edge parent → child reads "parent runs
before child". Checked: every dependency names a node of the DAG, no node depends on itself or
lists a dependency twice, and there is no cycle. A cycle is reported as the nodes on it in run
order, starting from the one listed first in the request: "a → b → c → a".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sundial.errors import InvalidInput


def check_graph(depends_on: Mapping[str, Sequence[str]]) -> None:
    """Raise InvalidInput naming the field (nodes.<name>.depends_on, or nodes for a cycle)."""
    for name, parents in depends_on.items():
        field = f"nodes.{name}.depends_on"
        seen: set[str] = set()
        for parent in parents:
            if parent == name:
                raise InvalidInput(field, f"node '{name}' depends on itself")
            if parent not in depends_on:
                known = ", ".join(depends_on)
                raise InvalidInput(field, f"unknown node '{parent}' (nodes: {known})")
            if parent in seen:
                raise InvalidInput(field, f"'{parent}' is listed twice")
            seen.add(parent)
    cycle = find_cycle(depends_on)
    if cycle is not None:
        raise InvalidInput("nodes", f"dependency cycle: {' → '.join(cycle)}")


def children_of(depends_on: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """{node: the nodes that depend on it}, in request order."""
    children: dict[str, list[str]] = {name: [] for name in depends_on}
    for name, parents in depends_on.items():
        for parent in parents:
            children[parent].append(name)
    return children


def find_cycle(depends_on: Mapping[str, Sequence[str]]) -> list[str] | None:
    """One cycle, as node names in run order with the first repeated at the end, or None.

    Iterative depth-first search (a DAG may be as deep as it has nodes; no recursion limit).
    """
    children = children_of(depends_on)
    position = {name: i for i, name in enumerate(depends_on)}
    finished: set[str] = set()
    for root in depends_on:
        if root in finished:
            continue
        path = [root]  # the nodes being visited, each a child of the one before
        on_path = {root}
        pending = [iter(children[root])]
        while pending:
            child = next(pending[-1], None)
            if child is None:
                finished.add(path[-1])
                on_path.discard(path.pop())
                pending.pop()
            elif child in on_path:
                cycle = path[path.index(child) :]
                first = min(range(len(cycle)), key=lambda i: position[cycle[i]])
                cycle = cycle[first:] + cycle[:first]
                return [*cycle, cycle[0]]
            elif child not in finished:
                path.append(child)
                on_path.add(child)
                pending.append(iter(children[child]))
    return None
