"""The raw history line is one contract with two sides: the history Lambda's pydantic model
and the Glue jobs' column list (and the synthetic generator writes it too)."""

from __future__ import annotations

from sundial.history.capture import HistoryEvent, is_job_key
from sundial_history.columns import RAW_EVENT, names
from sundial_history.synthetic import generate_events


def test_the_lambda_writes_the_columns_the_glue_jobs_read() -> None:
    assert list(HistoryEvent.model_fields) == names(RAW_EVENT)


def test_synthetic_events_are_valid_history_lines() -> None:
    events = list(generate_events(4_000, days=2))
    for event in events:
        HistoryEvent.model_validate(event)
    statuses = {e["to_status"] for e in events}
    assert statuses >= {"pending", "queued", "succeeded", "failed", "dead", "cancelled"}
    # every status a job is inserted with: pending, blocked (a DAG child), cancelled (a
    # schedule occurrence written already cancelled)
    inserted = {e["to_status"] for e in events if e["from_status"] is None}
    assert inserted == {"pending", "blocked", "cancelled"}
    assert any(e["released_at_ms"] for e in events if e["to_status"] == "succeeded")
    assert any(e["from_status"] == "dead" for e in events)  # a hand retry
    assert any(e["dag_id"] for e in events)
    assert any(e["schedule_id"] for e in events)
    assert len({e["event_id"] for e in events}) < len(events)  # some redelivered


def test_job_items_are_recognised_positively() -> None:
    ulid = "01KAKZ9Q2X8Q9JZ8W7M5N4P3R2"
    assert is_job_key("shard#0", f"1795276800000#{ulid}")
    assert is_job_key("shard#4095", f"0000000000000#{ulid}")
    for pk, sk in [
        ("shard#1", "cursor"),
        ("meta", "shards"),
        ("idem#abc", "idem"),
        ("dead#email", f"1795276800000#{ulid}"),
        ("shard#x", f"1795276800000#{ulid}"),
        ("shard#1", f"179527680000#{ulid}"),  # 12 digits
        ("shard#1", f"1795276800000#{ulid.lower()}"),
        ("shard#1", f"1795276800000#{ulid}#dag"),
    ]:
        assert not is_job_key(pk, sk), (pk, sk)
