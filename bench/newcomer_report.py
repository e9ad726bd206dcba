"""Section 9 of BENCHMARKS.md: the local runtime as a newcomer meets it (bench/newcomer.py),
this tree and the one before issue 26, side by side."""

from __future__ import annotations

from typing import Any

HEADING = '<a id="local-runtime"></a>\n## 9. The local runtime, as a newcomer meets it\n\n'
COMMAND = "python -m bench --only newcomer"


def _row(label: str, values: dict[str, str]) -> str:
    return f"| {label} | {values.get('before', '—')} | {values['now']} |"


def _pause(variant: dict[str, Any]) -> str:
    pause = variant["pause"]
    if "error" in pause:
        return f"not measured ({pause['error']})"
    answers = ", ".join(str(a or "no answer") for a in pause["answers"])
    return (
        f"{pause['median_s']:.1f} s median, {pause['max_s']:.1f} s max "
        f"(answers {answers}; {max(pause['parked'])} occurrences parked)"
    )


def _stop(variant: dict[str, Any]) -> str:
    stop = variant["stop"]
    if stop["exit"] < 0:  # killed by the bench once its limit had passed
        limit = stop.get("limit_s", 120)
        return f"not within {limit:.0f} s: killed ({stop['left_behind']} processes left)"
    return f"{stop['seconds']:.1f} s (exit {stop['exit']}, {stop['left_behind']} left behind)"


def _stop_short(variant: dict[str, Any]) -> str:
    stop = variant["stop"]
    if stop["exit"] < 0:
        return f"over {stop.get('limit_s', 120):.0f} s"
    return f"{stop['seconds']:.0f} s"


def render(result: dict[str, Any], summary: list[tuple[str, str, str, str]]) -> str:
    variants = result["variants"]
    now = variants["now"]
    rows: list[tuple[str, dict[str, str]]] = []

    def add(label: str, show: Any) -> None:
        rows.append((label, {name: show(v) for name, v in variants.items()}))

    add("start-up to the first answer", lambda v: f"{v['startup_s']:.0f} s")
    add(
        "`make demo` (exit code, time, tracebacks printed)",
        lambda v: f"{v['demo']['exit']}, {v['demo']['seconds']:.0f} s, {v['demo']['tracebacks']}",
    )
    add("pause of a schedule every 10 s, over HTTP", _pause)
    add(
        f"idle CPU (second half of {result['idle_minutes']:g} idle minutes)",
        lambda v: f"{v['idle']['cpu_percent_of_a_core']:.0f}% of a core",
    )
    add(
        "memory of the whole process tree at the end (RSS / PSS)",
        lambda v: (
            f"{v['idle']['rss_mb']:,.0f} MB / {v['idle']['pss_mb']:,.0f} MB "
            f"({v['idle']['processes']} processes)"
        ),
    )
    add(
        "the runtime's own process (RSS; growth while idle)",
        lambda v: f"{v['idle']['runtime_rss_mb']:,.0f} MB (+{v['idle']['rss_growth_mb']:,.0f} MB)",
    )
    add("Ctrl-C until every process has exited", _stop)
    table = "\n".join(_row(label, values) for label, values in rows)
    before = result.get("before_revision")
    if before is not None and "before" in variants:
        old = variants["before"]
        summary.append(
            (
                "Local runtime: pause of a 10-second schedule; Ctrl-C",
                f"{now['pause'].get('median_s', float('nan')):.1f} s "
                f"(was {old['pause'].get('median_s', float('nan')):.0f} s); "
                f"{_stop_short(now)} (was {_stop_short(old)})",
                "well under the API's 29 s; a few seconds",
                "measured",
            )
        )
    columns = f"before (`{before}`)" if before else "before"
    idle, pauses = result["idle_minutes"], result["pauses"]
    return f"""{HEADING}What issue 26's newcomer met, measured: `make run` on a terminal (a
pseudo-terminal, 80x24, so the live table is drawn), `make demo` once, {idle:g} minutes idle
(the demo's schedule still firing every 15 s), then {pauses} pause(s) and resume(s) of a
schedule every 10 seconds (the densest allowed, given a minute so the sweeps decide its next
14 minutes), then Ctrl-C. "Before" is the same run on the package at `{before}` (git
archive), from a copy of the same cloud assembly whose `sundial` layer is that revision's.
Memory and CPU are the whole process tree's (the runtime and every function's processes), from
`/proc`: RSS counts a page in each process that maps it, PSS shares it between them. Re-run
alone with `{COMMAND}` (the whole section: about 15 minutes per variant at 10 idle minutes).

| | {columns} | now |
|---|---|---|
{table}

Before, the live table scanned the whole job table twice a second, moto copied the whole table
and its stream for every transaction (a pause was one per occurrence), and each of the runtime's
threads and function processes was waited for in turn on Ctrl-C. Now the live table counts from
the table's stream, a transaction copies only the items it writes, a pause is one transaction,
and a stop waits for everything at once, within 5 s, before it kills what is left.
"""
