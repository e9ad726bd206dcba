"""Log bytes per delayed job (issue 29, goal 1's per-job lever), before and after, side by side
in one run: the `log_bytes` section.

Both variants take the same delayed jobs through the real handlers on moto (submit, the one
tick that dispatches them, the consumer on Sundial's SDK), counting every line the functions
print (bench.logs). `after` is this tree. `before` is this tree with its two log changes
undone for the run, as main had them: every line keeps Powertools' function name, ARN and
memory size (sundial.log_format.LeanFormatter told to drop nothing), and the consumer SDK's
line for each job that succeeded is printed at INFO again (a filter on that logger raises the
record it now makes at DEBUG). Nothing else differs between the two.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.config import BenchConfig
from bench.logs import LAMBDA_PLATFORM_LOG_BYTES
from bench.prices import MILLION, PRICES
from bench.system import InProcessSundial

COMMAND = "python -m bench --only log_bytes"
HEADING = "## 1b. Log bytes per delayed job\n\n"
VARIANTS = ("before", "after")


class _SucceededAtInfo(logging.Filter):
    """Raise the consumer SDK's per-job success line back to INFO (the `before` variant)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage() == "job succeeded":
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


@contextmanager
def as_before() -> Iterator[None]:
    """Undo this tree's two log changes while the block runs (see the module docstring)."""
    from sundial.log_format import LeanFormatter  # noqa: PLC0415
    from sundial.runs import attempts  # noqa: PLC0415

    formatters = [
        h.formatter
        for h in logging.getLogger("sundial").handlers
        if isinstance(h.formatter, LeanFormatter)
    ]
    for formatter in formatters:
        formatter.dropped = frozenset()
    child = attempts.logger._logger
    level, success = child.level, _SucceededAtInfo()
    child.setLevel(logging.DEBUG)
    child.addFilter(success)
    try:
        yield
    finally:
        child.removeFilter(success)
        child.setLevel(level)
        for formatter in formatters:
            del formatter.dropped  # back to the class's


def _meets(ok: bool) -> str:
    return "**meets**" if ok else "**misses**"


def run_variant(config: BenchConfig, jobs: int, variant: str) -> dict[str, Any]:
    from bench.ledger import delayed_succeeds  # noqa: PLC0415

    with InProcessSundial(config) as system:
        system.meter.reset()
        system.invocations.clear()
        system.logs.by_kind.clear()
        if variant == "before":
            with as_before():
                delayed_succeeds(system, jobs)
        else:
            delayed_succeeds(system, jobs)
        by_function: Counter[str] = Counter()
        for invocation in system.invocations:
            by_function[invocation.function] += invocation.log_bytes
        invocations = len(system.invocations)
        kinds = dict(system.logs.by_kind)
    printed = sum(by_function.values())
    return {
        "jobs": jobs,
        "printed_per_job": printed / jobs,
        "with_platform_per_job": (printed + LAMBDA_PLATFORM_LOG_BYTES * invocations) / jobs,
        "by_function_per_job": {name: b / jobs for name, b in sorted(by_function.items())},
        "by_kind_per_job": {
            kind: b / jobs for kind, b in sorted(kinds.items(), key=lambda kv: -kv[1])
        },
    }


def run_log_bytes(config: BenchConfig, jobs: int) -> dict[str, Any]:
    """Both variants on the same number of jobs, one after the other in this process."""
    return {variant: run_variant(config, jobs, variant) for variant in VARIANTS}


def dynein_bytes_per_job(ledger: dict[str, Any] | None) -> float | None:
    """The Dynein-style baseline's log bytes per job in the ledger's run, Lambda's own lines
    included (its model prints nothing else)."""
    if ledger is None:
        return None
    dynein = ledger["dynein"]
    sides = dynein["sides"].values()
    printed = sum(side["log_bytes"] for side in sides)
    requests = sum(side["lambda_requests"] for side in sides)
    return float(printed + LAMBDA_PLATFORM_LOG_BYTES * requests) / float(dynein["jobs"])


def render(
    result: dict[str, Any],
    ledger: dict[str, Any] | None,
    summary: list[tuple[str, str, str, str]],
) -> str:
    """The report's paragraph and table; appends the headline row to `summary`."""
    before, after = result["before"], result["after"]
    dynein = dynein_bytes_per_job(ledger)
    functions = sorted(set(before["by_function_per_job"]) | set(after["by_function_per_job"]))
    rows = [
        f"| printed by {name} | {before['by_function_per_job'].get(name, 0):,.0f} | "
        f"{after['by_function_per_job'].get(name, 0):,.0f} |"
        for name in functions
    ]
    kinds = sorted(
        set(before["by_kind_per_job"]) | set(after["by_kind_per_job"]),
        key=lambda k: -before["by_kind_per_job"].get(k, 0.0),
    )
    rows += [
        f"| line: `{kind}` | {before['by_kind_per_job'].get(kind, 0):,.0f} | "
        f"{after['by_kind_per_job'].get(kind, 0):,.0f} |"
        for kind in kinds
    ]
    baseline = "not run" if dynein is None else f"{dynein:,.0f}"
    saved = before["printed_per_job"] - after["printed_per_job"]
    per_gb = PRICES.cloudwatch_logs_gb
    saved_per_million = f"${saved * MILLION / 1024**3 * per_gb:.2f}"
    summary.append(
        (
            "Log bytes per delayed job, Lambda's own lines included (goal 1's per-job lever), "
            f"{after['jobs']} jobs a tick, before → after in one run (`{COMMAND}`)",
            f"{before['with_platform_per_job']:,.0f} → {after['with_platform_per_job']:,.0f} "
            f"(printed by the functions: {before['printed_per_job']:,.0f} → "
            f"{after['printed_per_job']:,.0f}); the Dynein-style baseline {baseline}",
            f"at or below the Dynein-style baseline ({baseline}, section 1's run)",
            "—" if dynein is None else _meets(after["with_platform_per_job"] <= dynein),
        )
    )
    return f"""{HEADING}Before and after issue 29's log changes: `bench/log_bytes.py` takes
{after["jobs"]} delayed jobs through submit, one tick and the consumer twice in one process:
`before` as main logged (every line with Powertools' function name, ARN and memory
size; the consumer SDK's "job succeeded" line at INFO for every job) and `after` as this tree
logs (those three keys dropped by `sundial.log_format.LeanFormatter`, since the log group and
stream already say them; the success line at DEBUG: the job's status says it, and a failed
attempt still logs one WARNING line, a dead job one ERROR). Bytes printed per job (Lambda's
START/END/REPORT lines, {LAMBDA_PLATFORM_LOG_BYTES} bytes an invocation, come on top):

| | before | after |
|---|---|---|
| **all printed** | **{before["printed_per_job"]:,.0f}** | **{after["printed_per_job"]:,.0f}** |
{chr(10).join(rows)}

The ledger in section 1 counted none of the consumer SDK's own lines (its loggers were made
before the bench set the service name, so they wrote to no handler; `bench/__init__.py` sets it
first now): its log bytes per job are low by the "job succeeded" line of the `before` column.
The Dynein-style model prints nothing of its own: its {baseline} bytes a job are Lambda's lines,
which Sundial pays as much of; so the target (the issue quotes Sundial's 376 printed bytes
against 160 for the baseline, a figure no count in this run reproduces) is out of reach while
the submit prints a metric line per request. In dollars, the change saves {saved_per_million}
per million delayed jobs at ${per_gb:.2f} per GB ingested.
What is left per job is mostly the submit's EMF line (`JobsSubmitted`, one per request: a
batch of 25 shares it) and the sweeper's "jobs sent" INFO line per batch sent, which lists
every job id it sent (sundial/dispatch, being rewritten for issue 27: a count there instead of
the ids would take most of the rest).
"""
