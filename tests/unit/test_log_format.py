"""Every function's JSON log line (sundial.log_format): Powertools' keys that repeat the log
group and stream are left out; what follows one request stays."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

from aws_lambda_powertools import Logger

from sundial.log_format import LeanFormatter
from tests.support import FakeLambdaContext


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_line_keeps_the_request_and_drops_what_the_log_group_says() -> None:
    # Given a function's logger with the lean formatter, its context injected
    stream = io.StringIO()
    logger = Logger(
        service="log-format-test",
        logger_formatter=LeanFormatter(),
        logger_handler=logging.StreamHandler(stream),
    )

    @logger.inject_lambda_context
    def handler(event: dict[str, Any], context: Any) -> None:
        logger.info("sweep done", extra={"shards": 8})

    # When it logs a line
    handler({}, FakeLambdaContext())
    # Then the line has the request id, the message and its extras, and not the function's
    # name, ARN or memory size
    (line,) = _lines(stream)
    assert line["function_request_id"] == FakeLambdaContext.aws_request_id
    assert (line["message"], line["shards"], line["level"]) == ("sweep done", 8, "INFO")
    assert "cold_start" in line
    assert not {"function_name", "function_arn", "function_memory_size"} & set(line)
