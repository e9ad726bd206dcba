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
    # Provisioned capacity: per unit-hour (a write unit an hour is 3,600 writes of 1 KB).
    dynamodb_wcu_hour: float = 0.00065
    dynamodb_rcu_hour: float = 0.00013
    cloudwatch_logs_gb: float = 0.50  # ingested (standard class)
    xray_trace: float = 5.00 / MILLION  # recorded
    cloudwatch_custom_metric_month: float = 0.30  # first 10,000 metrics
    # The fixed, monthly items of an idle stack (bench.idle_bill), us-east-1 list prices:
    # aws.amazon.com/cloudwatch/pricing (an alarm per metric it evaluates, standard resolution;
    # a dashboard; logs stored), aws.amazon.com/kms/pricing (a customer managed key),
    # aws.amazon.com/glue/pricing (a Spark job's DPU-hour, billed per second, 1-minute minimum).
    cloudwatch_alarm_metric_month: float = 0.10
    cloudwatch_high_resolution_alarm_metric_month: float = 0.30
    cloudwatch_dashboard_month: float = 3.00
    cloudwatch_logs_stored_gb_month: float = 0.03
    kms_key_month: float = 1.00
    glue_dpu_hour: float = 0.44

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
            ("DynamoDB provisioned write / read unit", "$0.00065 / $0.00013 per unit-hour"),
            ("CloudWatch Logs ingestion", "$0.50 per GB"),
            ("X-Ray trace recorded", "$5.00 per million"),
            ("CloudWatch custom metric", "$0.30 per metric-month"),
            ("CloudWatch alarm (standard resolution)", "$0.10 per metric evaluated, a month"),
            ("CloudWatch dashboard", "$3.00 a month"),
            ("CloudWatch Logs storage", "$0.03 per GB-month"),
            ("KMS customer managed key", "$1.00 a month"),
            ("Glue Spark job", "$0.44 per DPU-hour, 1-minute minimum"),
        ]


PRICES = Prices()
