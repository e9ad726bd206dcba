"""`sundial ui`: serve the admin web UI on the loopback interface, passing its calls on to the
API through the client (sundial.client.ui.server)."""

from __future__ import annotations

import argparse
import webbrowser
from typing import Any

from sundial.client.cli.options import UsageError, common_options
from sundial.client.client import SundialClient
from sundial.client.output import Output
from sundial.client.ui.server import DEFAULT_PORT as DEFAULT_UI_PORT
from sundial.client.ui.server import UiServer

UI_DESCRIPTION = """\
Serve the admin web UI at http://127.0.0.1:PORT/ui/ (--open opens it in your browser): queues
(depth, pause/resume), dead letters (browse, inspect, replay, purge), and jobs, schedules and
DAGs by id (cancel, retry, pause/resume; a DAG drawn with each node's status).

The page never talks to the API itself: this command passes its calls on, SigV4-signed with
your AWS credentials for an https API (as every other command), so the API stays closed to
browsers. It listens on the loopback interface only, answers only its own page (Host, Origin
and a header a foreign site cannot send), and passes on only the API routes the UI uses.
"""


def _ui(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    try:
        server = UiServer(client.transport, port=args.port)
    except OSError as error:
        raise UsageError(
            f"cannot listen on 127.0.0.1:{args.port} ({error.strerror}): give another --port"
        ) from None
    how = "signed with your AWS credentials" if client.api_url.startswith("https:") else "unsigned"
    out.line(f"Sundial admin UI: {server.url}")
    out.line(f"API: {client.api_url} ({how}); Ctrl-C stops the UI")
    if args.open:
        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        out.line("stopped")
    finally:
        server.httpd.server_close()


def add_ui(groups: Any) -> None:
    """Adds `sundial ui` and its commands to the parser's `groups`."""
    ui = groups.add_parser(
        "ui",
        help="the admin web UI on 127.0.0.1 (it signs the API calls with your credentials)",
        description=UI_DESCRIPTION,
        epilog=f"Example: sundial ui --api https://sundial.example.com --port {DEFAULT_UI_PORT}",
        parents=[common_options(output=False)],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ui.add_argument(
        "--port",
        type=int,
        default=DEFAULT_UI_PORT,
        help=f"the local port (default {DEFAULT_UI_PORT}; 0 picks a free one)",
    )
    ui.add_argument("--open", action="store_true", help="open the UI in your web browser")
    ui.set_defaults(command=_ui, json=False)
