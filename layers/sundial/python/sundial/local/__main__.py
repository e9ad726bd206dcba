"""`python -m sundial.local` (what `make run` runs). Ports and paths come from:

- SUNDIAL_API_PORT (default 8000): the HTTP API
- SUNDIAL_EMULATOR_PORT (default 5000): the AWS emulator (moto server)
- SUNDIAL_HOST (default 127.0.0.1)
- SUNDIAL_CDK_OUT (default cdk.out): the synthesized cloud assembly
- SUNDIAL_LOG (default .sundial/local.log when on a terminal): where function logs go
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
from sundial.local.runtime import LocalConfig, LocalRuntime, PortInUse
from sundial.local.template import TemplateError
from sundial.local.view import banner, banner_lines, live_group


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


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("werkzeug", "botocore", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    config = config_from_env()
    if config.log_path is not None:
        config.log_path.parent.mkdir(parents=True, exist_ok=True)
        config.log_path.write_text("")
    console = Console()
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
            dynamodb = runtime.session.client("dynamodb", endpoint_url=config.emulator_url)
            sqs = runtime.session.client("sqs", endpoint_url=config.emulator_url)
            console.print(banner(runtime, log_hint))
            console.print(f"started in {startup_s:.1f} s")
            with Live(
                live_group(runtime, dynamodb, sqs),
                console=console,
                refresh_per_second=2,
            ) as live:
                while not stopping:
                    time.sleep(0.5)
                    live.update(live_group(runtime, dynamodb, sqs))
        else:
            # Plain lines, never wrapped: commands stay copy-paste safe in a log or a pipe.
            print("Sundial is running locally", *banner_lines(runtime, log_hint), sep="\n")
            # Parsable lines for scripts and tests that start the runtime.
            ready = f"api={config.api_url} emulator={config.emulator_url} startup_s={startup_s:.2f}"
            print(f"SUNDIAL_READY {ready}", flush=True)
            while not stopping:
                time.sleep(0.2)
    finally:
        console.print("stopping…")
        runtime.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
