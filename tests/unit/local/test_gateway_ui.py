"""The local runtime's gateway serves the admin UI at /ui/ and the API again under /api/ (where
the page calls it), without starting the rest of the runtime: no route is declared here, so an
API call answers the gateway's own 404, the same under /api/ as at the root."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer
from importlib import resources

import pytest

from sundial.local.gateway import Gateway


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    with ThreadPoolExecutor(max_workers=1) as pool:
        gateway = Gateway(routes=[], hosts={}, async_pool=pool)
        httpd = gateway.serve("127.0.0.1", 0)
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        yield httpd
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def get(server: ThreadingHTTPServer, path: str) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    connection.request("GET", path)
    response = connection.getresponse()
    answer = (response.status, dict(response.getheaders()), response.read())
    connection.close()
    return answer


def test_the_gateway_serves_the_ui_files_with_their_security_headers(
    server: ThreadingHTTPServer,
) -> None:
    files = resources.files("sundial.client.ui")
    for path, name, kind in [
        ("/ui/", "index.html", "text/html"),
        ("/ui/app.js", "app.js", "text/javascript"),
        ("/ui/dom.js", "dom.js", "text/javascript"),
        ("/ui/style.css", "style.css", "text/css"),
        ("/ui/favicon.svg", "favicon.svg", "image/svg+xml"),
    ]:
        status, headers, body = get(server, path)
        assert (status, body) == (200, files.joinpath(name).read_bytes()), path
        assert headers["Content-Type"].startswith(kind)
        assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert get(server, "/")[1]["Location"] == "/ui/"
    assert get(server, "/ui/server.py")[0] == 404


def test_the_api_under_api_is_the_api_at_the_root(server: ThreadingHTTPServer) -> None:
    at_root = get(server, "/queues")
    under_api = get(server, "/api/queues")
    assert at_root[0] == under_api[0] == 404
    assert json.loads(under_api[2]) == {"message": "no route GET /queues", "errors": []}
