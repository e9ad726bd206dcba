"""The AWS latencies the models assume, in one place, from AWS documentation:

- DynamoDB: "consistent single-digit millisecond response times at any scale" (DynamoDB
  developer guide, introduction). Modelled as 5 ms for a single-item request or a Query page,
  10 ms for a batch request (BatchWriteItem of up to 25, BatchGetItem of up to 100).
- SQS: "typical latencies for SendMessage, ReceiveMessage, and DeleteMessage API requests are
  in the tens or low hundreds of milliseconds" (SQS developer guide). Modelled as 20 ms.
- Lambda Invoke with InvocationType=Event returns once the event is queued: modelled as 20 ms.
- API Gateway HTTP API adds its own integration overhead in front of the function: modelled
  as 10 ms.

These are medians for a model, not measurements: the benchmarks measure Sundial's own time
(CPU against a zero-latency stub, or wall time minus the emulator's share) and add these.
"""

from __future__ import annotations

DYNAMODB_ITEM_MS = 5.0
DYNAMODB_BATCH_MS = 10.0
SQS_MS = 20.0
LAMBDA_INVOKE_MS = 20.0
API_GATEWAY_MS = 10.0
# Lambda allocates CPU in proportion to memory, one vCPU at 1,769 MB (Lambda developer guide,
# "Configure function memory"): a function with less runs its own code that much slower.
ONE_VCPU_MB = 1_769


def vcpu_share(memory_mb: int) -> float:
    return min(1.0, memory_mb / ONE_VCPU_MB)


_BY_OPERATION = {
    ("dynamodb", "BatchWriteItem"): DYNAMODB_BATCH_MS,
    ("dynamodb", "BatchGetItem"): DYNAMODB_BATCH_MS,
    ("lambda", "Invoke"): LAMBDA_INVOKE_MS,
}
_BY_SERVICE = {"dynamodb": DYNAMODB_ITEM_MS, "sqs": SQS_MS, "lambda": LAMBDA_INVOKE_MS}


def modelled_ms(service: str, operation: str) -> float:
    """The modelled AWS latency of one call."""
    return _BY_OPERATION.get((service, operation), _BY_SERVICE.get(service, SQS_MS))


def assumptions() -> list[tuple[str, str, str]]:
    """(what, modelled, source) rows for BENCHMARKS.md."""
    return [
        (
            "DynamoDB single-item request or Query page",
            f"{DYNAMODB_ITEM_MS:.0f} ms",
            "DynamoDB developer guide: single-digit millisecond latency at any scale",
        ),
        (
            "DynamoDB BatchWriteItem / BatchGetItem",
            f"{DYNAMODB_BATCH_MS:.0f} ms",
            "as above, for a request of up to 25 / 100 items",
        ),
        (
            "SQS SendMessage(Batch), ReceiveMessage, DeleteMessage(Batch)",
            f"{SQS_MS:.0f} ms",
            "SQS developer guide: typical latencies in the tens of milliseconds",
        ),
        ("Lambda async Invoke", f"{LAMBDA_INVOKE_MS:.0f} ms", "returns once the event is queued"),
        ("API Gateway HTTP API overhead", f"{API_GATEWAY_MS:.0f} ms", "model assumption"),
    ]
