"""Job ids and table keys.

A job lives at (pk = its shard, sk = its due time + ULID). The public job id is an opaque,
URL-safe token that encodes exactly those three parts, so get and cancel address the item
directly, with no index and no scan (as Dynein does).

Token layout, 27 bytes, base64url without padding (36 characters):
    version (1) | shard (2) | due epoch ms (6) | ULID (16) | CRC-16 of the preceding bytes (2)
The checksum lets a typo be told apart from an unknown job: malformed -> 400, unknown -> 404.

A DAG id (DagKey) is a token of the same kind, 40 characters: the nodes of one DAG are jobs on
one shard at one due time whose ULIDs are a base ULID plus the node's index, so the DAG id
(shard, due time, base ULID, node count) addresses every node, and one range query reads them.
    version (1) | kind "D" (1) | shard (2) | due epoch ms (6) | base ULID (16) | node count (2)
    | CRC-16 (2)
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
import struct
import zlib
from dataclasses import dataclass

from ulid import ULID

from sundial.errors import InvalidInput

_TOKEN_VERSION = 1
_BODY = struct.Struct(">BH6s16s")  # version, shard, due ms (48-bit), ulid
TOKEN_LENGTH = 36
_DAG_KIND = ord("D")
_DAG_BODY = struct.Struct(">BBH6s16sH")  # version, kind, shard, due ms, base ulid, node count
DAG_TOKEN_LENGTH = 40
# A DAG's node ULIDs are its base ULID with the node index in the low 16 bits.
MAX_DAG_NODES = 1 << 16
MAX_SHARDS = 65_536
MAX_DUE_MS = 10**13 - 1  # 13 zero-padded digits in the sort key: until the year 2286

# Ids are canonical: each job or DAG has exactly one id. The 27- and 30-byte tokens fill their
# base64url characters exactly (no padding, no spare bits), so the canonical form is simply
# "only base64url's alphabet"; Python's decoder also takes '+' and '/' (and drops other
# characters), which would let a second spelling address the same job.
TOKEN_ALPHABET = "A-Za-z0-9_-"
JOB_ID_PATTERN = f"^[{TOKEN_ALPHABET}]{{{TOKEN_LENGTH}}}$"
DAG_ID_PATTERN = f"^[{TOKEN_ALPHABET}]{{{DAG_TOKEN_LENGTH}}}$"
_TOKEN_CHARS = re.compile(f"[{TOKEN_ALPHABET}]*")

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
        return _seal(
            _BODY.pack(
                _TOKEN_VERSION,
                self.shard,
                self.due_ms.to_bytes(6, "big"),
                ULID.from_str(self.ulid).bytes,
            )
        )

    @classmethod
    def from_item_keys(cls, pk: str, sk: str) -> JobKey:
        due, _, ulid = sk.partition("#")
        return cls(shard=int(pk.removeprefix(SHARD_PREFIX)), due_ms=int(due), ulid=ulid)

    @classmethod
    def from_job_id(cls, job_id: str) -> JobKey:
        """Decode a job id. Raises InvalidInput(field="job_id") for anything malformed."""
        raw = _unseal(job_id, field="job_id", what="job id", length=TOKEN_LENGTH)
        if len(raw) != _BODY.size:
            raise InvalidInput("job_id", "malformed job id (checksum mismatch)")
        version, shard, due, ulid_bytes = _BODY.unpack(raw)
        if version != _TOKEN_VERSION:
            raise InvalidInput("job_id", f"malformed job id (unknown version {version})")
        try:
            return cls(
                shard=shard, due_ms=int.from_bytes(due), ulid=str(ULID.from_bytes(ulid_bytes))
            )
        except ValueError as exc:
            raise InvalidInput("job_id", f"malformed job id ({exc})") from None


@dataclass(frozen=True, slots=True)
class DagKey:
    """Where a DAG's nodes are: node i is the job at (shard, due_ms, base ULID + i)."""

    shard: int
    due_ms: int
    base_ulid: str
    node_count: int

    def __post_init__(self) -> None:
        JobKey(shard=self.shard, due_ms=self.due_ms, ulid=self.base_ulid)  # checks the ranges
        if not 1 <= self.node_count < MAX_DAG_NODES:
            raise ValueError(f"node count {self.node_count} out of range")
        if int(ULID.from_str(self.base_ulid)) % MAX_DAG_NODES:
            raise ValueError("a DAG's base ULID must end in 16 zero bits")

    @classmethod
    def new(cls, *, shard: int, due_ms: int, node_count: int, now_ms: int) -> DagKey:
        # A ULID is 48 bits of milliseconds and 80 random bits; the node index takes the low 16.
        # The random bits are drawn here, not by ULID.from_timestamp: its generator is
        # monotonic within a millisecond (it adds 1), so two DAGs made in the same millisecond
        # would share a base once the low bits are cleared, and their nodes one set of items.
        random_bits = secrets.randbits(80) & ~(MAX_DAG_NODES - 1)
        base = ULID.from_int((now_ms << 80) | random_bits)
        return cls(shard, due_ms, str(base), node_count)

    def node_key(self, index: int) -> JobKey:
        if not 0 <= index < self.node_count:
            raise ValueError(f"node index {index} out of range")
        ulid = ULID.from_int(int(ULID.from_str(self.base_ulid)) + index)
        return JobKey(shard=self.shard, due_ms=self.due_ms, ulid=str(ulid))

    @property
    def dag_id(self) -> str:
        return _seal(
            _DAG_BODY.pack(
                _TOKEN_VERSION,
                _DAG_KIND,
                self.shard,
                self.due_ms.to_bytes(6, "big"),
                ULID.from_str(self.base_ulid).bytes,
                self.node_count,
            )
        )

    @classmethod
    def from_dag_id(cls, dag_id: str) -> DagKey:
        """Decode a DAG id. Raises InvalidInput(field="dag_id") for anything malformed."""
        raw = _unseal(dag_id, field="dag_id", what="DAG id", length=DAG_TOKEN_LENGTH)
        if len(raw) != _DAG_BODY.size:
            raise InvalidInput("dag_id", "malformed DAG id (checksum mismatch)")
        version, kind, shard, due, ulid_bytes, count = _DAG_BODY.unpack(raw)
        if (version, kind) != (_TOKEN_VERSION, _DAG_KIND):
            raise InvalidInput("dag_id", f"malformed DAG id (unknown version {version}/{kind})")
        try:
            return cls(shard, int.from_bytes(due), str(ULID.from_bytes(ulid_bytes)), count)
        except ValueError as exc:
            raise InvalidInput("dag_id", f"malformed DAG id ({exc})") from None


def _seal(body: bytes) -> str:
    """body + CRC-16 of it, base64url."""
    crc = zlib.crc32(body) & 0xFFFF
    return base64.urlsafe_b64encode(body + crc.to_bytes(2, "big")).decode("ascii")


def _unseal(token: str, *, field: str, what: str, length: int) -> bytes:
    """The body of a sealed token, checksum verified; InvalidInput(field) if malformed."""
    if len(token) != length:
        raise InvalidInput(field, f"malformed {what} (expected {length} characters)")
    if not _TOKEN_CHARS.fullmatch(token):
        raise InvalidInput(field, f"malformed {what} (only A-Z, a-z, 0-9, - and _)")
    try:
        raw = base64.urlsafe_b64decode(token.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise InvalidInput(field, f"malformed {what} (not base64url)") from None
    if len(raw) < 3 or zlib.crc32(raw[:-2]) & 0xFFFF != int.from_bytes(raw[-2:]):
        raise InvalidInput(field, f"malformed {what} (checksum mismatch)")
    return raw[:-2]
