"""How `make test` spreads the tests over worker processes (pytest-xdist, `--dist loadgroup`).

Each test is a unit of work of its own, except the tests that use a session fixture that is slow
to start: those of one fixture form one unit, so one worker starts it once instead of every
worker starting its own. xdist's `xdist_group` mark would say the same, but pytest 9.2 no longer
reads the node id that xdist 3.8 rewrites to carry the group (pytest-xdist issue #1386), so the
groups are named here by test file, and conftest.py checks at collection that every test using
one of these fixtures is in its group's files.

The local runtime and least-privilege tests are not run by the workers at all: `make test` runs
them after, in one process (see SERIAL_TESTS in the Makefile).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

# The local runtime's tests use both fixtures (`make test` runs them in a process of their own).
LOCAL_RUNTIME = "tests/integration/test_local_runtime.py"
# Issue 26's acceptance: a fresh local runtime of its own, five demos and a report (serial too).
FIRST_TEN_MINUTES = "tests/integration/test_first_ten_minutes.py"
# {session fixture: the test files (or folders) whose tests use it}: one unit of work each (a
# file listed twice goes with the first).
SHARED_FIXTURE_FILES: Mapping[str, Sequence[str]] = {
    # jsii and a CDK synth with cdk-nag (tests/conftest.py `synthesized`)
    "synthesized": (
        "tests/infrastructure/",
        "tests/bench/test_bench_smoke.py",
        LOCAL_RUNTIME,
        FIRST_TEN_MINUTES,
    ),
    # a local Spark JVM (tests/conftest.py `spark`)
    "spark": ("tests/glue/", "tests/unit/history/test_replay.py", LOCAL_RUNTIME),
    # a headless Chromium (tests/ui/conftest.py `browser`)
    "browser": ("tests/ui/",),
}


def shared_fixture_group(nodeid: str) -> str | None:
    """The group of the test `nodeid`, or None if it is a unit of work of its own."""
    for fixture, files in SHARED_FIXTURE_FILES.items():
        if nodeid.startswith(tuple(files)):
            return fixture
    return None


def check_groups(items: Sequence[pytest.Item]) -> None:
    """Refuses a test that uses a shared fixture from a file outside that fixture's group (it
    would start the fixture again in another worker)."""
    for item in items:
        for fixture, files in SHARED_FIXTURE_FILES.items():
            uses = fixture in getattr(item, "fixturenames", ())
            if uses and not item.nodeid.startswith(tuple(files)):
                raise pytest.UsageError(
                    f"{item.nodeid} uses the `{fixture}` fixture: add its file to "
                    f"SHARED_FIXTURE_FILES[{fixture!r}] in tests/parallel.py"
                )


class SharedFixtureScheduling(LoadScopeScheduling):
    """xdist's loadgroup scheduling with the groups of SHARED_FIXTURE_FILES. Units of work go
    out largest first (xdist's --loadscope-reorder), so the two groups start at once."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)

    def _split_scope(self, nodeid: str) -> str:
        return shared_fixture_group(nodeid) or nodeid
