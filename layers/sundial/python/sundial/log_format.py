"""The shape of every function's JSON log line: Powertools' structured log without the keys
that only repeat what CloudWatch already files each line under.

Powertools' `inject_lambda_context` adds the function's name, ARN and memory size to every
line. A function's lines land in its own log group, whose name carries the function's name,
and each invocation's REPORT line (joined to the lines by the request id) gives its memory, so
those keys tell an operator nothing the line's place does not; they are about 130 bytes of
every line, the largest part of a short one, and CloudWatch Logs bills each byte ingested.
What an operator needs to follow one request stays: the request id (it joins the line to
Lambda's REPORT line), the correlation id, the cold-start flag, the level, the location, the
timestamp and the message.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.logging.types import PowertoolsLogRecord

REDUNDANT_KEYS = frozenset({"function_name", "function_arn", "function_memory_size"})


class LeanFormatter(LambdaPowertoolsFormatter):
    """Powertools' JSON formatter, leaving out `dropped` (the keys above)."""

    dropped: frozenset[str] = REDUNDANT_KEYS

    def serialize(self, log: dict[str, Any] | PowertoolsLogRecord) -> str:
        kept = {key: value for key, value in log.items() if key not in self.dropped}
        return super().serialize(kept)
