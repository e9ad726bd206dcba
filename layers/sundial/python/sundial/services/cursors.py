"""The opaque page cursors of the per-queue listings (dead letters, schedules, DAGs, jobs by
status): the queue, the listing and the sort key the next page continues after, in base64url
JSON. A cursor is accepted only by the listing and queue that returned it, exactly as written."""

from __future__ import annotations

import base64
import binascii
import json

from sundial.errors import InvalidInput

# The largest page a listing returns.
MAX_LISTING_PAGE = 100

_NOT_OURS = "not a cursor returned by this listing"


def encode_cursor(queue: str, sk: str, *, listing: str | None = None) -> str:
    """`listing`: the listing's name (and, for one whose query's range is chosen by the caller,
    that range), so one listing's cursor is refused by another."""
    fields = {"q": queue, "sk": sk} | ({"l": listing} if listing is not None else {})
    raw = json.dumps(fields, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, queue: str, *, listing: str | None = None) -> str:
    """The sort key a page cursor continues after; a cursor that is not ours is a 400."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
        sk = value["sk"]
        if value["q"] != queue or value.get("l") != listing:
            raise ValueError("cursor of another listing")
        if not isinstance(sk, str) or not sk[:13].isdigit():
            raise ValueError("not a sort key")
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        raise InvalidInput("cursor", _NOT_OURS) from None
    if encode_cursor(queue, sk, listing=listing) != cursor:
        # Only the exact text a page returned: the decoder also takes '+', '/', padding and
        # reformatted JSON, none of which this listing wrote.
        raise InvalidInput("cursor", _NOT_OURS)
    return sk
