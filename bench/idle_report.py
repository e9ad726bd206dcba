"""BENCHMARKS.md's idle bill (issue 29, goal 4): what a deployed stack with its quiet queues
and no jobs costs a month, line by line (bench.idle_bill), against the $5 target."""

from __future__ import annotations

from typing import Any

from bench.idle_bill import TARGET_DOLLARS, bill, knobs, total

HEADING = "## 1a. The idle bill\n\n"
COMMAND = "python -m bench --only idle"


def _money(value: float) -> str:
    return f"${value:,.2f}"


def render(result: dict[str, Any], queues: int, summary: list[tuple[str, str, str, str]]) -> str:
    """The section's Markdown; appends goal 4's headline row to `summary`."""
    lines = bill(result)
    whole = total(lines)
    rows = "\n".join(
        f"| {line['item']} | {line['quantity']} | {_money(line['dollars'])} | {line['how']} |"
        for line in sorted(lines, key=lambda line: -line["dollars"])
    )
    variants = knobs(result)
    knob_rows = "\n".join(f"| {k['knob']} | {_money(k['dollars'])} |" for k in variants)
    best = min(k["dollars"] for k in variants)
    meets = whole <= TARGET_DOLLARS
    top = sorted(lines, key=lambda line: -line["dollars"])[:5]
    bound = ", ".join(f"{line['item']} {_money(line['dollars'])}" for line in top)
    summary.append(
        (
            f"Idle stack, {queues} quiet queues and no jobs: the whole monthly bill "
            f"(goal 4; `{COMMAND}`, from the synthesized template and a measured idle tick)",
            f"{_money(whole)} a month; {_money(best)} with every existing knob"
            + ("" if meets else f" (largest: {bound})"),
            f"≤ {_money(TARGET_DOLLARS)} a month",
            "**meets**" if meets else "**misses**",
        )
    )
    inv = result["inventory"]
    dollars = {line["item"]: line["dollars"] for line in lines}
    metrics = dollars.get("custom metrics an idle tick publishes", 0.0)
    tick = dollars.get("dispatch ticks: fan-out and sweepers, nothing due", 0.0)
    verdict = (
        "It meets the target."
        if meets
        else f"""It misses the target by {_money(whole - TARGET_DOLLARS)}, and no
setting that exists today brings it under: with all of them it is still {_money(best)}. What
bounds it is the price of things that are there whatever the load, each small: an alarm is
$0.10 a month per metric ({len(inv["alarms"])} alarms: three per queue and DLQ, three per
dispatch and history function, the dispatch and API alarms), a dashboard $3, a KMS key $1,
each custom metric published in the month $0.30 (the sweepers and the fan-out publish
{len(result["metrics"])} every minute, zeros included), and each SQS event source mapping's
pollers about $0.26 (the dead-letter indexer reads every DLQ). The dispatch tick itself is
{_money(tick)} of it. Under {_money(TARGET_DOLLARS)} needs what is not built: the sweepers and
the fan-out publishing a metric only when it is not zero (their alarms treat no data as fine;
up to {_money(metrics)} less), fewer alarms per function (Errors alone would keep the page and
drop two thirds of the function alarms), and the lease protocol's one Query per quiet queue
instead of one per shard (issue 27: the tick's read units and sweeper time)."""
    )
    return f"""{HEADING}What a deployed stack costs a month with {queues} queues and no jobs at
all: every line counted in the synthesized template (`cdk.out`) or measured on an idle tick,
priced by `bench/idle_bill.py` (prices in section 1's table; the assumptions in its docstring). As
deployed by default (active tracing, INFO logs):

| item | quantity | $ a month | how |
|---|---|---|---|
{rows}
| **all** | | **{_money(whole)}** | |

The settings that lower it (docs/configuration.md, "Observability" and "Operations"):

| configuration | $ a month |
|---|---|
{knob_rows}

{verdict}
"""
