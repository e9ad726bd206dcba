"""The admin UI in a real headless Chromium (Debian's `chromium`, driven by Playwright).

One browser for the whole directory; the UI's own server (`sundial ui`'s) in a thread, its
upstream the real API handlers under moto through the in-process API Gateway transport, so a
click goes page → UI server → handler → moto, and each test asserts the API's state after it.

`make test` installs chromium with apt where it can (root or passwordless sudo); these tests
skip, saying so, only when no Chromium can be found. SUNDIAL_CHROMIUM names another binary.
SUNDIAL_UI_SCREENSHOTS=DIR writes the screenshots of docs/client.md there (`make ui-screenshots`).
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, ViewportSize, sync_playwright

from sundial.client import SundialClient
from sundial.client.transport import ApiRequest, ApiResponse
from sundial.client.ui.server import UiServer
from sundial.wiring import Dependencies
from tests.inprocess_api import InProcessApi

# Flags for a sandbox-less container without a GPU, and no network traffic of its own.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT: ViewportSize = {"width": 1280, "height": 560}


def find_chromium() -> str | None:
    named = os.environ.get("SUNDIAL_CHROMIUM")
    if named:
        return named
    for candidate in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(candidate)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


class OneAtATime:
    """Lambda runs one event at a time per instance; the UI's server answers the page's
    parallel requests in threads, so the in-process handlers take them one by one."""

    def __init__(self, inner: InProcessApi) -> None:
        self.inner = inner
        self._lock = threading.Lock()

    def __call__(self, request: ApiRequest) -> ApiResponse:
        with self._lock:
            return self.inner(request)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    executable = find_chromium()
    if executable is None:
        pytest.skip(
            "no Chromium found (looked for chromium, chromium-browser, google-chrome and "
            "$SUNDIAL_CHROMIUM): `apt-get install chromium` (make test does it as root or "
            "with passwordless sudo) to run the admin UI's browser tests"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def upstream() -> OneAtATime:
    return OneAtATime(InProcessApi())


@pytest.fixture(scope="session")
def ui_server(upstream: OneAtATime) -> Iterator[UiServer]:
    server = UiServer(upstream, port=0)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def sundial(deps: Dependencies, upstream: OneAtATime) -> SundialClient:
    """The API as the tests see it (the same handlers and moto as the UI's)."""
    return SundialClient(transport=upstream, sleep=lambda seconds: None)


@pytest.fixture
def page(browser: Browser, ui_server: UiServer, deps: Dependencies) -> Iterator[Page]:
    """A fresh page; a dialog (confirm) is accepted, as a person clicking OK would."""
    context = browser.new_context(viewport=VIEWPORT)
    new_page = context.new_page()
    new_page.on("dialog", lambda dialog: dialog.accept())
    errors: list[str] = []
    new_page.on("pageerror", lambda error: errors.append(str(error)))
    yield new_page
    context.close()
    assert errors == [], f"the page's script failed: {errors}"


def screenshot(page: Page, name: str) -> None:
    """Writes docs/screenshots/<name>.png when SUNDIAL_UI_SCREENSHOTS names the folder."""
    folder = os.environ.get("SUNDIAL_UI_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)
