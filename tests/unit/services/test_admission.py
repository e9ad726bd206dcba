"""Per-queue quotas (sundial.services.admission): the submission window and the payload limit,
on moto's DynamoDB with the manual clock."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from sundial.clock import ManualClock
from sundial.errors import SubmissionRateExceeded, TooLargeForQueue
from sundial.model.submission import SubmitJob
from sundial.quotas import SUBMISSIONS_PER_LANE, QueueQuota, parse_quotas, quotas_json
from sundial.services.admission import Admission, lane_count, lane_limit, largest_request
from sundial.settings import Settings
from sundial.store.submission_windows import WINDOW_TTL_S, SubmissionWindows, window_key
from tests.support import TABLE, create_table


class DynamoCalls:
    """The DynamoDB operations made through one session, in order."""

    def __init__(self, session: boto3.Session) -> None:
        self.names: list[str] = []
        session.events.register("before-call.dynamodb.*", self._record)

    def _record(self, model: Any, **_: Any) -> None:
        self.names.append(model.name)


class Lanes(random.Random):
    """An rng whose randrange answers from a script (the lanes a test wants tried)."""

    def __init__(self, *answers: int) -> None:
        super().__init__(0)
        self._answers: Iterator[int] = iter(answers)

    def randrange(self, *_: Any, **__: Any) -> int:
        return next(self._answers)


@pytest.fixture
def session(aws: None) -> boto3.Session:
    create_table(boto3.client("dynamodb"))
    return boto3.Session()


@pytest.fixture
def calls(session: boto3.Session) -> DynamoCalls:
    return DynamoCalls(session)


@pytest.fixture
def windows(session: boto3.Session, calls: DynamoCalls) -> SubmissionWindows:
    return SubmissionWindows(session.client("dynamodb"), TABLE)


def _admission(
    windows: SubmissionWindows,
    clock: ManualClock,
    rng: random.Random | None = None,
    **quotas: QueueQuota,
) -> Admission:
    return Admission(quotas=quotas, windows=windows, clock=clock, rng=rng or random.Random(7))


def _jobs(*queues: str, payload: Any = None) -> list[tuple[str, SubmitJob]]:
    return [
        (f"jobs[{i}].", SubmitJob(queue=queue, delay_seconds=60, payload=payload))
        for i, queue in enumerate(queues)
    ]


def _counted(windows: SubmissionWindows, queue: str, clock: ManualClock, lanes: int = 1) -> int:
    second = clock.now_ms() // 1000
    return sum(windows.submitted(queue=queue, lane=n, window_s=second) for n in range(lanes))


def test_the_window_fills_refuses_and_opens_again_the_next_second(
    windows: SubmissionWindows, clock: ManualClock
) -> None:
    # Given a queue that admits 3 submissions a second, 400 ms into a second
    clock.advance(ms=400)
    admission = _admission(windows, clock, email=QueueQuota(max_submissions_per_second=3))
    # When 3 jobs are admitted one by one
    for _ in range(3):
        admission.admit(_jobs("email"), count_field="")
    # Then the 4th is refused, naming the queue and the limit, with the wait to the next second
    with pytest.raises(SubmissionRateExceeded) as refused:
        admission.admit(_jobs("email"), count_field="")
    assert (refused.value.queue, refused.value.limit_per_second) == ("email", 3)
    assert refused.value.retry_after_s == 1
    assert "'email'" in str(refused.value) and "3 submissions per second" in str(refused.value)
    # And the refusal counted nothing
    assert _counted(windows, "email", clock) == 3
    # When the clock moves to 999 ms of the same second, it is still refused
    clock.advance(ms=599)
    with pytest.raises(SubmissionRateExceeded):
        admission.admit(_jobs("email"), count_field="")
    # And when it reaches the next second, the queue admits again
    clock.advance(ms=1)
    admission.admit(_jobs("email"), count_field="")
    assert _counted(windows, "email", clock) == 1


def test_a_window_expires_a_minute_after_its_second(
    windows: SubmissionWindows, clock: ManualClock, session: boto3.Session
) -> None:
    # Given one admitted submission
    _admission(windows, clock, email=QueueQuota(max_submissions_per_second=3)).admit(
        _jobs("email"), count_field=""
    )
    # Then its window item carries a TTL past its second, in the table's TTL attribute
    second = clock.now_ms() // 1000
    item = session.client("dynamodb").get_item(TableName=TABLE, Key=window_key("email", 0, second))[
        "Item"
    ]
    assert item["expires_at"] == {"N": str(second + WINDOW_TTL_S)}
    assert item["pk"] == {"S": "quota#email#0"} and item["submitted"] == {"N": "1"}


def test_a_batch_counts_each_job_and_a_refused_batch_counts_none(
    windows: SubmissionWindows, clock: ManualClock
) -> None:
    # Given a queue that admits 30 a second
    admission = _admission(windows, clock, email=QueueQuota(max_submissions_per_second=30))
    # When a batch of 25 is admitted, a batch of 6 is refused whole, and one of 5 fits
    admission.admit(_jobs(*["email"] * 25), count_field="jobs")
    with pytest.raises(SubmissionRateExceeded):
        admission.admit(_jobs(*["email"] * 6), count_field="jobs")
    admission.admit(_jobs(*["email"] * 5), count_field="jobs")
    # Then exactly the 30 admitted jobs are counted
    assert _counted(windows, "email", clock) == 30


def test_more_jobs_than_a_second_admits_is_413_without_a_call(
    windows: SubmissionWindows, clock: ManualClock, calls: DynamoCalls
) -> None:
    # Given a queue that admits 10 a second
    admission = _admission(windows, clock, email=QueueQuota(max_submissions_per_second=10))
    # When one request carries 11 of its jobs
    with pytest.raises(TooLargeForQueue) as refused:
        admission.admit(_jobs(*["email"] * 11), count_field="jobs")
    # Then it is refused as too large (no retry could pass it), naming the list and the queue
    assert refused.value.field == "jobs"
    assert "11 jobs for queue 'email'" in refused.value.reason
    assert "at most 10" in refused.value.reason
    # And nothing was called
    assert calls.names == []


def test_a_queue_with_no_limit_costs_no_call(
    windows: SubmissionWindows, clock: ManualClock, calls: DynamoCalls
) -> None:
    # Given quotas on `email` only
    limited = _admission(windows, clock, email=QueueQuota(max_submissions_per_second=1))
    # When jobs of `default` are admitted, many times over, and with no quotas at all
    for _ in range(5):
        limited.admit(_jobs("default", "default"), count_field="jobs")
    _admission(windows, clock).admit(_jobs("email"), count_field="")
    # Then no DynamoDB call was made
    assert calls.names == []
    # And a request touching the limited queue makes exactly one
    limited.admit(_jobs("default", "email"), count_field="jobs")
    assert calls.names == ["UpdateItem"]


def test_a_payload_over_its_queue_limit_is_413_and_counts_nothing(
    windows: SubmissionWindows, clock: ManualClock, calls: DynamoCalls
) -> None:
    # Given a queue that takes payloads of at most 20 bytes, and 5 submissions a second
    quota = QueueQuota(max_submissions_per_second=5, max_payload_bytes=20)
    admission = _admission(windows, clock, email=quota)
    # When the second job of a batch has a 23-byte payload ({"to":"ada@example.com"} compact)
    jobs = _jobs("email", "email")
    jobs[1] = ("jobs[1].", SubmitJob(queue="email", delay_seconds=60, payload={"to": "ab" * 7}))
    with pytest.raises(TooLargeForQueue) as refused:
        admission.admit(jobs, count_field="jobs")
    # Then the answer names the field, the size, the queue and the limit
    assert refused.value.field == "jobs[1].payload"
    assert refused.value.reason == "payload is 23 bytes; queue 'email' accepts at most 20"
    # And nothing was counted: the payload is checked before any call
    assert calls.names == []
    # And a payload of exactly 20 bytes is admitted
    admission.admit(
        [("", SubmitJob(queue="email", delay_seconds=0, payload="x" * 18))], count_field=""
    )


def test_a_refusal_on_its_second_queue_gives_the_first_its_count_back(
    windows: SubmissionWindows, clock: ManualClock
) -> None:
    # Given two limited queues, the second already full for this second
    admission = _admission(
        windows,
        clock,
        default=QueueQuota(max_submissions_per_second=5),
        email=QueueQuota(max_submissions_per_second=1),
    )
    admission.admit(_jobs("email"), count_field="")
    # When a batch for both is refused on `email`
    with pytest.raises(SubmissionRateExceeded) as refused:
        admission.admit(_jobs("default", "default", "email"), count_field="jobs")
    assert refused.value.queue == "email"
    # Then `default` has its two counts back, and all 5 are still there to take
    assert _counted(windows, "default", clock) == 0
    admission.admit(_jobs(*["default"] * 5), count_field="jobs")


def test_a_throttled_counter_is_a_full_one(clock: ManualClock, session: boto3.Session) -> None:
    # Given DynamoDB throttling the counter item (after the SDK's own retries)
    def throttle(**_: Any) -> None:
        code = "ProvisionedThroughputExceededException"
        raise ClientError({"Error": {"Code": code, "Message": "too hot"}}, "UpdateItem")

    session.events.register("before-call.dynamodb.UpdateItem", throttle)
    windows = SubmissionWindows(session.client("dynamodb"), TABLE)  # a client with the hook
    admission = _admission(windows, clock, email=QueueQuota(max_submissions_per_second=3))
    # When a job is submitted, it is refused with 429, not failed with a 5xx
    with pytest.raises(SubmissionRateExceeded):
        admission.admit(_jobs("email"), count_field="")


def test_a_limit_above_one_lane_is_split_into_lanes_that_add_up_to_it() -> None:
    # Given limits at and around a lane's capacity
    assert SUBMISSIONS_PER_LANE == 500
    # Then each is split into as few lanes as keep every lane at or under 500
    assert [lane_count(n) for n in (1, 500, 501, 1000, 1001, 10_000)] == [1, 1, 2, 2, 3, 20]
    for limit in (1, 7, 500, 501, 1001, 9_999, 10_000):
        shares = [lane_limit(limit, lane) for lane in range(lane_count(limit))]
        assert sum(shares) == limit
        assert max(shares) - min(shares) <= 1 and max(shares) <= SUBMISSIONS_PER_LANE
        # And a request may carry at most what the smallest lane admits
        assert largest_request(limit) == min(shares)


def test_a_full_lane_sends_the_request_to_one_other_lane_before_refusing(
    windows: SubmissionWindows, clock: ManualClock, calls: DynamoCalls
) -> None:
    # Given a 1,001-a-second queue (3 lanes: 334, 334, 333) whose lane 0 is full
    quota = QueueQuota(max_submissions_per_second=1001)
    second = clock.now_ms() // 1000
    assert windows.take(queue="email", lane=0, window_s=second, count=334, limit=334)
    calls.names.clear()
    # When a request draws lane 0 first, then (of the two others) the second: lane 2
    _admission(windows, clock, Lanes(0, 1), email=quota).admit(_jobs("email"), count_field="")
    # Then it is admitted there, after two calls
    assert calls.names == ["UpdateItem", "UpdateItem"]
    assert windows.submitted(queue="email", lane=2, window_s=second) == 1
    # And when lanes 0 and 1 are both full, a request drawing them is refused after two calls
    assert windows.take(queue="email", lane=1, window_s=second, count=334, limit=334)
    calls.names.clear()
    with pytest.raises(SubmissionRateExceeded) as refused:
        _admission(windows, clock, Lanes(1, 1), email=quota).admit(_jobs("email"), count_field="")
    assert refused.value.limit_per_second == 1001
    assert calls.names == ["UpdateItem", "UpdateItem"]


def test_lanes_never_admit_more_than_the_limit_in_a_second(
    windows: SubmissionWindows, clock: ManualClock
) -> None:
    # Given a 1,001-a-second queue and 15 requests of 100 jobs in one second
    admission = _admission(windows, clock, email=QueueQuota(max_submissions_per_second=1001))
    admitted = 0
    for _ in range(15):
        try:
            admission.admit(_jobs(*["email"] * 100), count_field="jobs")
            admitted += 100
        except SubmissionRateExceeded:
            pass
    # Then no lane passed its share, and what was admitted is what is counted. Each lane
    # holds 3 requests (300 of its 333 or 334): at most 900 fit, and a request is refused only
    # once both lanes it tried hold 300, so at least 600 were admitted
    second = clock.now_ms() // 1000
    counts = [windows.submitted(queue="email", lane=n, window_s=second) for n in range(3)]
    assert all(count <= lane_limit(1001, n) for n, count in enumerate(counts))
    assert sum(counts) == admitted
    assert 600 <= admitted <= 900


def test_quotas_travel_as_one_json_variable_of_the_limited_queues() -> None:
    # Given queues with and without quotas
    queues = {
        "email": QueueQuota(max_submissions_per_second=50, max_payload_bytes=1024),
        "default": QueueQuota(),
        "reports": QueueQuota(max_payload_bytes=512),
    }
    # When they are written as SUNDIAL_QUOTAS and read back by the runtime's Settings
    text = quotas_json(queues)
    assert text == (
        '{"email":{"max_payload_bytes":1024,"max_submissions_per_second":50},'
        '"reports":{"max_payload_bytes":512}}'
    )
    settings = Settings.from_env(
        {
            "SUNDIAL_TABLE_NAME": TABLE,
            "SUNDIAL_QUEUE_URLS": '{"email": "u"}',
            "SUNDIAL_QUOTAS": text,
        }
    )
    # Then only the limited queues are there, as declared
    assert settings.quotas == parse_quotas(text)
    assert settings.quotas["reports"].max_submissions_per_second is None
    assert "default" not in settings.quotas
    # And a bad value fails the cold start, naming the variable
    with pytest.raises(RuntimeError, match="SUNDIAL_"):
        Settings.from_env(
            {
                "SUNDIAL_TABLE_NAME": TABLE,
                "SUNDIAL_QUEUE_URLS": '{"email": "u"}',
                "SUNDIAL_QUOTAS": '{"email": {"max_payload_bytes": 6000000}}',
            }
        )


def _windows_from_now(
    windows: SubmissionWindows, queue: str, clock: ManualClock, seconds: int
) -> list[int]:
    first = clock.now_ms() // 1000
    return [windows.submitted(queue=queue, lane=0, window_s=first + i) for i in range(seconds)]


def test_a_call_writing_more_than_a_second_admits_is_counted_over_the_next_seconds(
    windows: SubmissionWindows, clock: ManualClock, calls: DynamoCalls
) -> None:
    # Given a queue that admits 3 a second, one of this second's taken by a submit
    admission = _admission(windows, clock, email=QueueQuota(max_submissions_per_second=3))
    admission.admit(_jobs("email"), count_field="")
    calls.names.clear()
    # When a call writes 10 jobs at once (a schedule's first occurrences)
    admission.admit_at_once("email", 10, field="rate", what="this schedule")
    # Then they fill this second's window and as many after it as they need, none skipped: one
    # read of the windows, one transaction
    assert calls.names == ["Query", "TransactWriteItems"]
    assert _windows_from_now(windows, "email", clock, 6) == [3, 3, 3, 2, 0, 0]
    # And another such call is refused, writing nothing, told when it would fit (the 4th second
    # has room for 1, and the seconds after it are free)
    with pytest.raises(SubmissionRateExceeded) as refused:
        admission.admit_at_once("email", 10, field="rate", what="this schedule")
    assert refused.value.retry_after_s == 3
    assert "this request writes 10 jobs at once" in str(refused.value)
    assert "take the quota of the next 4 seconds" in str(refused.value)
    assert _windows_from_now(windows, "email", clock, 6) == [3, 3, 3, 2, 0, 0]
    # And a submit in those seconds is refused; 3 seconds on, it fits
    clock.advance(seconds=1)
    with pytest.raises(SubmissionRateExceeded):
        admission.admit(_jobs("email"), count_field="")
    clock.advance(seconds=2)
    admission.admit(_jobs("email"), count_field="")


def test_a_call_within_a_second_is_counted_as_a_submit(
    windows: SubmissionWindows, clock: ManualClock, calls: DynamoCalls
) -> None:
    admission = _admission(windows, clock, email=QueueQuota(max_submissions_per_second=3))
    admission.admit_at_once("email", 2, field="", what="this change")
    assert calls.names == ["UpdateItem"] and _counted(windows, "email", clock) == 2
    with pytest.raises(SubmissionRateExceeded) as refused:
        admission.admit_at_once("email", 2, field="", what="this change")
    assert refused.value.retry_after_s == 1 and "at once" not in str(refused.value)
    # And a queue with no limit costs no call
    calls.names.clear()
    admission.admit_at_once("default", 50, field="", what="this change")
    assert calls.names == []


def test_more_than_100_seconds_worth_at_once_is_413_without_a_write(
    windows: SubmissionWindows, clock: ManualClock, calls: DynamoCalls
) -> None:
    # Given a queue that admits 1 a second
    admission = _admission(windows, clock, email=QueueQuota(max_submissions_per_second=1))
    # When a call would write 101 jobs at once
    with pytest.raises(TooLargeForQueue) as refused:
        admission.admit_at_once("email", 101, field="rate", what="this schedule")
    # Then it is too large for the queue (no retry could pass it), naming the field and limit
    assert refused.value.field == "rate"
    assert "this schedule writes 101 jobs at once" in refused.value.reason
    assert "at most 100 at once" in refused.value.reason
    assert calls.names == []
    # And 100 are admitted, counted over 100 seconds
    admission.admit_at_once("email", 100, field="rate", what="this schedule")
    assert _windows_from_now(windows, "email", clock, 101) == [1] * 100 + [0]


def test_a_spread_is_all_or_none(
    windows: SubmissionWindows, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a queue that admits 3 a second, and a spread that read the windows empty while
    # another spread took the third second before its transaction
    admission = _admission(windows, clock, email=QueueQuota(max_submissions_per_second=3))
    second = clock.now_ms() // 1000
    monkeypatch.setattr(windows, "counted", lambda **_: {})
    assert windows.take_many(queue="email", lane=0, takes={second + 2: 3}, limit=3)
    # When it takes its windows
    with pytest.raises(SubmissionRateExceeded):
        admission.admit_at_once("email", 9, field="rate", what="this schedule")
    # Then nothing of it was counted
    assert _windows_from_now(windows, "email", clock, 4) == [0, 0, 3, 0]
