"""`python -m sundial.local` (what `make run` runs). Ports and paths come from:

- SUNDIAL_API_PORT (default 8000): the HTTP API
- SUNDIAL_EMULATOR_PORT (default 5000): the AWS emulator (moto server)
- SUNDIAL_HOST (default 127.0.0.1)
- SUNDIAL_CDK_OUT (default cdk.out): the synthesized cloud assembly
- SUNDIAL_LOG (default .sundial/local.log when on a terminal): where function logs go (and,
  while the live table is drawn, the runtime's own log lines)

`python -m sundial.local --check-ports` only checks that both ports are free (exit 2 if not).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from rich.console import Console
from rich.live import Live

from sundial.local.gateway import DEFAULT_CALLER
from sundial.local.logs import ErrorTally, log_to_file
from sundial.local.runtime import LocalConfig, LocalRuntime, PortInUse, check_ports
from sundial.local.template import TemplateError
from sundial.local.view import banner, banner_lines, gather, render

# How often the live table is redrawn (each refresh asks SQS for each queue's numbers).
REFRESH_S = 1.0


def config_from_env() -> LocalConfig:
    interactive = sys.stdout.isatty()
    log_value = os.environ.get("SUNDIAL_LOG", ".sundial/local.log" if interactive else "")
    return LocalConfig(
        assembly_dir=Path(os.environ.get("SUNDIAL_CDK_OUT", "cdk.out")),
        host=os.environ.get("SUNDIAL_HOST", "127.0.0.1"),
        api_port=int(os.environ.get("SUNDIAL_API_PORT", "8000")),
        emulator_port=int(os.environ.get("SUNDIAL_EMULATOR_PORT", "5000")),
        log_path=Path(log_value) if log_value else None,
        caller=os.environ.get("SUNDIAL_LOCAL_CALLER", DEFAULT_CALLER),
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    config = config_from_env()
    console = Console()
    if args == ["--check-ports"]:  # `make run` asks before it synthesizes anything
        try:
            check_ports(config)
        except PortInUse as error:
            console.print(f"[red]sundial: {error}[/]")
            return 2
        return 0
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("werkzeug", "botocore", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if config.log_path is not None:
        config.log_path.parent.mkdir(parents=True, exist_ok=True)
        config.log_path.write_text("")
    stopping: list[int] = []

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGHUP, request_stop)  # the terminal went away
    started = time.monotonic()
    try:
        runtime = LocalRuntime(config)
        runtime.start()
    except (PortInUse, TemplateError) as error:
        console.print(f"[red]sundial: {error}[/]")
        return 2
    startup_s = time.monotonic() - started
    log_hint = f"tail -f {config.log_path}" if config.log_path else None
    try:
        if console.is_terminal:
            _live(runtime, console, log_hint, startup_s, stopping)
        else:
            # Plain lines, never wrapped: commands stay copy-paste safe in a log or a pipe.
            lines = banner_lines(config, runtime.job_queue_urls(), log_hint)
            print("Sundial is running locally", *lines, sep="\n")
            # Parsable lines for scripts and tests that start the runtime.
            ready = f"api={config.api_url} emulator={config.emulator_url} startup_s={startup_s:.2f}"
            print(f"SUNDIAL_READY {ready}", flush=True)
            while not stopping:
                time.sleep(0.2)
    finally:
        console.print("stopping…")
        stop_started = time.monotonic()
        runtime.stop()
        console.print(f"stopped in {time.monotonic() - stop_started:.1f} s")
    return 0


def _live(
    runtime: LocalRuntime,
    console: Console,
    log_hint: str | None,
    startup_s: float,
    stopping: list[int],
) -> None:
    """The banner once, then the live table until a signal. While the table is drawn, every
    log line (tracebacks too) goes to the log file, never between the table's lines."""
    errors: ErrorTally | None = None
    if runtime.config.log_path is not None:
        errors = log_to_file(runtime.config.log_path)
    queues = runtime.job_queue_urls()
    for line in banner(runtime.config, queues, log_hint, startup_s):
        console.print(line, soft_wrap=True)
    sqs = runtime.session.client("sqs", endpoint_url=runtime.config.emulator_url)
    with Live(render(gather(runtime, sqs, errors)), console=console, auto_refresh=False) as live:
        while not stopping:
            time.sleep(REFRESH_S)
            try:
                state = gather(runtime, sqs, errors)
            except Exception:  # the emulator busy or stopping: keep the last picture
                logging.getLogger("sundial.local").exception("live table: could not refresh")
                continue
            live.update(render(state), refresh=True)


if __name__ == "__main__":
    sys.exit(main())
