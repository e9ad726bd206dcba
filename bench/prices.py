"""The price table every dollar figure uses: us-east-1, on demand, no free tier."""

from __future__ import annotations

from dataclasses import dataclass

MILLION = 1_000_000


@dataclass(frozen=True)
class Prices:
    dynamodb_write_unit: float = 0.625 / MILLION
    dynamodb_read_unit: float = 0.125 / MILLION
    sqs_request: float = 0.40 / MILLION  # per 64 KB chunk of a request's payload
    lambda_request: float = 0.20 / MILLION
    # The issue names "GB-seconds" without a rate: this is the published Lambda price for
    # arm64 (the functions' architecture) in us-east-1, first pricing tier.
    lambda_gb_second: float = 0.0000133334
    api_gateway_http_request: float = 1.00 / MILLION
    eventbridge_scheduler_invocation: float = 1.00 / MILLION

    def rows(self) -> list[tuple[str, str]]:
        """The table as BENCHMARKS.md prints it."""
        return [
            ("DynamoDB on-demand write unit", "$0.625 per million"),
            ("DynamoDB on-demand read unit", "$0.125 per million"),
            ("SQS request (each 64 KB chunk of a payload is one request)", "$0.40 per million"),
            ("Lambda request", "$0.20 per million"),
            ("Lambda duration, arm64", f"${self.lambda_gb_second:.10f} per GB-second"),
            ("API Gateway HTTP API request", "$1.00 per million"),
            ("EventBridge Scheduler invocation (baseline model)", "$1.00 per million"),
        ]


PRICES = Prices()
