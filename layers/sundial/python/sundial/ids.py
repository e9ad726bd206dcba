"""Job ids and table keys.

A job lives at (pk = its shard, sk = its due time + ULID). The public job id is an opaque,
URL-safe token that encodes exactly those three parts, so get and cancel address the item
directly, with no index and no scan (as Dynein does).

Token layout, 27 bytes, base64url without padding (36 characters):
    version (1) | shard (2) | due epoch ms (6) | ULID (16) | CRC-16 of the preceding bytes (2)
The checksum lets a typo be told apart from an unknown job: malformed -> 400, unknown -> 404.
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from dataclasses import dataclass

from ulid import ULID

from sundial.errors import InvalidInput

_TOKEN_VERSION = 1
_BODY = struct.Struct(">BH6s16s")  # version, shard, due ms (48-bit), ulid
_TOKEN_BYTES = _BODY.size + 2
TOKEN_LENGTH = 36
MAX_SHARDS = 65_536
MAX_DUE_MS = 10**13 - 1  # 13 zero-padded digits in the sort key: until the year 2286

SHARD_PREFIX = "shard#"
SK_DIGITS = 13


def shard_pk(shard: int) -> str:
    return f"{SHARD_PREFIX}{shard}"


def due_sk_bound(due_ms: int, *, upper: bool) -> str:
    """The lowest (or highest) sort key a job due at `due_ms` can have.

    ULIDs use Crockford base32 (0-9, A-Z); '#' < '0' and '~' > 'Z' bracket them.
    """
    return f"{due_ms:0{SK_DIGITS}d}#{'~' if upper else ''}"


@dataclass(frozen=True, slots=True)
class JobKey:
    shard: int
    due_ms: int
    ulid: str

    def __post_init__(self) -> None:
        if not 0 <= self.shard < MAX_SHARDS:
            raise ValueError(f"shard {self.shard} out of range")
        if not 0 <= self.due_ms <= MAX_DUE_MS:
            raise ValueError(f"due time {self.due_ms} out of range")

    @property
    def pk(self) -> str:
        return shard_pk(self.shard)

    @property
    def sk(self) -> str:
        return f"{self.due_ms:0{SK_DIGITS}d}#{self.ulid}"

    @property
    def job_id(self) -> str:
        body = _BODY.pack(
            _TOKEN_VERSION,
            self.shard,
            self.due_ms.to_bytes(6, "big"),
            ULID.from_str(self.ulid).bytes,
        )
        crc = zlib.crc32(body) & 0xFFFF
        return base64.urlsafe_b64encode(body + crc.to_bytes(2, "big")).decode("ascii")

    @classmethod
    def from_item_keys(cls, pk: str, sk: str) -> JobKey:
        due, _, ulid = sk.partition("#")
        return cls(shard=int(pk.removeprefix(SHARD_PREFIX)), due_ms=int(due), ulid=ulid)

    @classmethod
    def from_job_id(cls, job_id: str) -> JobKey:
        """Decode a job id. Raises InvalidInput(field="job_id") for anything malformed."""
        if len(job_id) != TOKEN_LENGTH:
            raise InvalidInput("job_id", f"malformed job id (expected {TOKEN_LENGTH} characters)")
        try:
            raw = base64.urlsafe_b64decode(job_id.encode("ascii"))
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise InvalidInput("job_id", "malformed job id (not base64url)") from None
        if len(raw) != _TOKEN_BYTES or zlib.crc32(raw[:-2]) & 0xFFFF != int.from_bytes(raw[-2:]):
            raise InvalidInput("job_id", "malformed job id (checksum mismatch)")
        version, shard, due, ulid_bytes = _BODY.unpack(raw[:-2])
        if version != _TOKEN_VERSION:
            raise InvalidInput("job_id", f"malformed job id (unknown version {version})")
        try:
            return cls(
                shard=shard, due_ms=int.from_bytes(due), ulid=str(ULID.from_bytes(ulid_bytes))
            )
        except ValueError as exc:
            raise InvalidInput("job_id", f"malformed job id ({exc})") from None
