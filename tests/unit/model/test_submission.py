from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sundial.model.payloads import MAX_STORED_PAYLOAD_BYTES as LIMIT
from sundial.model.submission import SubmitBatch, SubmitJob, parse_rfc3339

NOW = 1_763_726_400_000  # 2025-11-21T12:00:00Z


def _fields(error: ValidationError) -> set[str]:
    fields = set()
    for item in error.errors():
        fields.add(".".join(str(p) for p in item["loc"]) or str((item.get("ctx") or {})["field"]))
    return fields


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"payload": {}}, "queue"),
        ({"queue": "default"}, "run_at"),  # neither time
        ({"queue": "default", "run_at": "2026-01-01T00:00:00Z", "delay_seconds": 5}, "run_at"),
        ({"queue": "default", "run_at": "tomorrow"}, "run_at"),
        ({"queue": "default", "run_at": "2026-01-01T00:00:00"}, "run_at"),  # no offset
        ({"queue": "default", "run_at": "2026-02-30T00:00:00Z"}, "run_at"),
        ({"queue": "default", "run_at": 1767225600}, "run_at"),
        ({"queue": "default", "delay_seconds": -1}, "delay_seconds"),
        ({"queue": "default", "delay_seconds": "10"}, "delay_seconds"),
        ({"queue": "default", "delay_seconds": 1.5}, "delay_seconds"),
        ({"queue": "default", "delay_seconds": True}, "delay_seconds"),
        ({"queue": "default", "delay_seconds": 0, "priority": "urgent"}, "priority"),
        ({"queue": "default", "delay_seconds": 0, "max_attempts": 0}, "max_attempts"),
        ({"queue": "default", "delay_seconds": 0, "idempotency_key": ""}, "idempotency_key"),
        ({"queue": "default", "delay_seconds": 0, "idempotency_key": "a b"}, "idempotency_key"),
        ({"queue": "default", "delay_seconds": 0, "colour": "red"}, "colour"),
        (
            {"queue": "default", "delay_seconds": 0, "payload": "x" * LIMIT},
            "payload",
        ),
    ],
)
def test_bad_submissions_name_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        SubmitJob.model_validate(body)
    assert field in _fields(raised.value)


def test_payload_limit_is_on_serialized_bytes() -> None:
    # Given a payload exactly at the limit once serialized ("..." adds two quote bytes)
    at_limit = "x" * (LIMIT - 2)
    # Then it is accepted, and one byte more is not
    SubmitJob(queue="default", delay_seconds=0, payload=at_limit)
    with pytest.raises(ValidationError):
        SubmitJob(queue="default", delay_seconds=0, payload=at_limit + "x")


@pytest.mark.parametrize(
    ("text", "expected_ms"),
    [
        ("2025-11-21T12:00:00Z", NOW),
        ("2025-11-21t12:00:00z", NOW),
        ("2025-11-21T13:00:00+01:00", NOW),
        ("2025-11-21T12:00:00.250Z", NOW + 250),
        ("2025-11-21T12:00:00.123456789Z", NOW + 123),
    ],
)
def test_rfc3339_forms(text: str, expected_ms: int) -> None:
    assert parse_rfc3339(text) == expected_ms


def test_due_time_from_delay_or_run_at_and_a_past_time_means_now() -> None:
    assert SubmitJob(queue="q", delay_seconds=90).due_ms(NOW) == NOW + 90_000
    assert SubmitJob(queue="q", run_at="2025-11-21T12:00:05Z").due_ms(NOW) == NOW + 5000
    assert SubmitJob(queue="q", run_at="2000-01-01T00:00:00Z").due_ms(NOW) == NOW


def test_fingerprint_ignores_the_key_but_not_the_content() -> None:
    a = SubmitJob(queue="q", delay_seconds=5, payload={"a": 1, "b": 2}, idempotency_key="k1")
    same = SubmitJob(queue="q", delay_seconds=5, payload={"b": 2, "a": 1}, idempotency_key="k2")
    other = SubmitJob(queue="q", delay_seconds=6, payload={"a": 1, "b": 2}, idempotency_key="k1")
    assert a.fingerprint() == same.fingerprint() != other.fingerprint()


def test_batch_takes_1_to_25_jobs() -> None:
    job = {"queue": "default", "delay_seconds": 1}
    SubmitBatch.model_validate({"jobs": [job] * 25})
    for size in (0, 26):
        with pytest.raises(ValidationError) as raised:
            SubmitBatch.model_validate({"jobs": [job] * size})
        assert "jobs" in _fields(raised.value)
