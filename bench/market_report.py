"""BENCHMARKS.md's buyer's table (issue 29, goal 5): $ per million delayed jobs for Sundial and
the alternatives, what each price includes and leaves out, and the plot against volume. Built
from the ledger's results (bench.market) at report time: no run of its own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import plots
from bench.cost_curve import VOLUMES
from bench.market import MODELLED_ROWS, buyer_table

COMMAND = "python -m bench --only ledger"


def _money(value: float) -> str:
    return f"${value:,.2f}"


def _range(low: float, high: float) -> str:
    return _money(low) if low == high else f"{_money(low)} to {_money(high)}"


def render(
    ledger: dict[str, Any],
    config: dict[str, Any],
    results_dir: Path,
    image: Callable[[str], str],
    summary: list[tuple[str, str, str, str]],
) -> str:
    """The section's Markdown; appends goal 5's headline row to `summary`."""
    shards = int(config["shard_count"])
    sweepers = -(-shards // int(config["shards_per_sweeper"]))
    table = buyer_table(ledger, shards, sweepers)
    volumes = table["volumes"]
    header = " | ".join(f"{v:,} a tick" for v in volumes)
    rows = []
    for key, name, precision, cancel, status, queues, excludes in MODELLED_ROWS:
        cells = table["modelled"][key]
        figures = " | ".join(
            f"{_money(cells[str(v)]['all_in'])} ({_money(cells[str(v)]['schedule'])})"
            for v in volumes
        )
        rows.append(
            f"| {name} | {figures} | {precision} | {cancel} | {status} | {queues} | {excludes} |"
        )
    blank = " | ".join("not built" for _ in volumes)
    rows.insert(
        2,
        f"| Sundial, lean (per-queue, 2 write units a job) | {blank} | second | as exact | "
        "as exact | as exact | issue 27's lease protocol; not in this tree |",
    )
    for offer in table["hosted"]:
        price = _range(offer["low"], offer["high"])
        figures = " | ".join(price for _ in volumes)
        rows.append(
            f"| {offer['name']} ({offer['formula']}; {offer['source']}) | {figures} | "
            f"{offer['precision']} | {offer['cancel']} | {offer['status']} | {offer['queues']} | "
            f"{offer['excludes']} |"
        )
    chart = plots.market(ledger["cost_curve"]["rows"], table["hosted"], results_dir / "market.png")
    single = table["modelled"]["sundial"]
    mid = str(volumes[len(volumes) // 2])
    hosted = ", ".join(f"{o['name']} {_range(o['low'], o['high'])}" for o in table["hosted"])
    eventbridge = table["modelled"]["eventbridge"][mid]["all_in"]
    dynein = table["modelled"]["dynein"][mid]["all_in"]
    summary.append(
        (
            "$ per million delayed jobs, the buyer's table (goal 5), "
            f"{int(mid):,} jobs a tick, all in: Sundial single submits vs Dynein-style vs "
            f"EventBridge Scheduler; hosted list prices (`{COMMAND}`, table at report time)",
            f"{_money(single[mid]['all_in'])} (scheduling side {_money(single[mid]['schedule'])}) "
            f"vs {_money(dynein)} vs {_money(eventbridge)}; {hosted}; lean: not built",
            "the table: each offer's price, source, inclusions and exclusions; the plot",
            "**meets**",
        )
    )
    return f"""**What else a buyer could use (issue 29, goal 5).** $ per million delayed jobs at
{", ".join(f"{v:,}" for v in volumes)} jobs due per one-minute tick. Sundial, the Dynein-style
baseline and EventBridge Scheduler are this run's ledger model (`bench/market.py` on
`bench/cost_curve.py`), each **all in** (submit to done, its consumer's Lambda, logs, X-Ray and
metrics charged alike), with the **scheduling side alone** (submit to in the queue) in
brackets: the figure to set against the hosted services, whose list prices (constants in
`bench/market.py`, each with its source) pay for the scheduling and the delivery but not the
code that runs the job. Free tiers and plan minimums are left out on every row; Sundial's fixed
monthly cost is the idle bill below. Temporal's range is 2 actions at $25 per million to 3 at
$50 (StartWorkflow, the timer, the activity).

| offer | {header} | precision | cancel | status | queues | not in the price |
|---|{"---|" * len(volumes)}---|---|---|---|---|
{chr(10).join(rows)}

{image(chart)}

The plot takes the model over {VOLUMES[0]:,} to {VOLUMES[-1]:,} jobs a tick; the hosted
services are flat (priced per operation), Temporal's band its range.
"""
