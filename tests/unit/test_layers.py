"""The package's rooms and the direction of their imports (docs/architecture.md, "The code: one
room per concept").

A module may import its own room and any room on a lower floor, never one above it or a
neighbour on its own floor; and no modules import each other in a circle. Imports inside
functions count too: a deferred import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.consumer_footprint import emulator, prepared_record

PACKAGE = Path(__file__).resolve().parents[2] / "layers" / "sundial" / "python" / "sundial"

# Lowest floor first.
FLOORS: list[set[str]] = [
    {"access", "clock", "errors", "ids", "quotas", "retry", "settings", "timing"},  # shared basics
    {"model"},  # what a job, DAG and schedule are; no AWS
    {"store", "transport", "history"},  # DynamoDB, SQS, S3
    {"services"},  # the use cases behind the API
    {"dispatch", "runs"},  # the timer path; one attempt wherever it runs
    {"wiring"},  # the composition root
    # the API's Python client: it imports none of the server's code (sundial.client)
    {"client"},
    # the HTTP adapter; the SDK's public faces (the worker is built on the client); the
    # operator's one-off backfill
    {"api", "consumer", "worker", "backfill"},
    {"local"},  # the local runtime (not in the Lambda layer)
]
BASICS = FLOORS[0]


def room(module: str) -> str:
    """`sundial.store.jobs` -> `store`; the shared basics are one room."""
    top = module.split(".")[1] if "." in module else ""
    return "basics" if top in BASICS else top


def floor(room_name: str) -> int:
    if room_name == "basics":
        return 0
    return next(i for i, rooms in enumerate(FLOORS) if room_name in rooms)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The sundial modules a file imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sundial"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("sundial"))
    return {name for name in found if name != "sundial"}


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_room_is_on_a_floor() -> None:
    rooms = {room(m) for m in graph() if m != "sundial"}
    placed = {"basics"} | set().union(*FLOORS[1:])
    assert rooms <= placed, f"rooms on no floor: {sorted(rooms - placed)}"


def test_no_import_goes_up_or_sideways() -> None:
    wrong = []
    for module, targets in graph().items():
        if module == "sundial":
            continue
        for target in targets:
            here, there = room(module), room(target)
            if here != there and floor(there) >= floor(here):
                wrong.append(
                    f"{module} ({here}, floor {floor(here)}) imports {target} "
                    f"({there}, floor {floor(there)})"
                )
    assert not wrong, "\n".join(wrong)


def test_no_modules_import_each_other_in_a_circle() -> None:
    edges = graph()
    known = set(edges)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    circles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(edges.get(module, set()) & known):
            if state.get(target) == 1:
                circles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert not circles, "\n".join(" -> ".join(c) for c in circles)


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    # The rule itself: a store module importing a service would be caught.
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from sundial.services.jobs import JobService\n")
    assert imports(sample) == {"sundial.services.jobs"}
    assert floor(room("sundial.services.jobs")) > floor(room("sundial.store.jobs"))


def test_the_consumer_sdk_runs_a_job_loading_at_most_21_modules_and_no_service() -> None:
    # A fresh interpreter, as a consumer Lambda's cold start: it imports the SDK and handles one
    # record end to end (fence, take, function, success write) on a moto server. Before the
    # consumer built its own collaborators, the first record loaded the composition root: 68
    # of the package's entries, every service, the dispatch and the DAG engine.
    with emulator() as url, prepared_record(url) as record:
        result = record.probe()
    assert result["response"] == {"batchItemFailures": []}
    assert result["status"] == "succeeded"
    ours = result["modules"]  # packages' __init__ aside
    heavy = [
        m
        for m in ours
        if room(m) in {"services", "dispatch", "api", "wiring", "local"}
        or m in {"sundial.model.dag", "sundial.model.schedule", "sundial.model.recurrence"}
    ]
    assert not heavy, f"the consumer SDK loads {heavy}"
    assert "sundial.runs.attempts" in ours  # and it did run the SDK
    # 21: sundial.model.placement (the direct-window rule a retry's send and the store obey)
    # is one small module of its own, importing nothing the consumer does not load already.
    assert len(ours) <= 21, f"{len(ours)} modules: {ours}"
