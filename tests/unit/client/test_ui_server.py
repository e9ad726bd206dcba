"""`sundial ui`'s server without a browser: what it serves, what it passes on to the API and
what it refuses (the refusals must not reach the API at all)."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from sundial.client.cli import main
from sundial.client.transport import ApiRequest, ApiResponse, TransportFailure
from sundial.client.ui import UI_HEADER
from sundial.client.ui.server import PROXIED_ROUTES, UiServer

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens
OPENAPI = Path(__file__).resolve().parents[3] / "openapi.json"


class Recording:
    """The API's side: records what reaches it and answers 200 with a fixed body."""

    def __init__(self) -> None:
        self.requests: list[ApiRequest] = []

    def __call__(self, request: ApiRequest) -> ApiResponse:
        self.requests.append(request)
        return ApiResponse(200, {"Retry-After": "3"}, b'{"queues": []}')


@pytest.fixture
def upstream() -> Recording:
    return Recording()


@pytest.fixture
def server(upstream: Recording) -> Iterator[UiServer]:
    started = UiServer(upstream, port=0)
    started.start()
    yield started
    started.stop()


def request(
    server: UiServer,
    method: str,
    path: str,
    *,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request(method, path, body=body, headers={UI_HEADER: "1", **(headers or {})})
    response = connection.getresponse()
    answer = (response.status, dict(response.getheaders()), response.read())
    connection.close()
    return answer


def test_the_package_data_holds_the_page_its_script_and_style() -> None:
    files = resources.files("sundial.client.ui")
    for name in ("index.html", "dom.js", "pages.js", "jobs.js", "lists.js", "app.js", "style.css"):
        assert files.joinpath(name).is_file(), name
    page = files.joinpath("index.html").read_text()
    assert '<script src="app.js"' in page and 'href="style.css"' in page
    assert "http://" not in page and "https://" not in page  # no CDN: nothing off this origin


def test_the_pyproject_ships_the_ui_files_as_package_data() -> None:
    text = (OPENAPI.parent / "pyproject.toml").read_text()
    assert '"sundial.client.ui" = ["*.html", "*.css", "*.js", "*.svg"]' in text


def test_it_serves_every_file_the_page_names_and_the_favicon(server: UiServer) -> None:
    # The page's scripts, style and icon (a missing icon is a 404 on every load)
    page = resources.files("sundial.client.ui").joinpath("index.html").read_text()
    named = re.findall(r'(?:src|href)="([a-z]+\.(?:js|css|svg))"', page)
    assert {"favicon.svg", "style.css", "dom.js", "app.js"} <= set(named)
    for name in named:
        status, headers, body = request(server, "GET", f"/ui/{name}")
        assert status == 200 and body, name
    status, headers, body = request(server, "GET", "/ui/favicon.svg")
    assert headers["Content-Type"] == "image/svg+xml" and body.lstrip().startswith(b"<svg")


def test_it_listens_on_the_loopback_interface_only(server: UiServer) -> None:
    assert server.httpd.server_address[0] == "127.0.0.1"
    assert server.url == f"http://127.0.0.1:{server.port}/ui/"


def test_it_serves_the_page_with_a_strict_content_security_policy(server: UiServer) -> None:
    status, headers, body = request(server, "GET", "/ui/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert body == resources.files("sundial.client.ui").joinpath("index.html").read_bytes()
    assert request(server, "GET", "/")[1]["Location"] == "/ui/"
    for outside in ("/ui/../server.py", "/ui/__init__.py", "/ui/.hidden.js", "/etc/passwd"):
        assert request(server, "GET", outside)[0] == 404, outside


def test_an_api_call_is_passed_on_with_its_method_path_query_and_body(
    server: UiServer, upstream: Recording
) -> None:
    status, headers, body = request(
        server, "POST", "/api/queues/email/dead/replay?x=1", body=b'{"limit": 5}'
    )
    assert (status, json.loads(body), headers["Retry-After"]) == (200, {"queues": []}, "3")
    [passed] = upstream.requests
    assert (passed.method, passed.path, dict(passed.query), passed.body) == (
        "POST",
        "/queues/email/dead/replay",
        {"x": "1"},
        b'{"limit": 5}',
    )


@pytest.mark.parametrize(
    ("method", "path", "headers", "status"),
    [
        ("PUT", "/api/queues", {}, 405),
        ("OPTIONS", "/api/queues", {"Origin": "https://evil.example"}, 405),
        ("HEAD", "/ui/", {}, 405),
        ("POST", "/api/jobs", {}, 404),  # an API route the UI does not use
        ("GET", "/api/queues/email/lease", {}, 404),
        ("GET", "/api/queues", {UI_HEADER: ""}, 403),  # a plain cross-site request
        ("GET", "/api/queues", {"Origin": "https://evil.example"}, 403),
        ("GET", "/api/queues", {"Host": "evil.example"}, 403),  # DNS rebinding
        ("POST", "/api/queues/email/pause", {"Content-Length": str(2 * 1024 * 1024)}, 413),
    ],
)
def test_what_it_refuses_never_reaches_the_api(  # noqa: PLR0917 - parametrized
    server: UiServer,
    upstream: Recording,
    method: str,
    path: str,
    headers: dict[str, str],
    status: int,
) -> None:
    got, _, body = request(server, method, path, headers=headers)
    assert got == status
    if method != "HEAD":
        assert json.loads(body)["message"]
    assert upstream.requests == []


def test_no_answer_from_the_api_is_a_502_saying_so() -> None:
    def unreachable(request: ApiRequest) -> ApiResponse:
        raise TransportFailure("cannot connect to https://api.example", sent=False)

    server = UiServer(unreachable, port=0)
    server.start()
    try:
        status, _, body = request(server, "GET", "/api/queues")
    finally:
        server.stop()
    assert status == 502 and "cannot connect" in json.loads(body)["message"]


def test_the_routes_it_passes_on_are_the_apis_own() -> None:
    document = json.loads(OPENAPI.read_text())
    operations = {(m.upper(), path) for path, ops in document["paths"].items() for m in ops}
    assert set(PROXIED_ROUTES) <= operations


def test_sundial_ui_help_says_what_it_serves_and_how_it_is_kept_safe(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["ui", "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for words in (
        "http://127.0.0.1:PORT/ui/",
        "loopback interface only",
        "SigV4-signed with your AWS credentials",
        "--port PORT the local port (default 8766",
        "--open",
        "dead letters (browse, inspect, replay, purge)",
    ):
        assert words in text, words


def test_sundial_ui_starts_serves_the_page_and_names_its_url() -> None:
    process = subprocess.Popen(
        [*[sys.executable, "-m", "sundial.client.cli"], "ui", "--port", "0", "--api", UNREACHABLE],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("Sundial admin UI: http://127.0.0.1:"), first
        assert "(unsigned)" in process.stdout.readline()
        port = int(first.rsplit(":", 1)[1].split("/")[0])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/ui/dom.js")
        response = connection.getresponse()
        assert response.status == 200 and b"X-Sundial-UI" in response.read()
        # The API is unreachable: the page is told so, as the API's error shape
        connection.request("GET", "/api/queues", headers={UI_HEADER: "1"})
        unreachable = connection.getresponse()
        assert unreachable.status == 502 and json.loads(unreachable.read())["errors"] == []
        connection.close()
    finally:
        process.terminate()
        process.wait(timeout=10)
