"""Run Sundial jobs outside Lambda: the worker's public surface (sundial.runs.worker holds it).

    from sundial.worker import Worker
    Worker(send_report, queue="reports", api_url="https://abc.execute-api...").run()

or from a shell: `python -m sundial.worker --api URL --queue reports mypackage.jobs:send_report`.
"""

from __future__ import annotations

from sundial.runs.worker import ApiError, HttpTransport, JobFunction, Worker, main
from sundial.transport.envelope import Envelope

__all__ = ["ApiError", "Envelope", "HttpTransport", "JobFunction", "Worker", "main"]

if __name__ == "__main__":
    main()
