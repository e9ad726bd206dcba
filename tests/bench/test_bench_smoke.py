"""The benchmark suite at toy sizes (the smoke profile, as `make bench-smoke`), so its code keeps
working. Nothing here asserts a time: performance claims live in BENCHMARKS.md. What is asserted
are the cost ledger's counts, which are properties of the design, not of the machine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.suite import PROFILES, run_suite
from tests.infrastructure.synthesis import Synthesized

PLOTS = (
    "cost_per_million.png",
    "dispatch_batching.png",
    "lateness.png",
    "pickup.png",
    "cpu_per_job.png",
    "throughput_model.png",
    "cost_curve.png",
    "market.png",
)
HEADINGS = (
    "## Headline figures",
    "## 1. Cost ledger",
    "## 1a. The idle bill",
    "## 1b. Log bytes per delayed job",
    "## 2. Timing precision",
    "## 3. Pickup latency",
    "## 4. Sundial's own CPU per job",
    "## 5. Scale",
    "### Outage recovery",
    "## 6. Compaction throughput",
    "## 7. Consumer SDK import",
    "## 8. Fair dispatch",
    "## 9. The local runtime, as a newcomer meets it",
    "## 10. Method, assumptions and limits",
)


@pytest.fixture(scope="module")
def smoke_run(synthesized: Synthesized, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    status = run_suite(
        PROFILES["smoke"],
        cdk_out=synthesized.outdir,
        results_dir=out / "results",
        report_path=out / "BENCHMARKS.md",
        command="pytest tests/bench",
        progress=lambda _: None,
    )
    results = json.loads((out / "results" / "results.json").read_text())
    failed = {n: s["error"] for n, s in results["sections"].items() if s["error"]}
    assert status == 0 and not failed, failed
    return out


def _path(ledger: dict[str, Any], key: str) -> dict[str, Any]:
    return next(p for p in ledger["paths"] if p["key"] == key)


@pytest.mark.bench
def test_every_section_writes_its_figures_and_plots(smoke_run: Path) -> None:
    report = (smoke_run / "BENCHMARKS.md").read_text()
    for heading in HEADINGS:
        assert heading in report
    assert "make bench" in report and "cores" in report and "moto" in report
    for plot in PLOTS:
        assert (smoke_run / "results" / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", plot
        assert f"]({plot})" in report or f"/{plot})" in report, plot


@pytest.mark.bench
def test_the_ledger_counts_what_the_design_says_each_path_costs(smoke_run: Path) -> None:
    results = json.loads((smoke_run / "results" / "results.json").read_text())
    ledger = results["sections"]["ledger"]["result"]
    jobs = ledger["jobs_per_path"]
    delayed, immediate = _path(ledger, "delayed"), _path(ledger, "immediate")
    cancelled, batch = _path(ledger, "cancelled"), _path(ledger, "batch")
    # A delayed job: put, running (the attempt taken), success, each under 1 KB (the sweep sends
    # it under its shard's lease and writes no job item); it ran once
    assert delayed["outcome"] == {"succeeded": jobs}
    assert delayed["per_job"]["write_units_job_items"] == 3.0
    assert delayed["calls_per_job"]["consumer: dynamodb GetItem"] == 1.0  # the fence
    # An immediate job: put and the submit path's claim, then running and success; one send each
    assert immediate["per_job"]["write_units_job_items"] == 4.0
    assert immediate["per_job"]["sqs_requests_dispatch"] == 1.0
    # A cancelled job: put and cancel, never sent
    assert cancelled["outcome"] == {"cancelled": jobs}
    assert cancelled["per_job"]["write_units_job_items"] == 2.0
    assert cancelled["per_job"]["sqs_requests_dispatch"] == 0.0
    # A batch: one API request for 25 jobs
    assert batch["per_job"]["api_requests"] == 1 / 25
    # The Dynein-style baseline: put, acquire, delete; one SendMessage per job
    dynein = ledger["dynein"]
    assert dynein["per_job"]["write_units_job_items"] == 3.0
    assert dynein["per_job"]["sqs_requests_dispatch"] == 1.0
    # And moto's own figure differs (it is not size-based), which is why the ledger sizes items
    assert delayed["per_job"]["write_units_reported_by_moto"] != 3.0
    # All in: what the functions logged was counted, and X-Ray priced, on both sides
    assert delayed["log_bytes_per_job"] > 0
    for side in ("schedule", "consume"):
        assert delayed["dollars_per_million"][side]["logs"] > 0
        assert delayed["dollars_per_million"][side]["xray"] > 0
    # A rate-limited queue adds one counter write per request: 1 per single job, 1/25 in a
    # batch; a queue with no limit none
    rate_limited, rate_limited_batch = (
        _path(ledger, "rate_limited"),
        _path(ledger, "rate_limited_batch"),
    )
    assert rate_limited["per_job"]["write_units_quota"] == 1.0
    assert rate_limited["per_job"]["write_units_job_items"] == 4.0  # a delayed job's 3, and 1
    assert rate_limited_batch["per_job"]["write_units_quota"] == pytest.approx(1 / 25)
    assert delayed["per_job"]["write_units_quota"] == batch["per_job"]["write_units_quota"] == 0
    assert [q["write_units_per_job"] for q in ledger["cost_curve"]["quota"]] == [1.0, 1 / 25]
    # And the cost curve covers 10 to 10,000 jobs a tick for the three designs
    rows = ledger["cost_curve"]["rows"]
    assert rows[0]["jobs_per_tick"] == 10 and rows[-1]["jobs_per_tick"] == 10_000
    assert all(r["sundial"] > 0 and r["dynein"] > 0 and r["eventbridge"] > 0 for r in rows)


@pytest.mark.bench
def test_an_overdue_backlog_is_sent_once_each_urgent_jobs_first(smoke_run: Path) -> None:
    results = json.loads((smoke_run / "results" / "results.json").read_text())
    recovery = results["sections"]["recovery"]["result"]
    # Every job of the swept group was sent, none twice, nothing else
    assert recovery["sent"] == recovery["group_jobs"] > 0
    assert recovery["missing"] == recovery["duplicates"] == recovery["unexpected"] == 0
    # And every critical job went before any high one, every high before any normal or low
    first, last = recovery["first_sent_index"], recovery["last_sent_index"]
    assert last["critical"] < first["high"] < first["normal"]
    assert last["high"] < min(first["normal"], first["low"])


@pytest.mark.bench
def test_the_consumer_sdk_import_loads_fewer_modules_than_the_flat_package(
    smoke_run: Path,
) -> None:
    results = json.loads((smoke_run / "results" / "results.json").read_text())
    trees = results["sections"]["sdk_import"]["result"]["trees"]
    now = trees["now"]
    assert "sundial.runs.attempts" in now["module_names"]
    assert not [m for m in now["module_names"] if m.startswith("sundial.services")]
    if "before" in trees:  # a shallow clone may not hold the earlier revision
        assert now["modules"] < trees["before"]["modules"]


@pytest.mark.bench
def test_fair_dispatch_sends_everything_never_early_and_the_cap_holds(smoke_run: Path) -> None:
    results = json.loads((smoke_run / "results" / "results.json").read_text())
    fairness = results["sections"]["fairness"]["result"]
    params = fairness["params"]
    for variant, runs in fairness["runs"].items():
        for run in runs:
            assert run["flood_sent"] == params["flood_jobs"], variant
            assert run["quiet_sent"] == params["quiet_jobs"], variant
            assert run["early"] == 0, variant
    # The cap's bound (docs/api.md, "Fair dispatch"): in any second, at most the group's share of
    # the rate plus one slot per shard of the group
    for run in fairness["runs"]["capped"]:
        bound = run["group_cap_per_second"] + fairness["group_shards"]
        assert run["flood_peak_per_second"] <= bound
