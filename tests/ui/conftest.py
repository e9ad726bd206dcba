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
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, Page, ViewportSize, expect, sync_playwright

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
    parallel requests in threads, so the in-process handlers take them one by one.

    `hold(method, path)` makes that request wait (outside the lock: the page's other requests
    go on) until the returned event is set: a slow action, without sleeping."""

    def __init__(self, inner: InProcessApi) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self.held: dict[tuple[str, str], threading.Event] = {}

    def hold(self, method: str, path: str) -> threading.Event:
        gate = self.held[(method, path)] = threading.Event()
        return gate

    def __call__(self, request: ApiRequest) -> ApiResponse:
        gate = self.held.get((request.method, request.path))
        if gate is not None:
            gate.wait(timeout=60)
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
def page(
    browser: Browser, ui_server: UiServer, upstream: OneAtATime, deps: Dependencies
) -> Iterator[Page]:
    """A fresh page; a dialog (confirm) is accepted, as a person clicking OK would. Every
    response the UI's server gives is recorded: none of its own files may be missing."""
    context = browser.new_context(viewport=VIEWPORT)
    new_page = context.new_page()
    new_page.on("dialog", lambda dialog: dialog.accept())
    errors: list[str] = []
    missing: list[str] = []
    new_page.on("pageerror", lambda error: errors.append(str(error)))
    new_page.on(
        "response",
        lambda response: (
            missing.append(response.url)
            if response.status == 404 and "/api/" not in response.url
            else None
        ),
    )
    yield new_page
    context.close()
    for gate in upstream.held.values():
        gate.set()
    upstream.held.clear()
    assert errors == [], f"the page's script failed: {errors}"
    assert missing == [], f"the page asked for files its server does not have: {missing}"


# What the DOM writes when code hands it something that is not text: never for a person.
NOT_FOR_PEOPLE = re.compile(r"\bnull\b|\bundefined\b|\[object|\bNaN\b")


def assert_reads_well(page: Page) -> str:
    """The page's visible text has no null, undefined, [object …] or NaN; returns the text."""
    text = page.locator("body").inner_text()
    assert NOT_FOR_PEOPLE.findall(text) == [], text
    return text


def no_horizontal_overflow(page: Page) -> bool:
    """Nothing on the page is wider than the window (a wide table or graph scrolls in its box)."""
    return bool(
        page.evaluate(
            "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        )
    )


def screenshot(page: Page, name: str) -> None:
    """Writes docs/screenshots/<name>.png when SUNDIAL_UI_SCREENSHOTS names the folder."""
    folder = os.environ.get("SUNDIAL_UI_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def open_page(page: Page, ui_server: UiServer, hash_path: str) -> str:
    """Open a page and wait until it is shown; returns its visible text (which reads well)."""
    page.goto(f"{ui_server.url}#{hash_path}")
    expect(page.locator("body")).to_have_attribute("data-ready", f"#{hash_path}")
    return assert_reads_well(page)


def click(page: Page, action: str, then_shown: Locator, text: str) -> None:
    """Click the page's `action` button and wait until `then_shown` reads `text`."""
    page.locator(f"button[data-action={action}]").click()
    expect(then_shown).to_have_text(text)
    assert_reads_well(page)
