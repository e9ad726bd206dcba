"""The admin web UI: static files (HTML, CSS, vanilla JavaScript) shipped as package data, and
the rules both of its servers follow (`sundial ui`, in server.py, and the local runtime's
gateway at /ui/).

The page calls the API at `/api/...` on its own origin; each server passes such a request on
to the API (the local gateway as one of its own routes, `sundial ui` signed with the user's
credentials). Nothing is fetched from anywhere else: no CDN, no build step.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

UI_PREFIX = "/ui/"
API_PREFIX = "/api"
# Sent by the page on every API call. A cross-origin page cannot add it without a CORS
# preflight, which neither server answers: so another site open in the same browser cannot
# make the UI's server act (pause a queue, purge letters) with the user's credentials.
UI_HEADER = "X-Sundial-UI"

_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
# The page runs only its own script and style and talks only to its own origin; API data is
# rendered as text (never as HTML), and this policy is the second line behind that.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    content_type: str


def asset(path: str) -> Asset | None:
    """The static file a /ui/ path names (`/ui/` itself: index.html), or None. Only the files
    of this package's directory are served: no subdirectories, no dot files."""
    name = path.removeprefix(UI_PREFIX) or "index.html"
    suffix = name[name.rfind(".") :] if "." in name else ""
    if "/" in name or "\\" in name or name.startswith(".") or suffix not in _CONTENT_TYPES:
        return None
    resource = resources.files(__package__).joinpath(name)
    if not resource.is_file():
        return None
    return Asset(resource.read_bytes(), _CONTENT_TYPES[suffix])
