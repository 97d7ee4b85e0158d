"""Ids of sessions (the streams of the log), runs and forks: UUIDs of version 7.

Ids from outside (a URL, an import file) are checked with ``is_uuid`` before they name
a stream or a folder: only a canonical UUID string (lowercase, with hyphens) is a
session id, so ``..``, ``.``, ``memory:alice`` or ``a/b`` never is. ``session_folder``
is the one place a session's files folder is built from its id.

A version 7 UUID (RFC 9562) begins with the Unix time in milliseconds, then 74 random
bits: as hard to guess as any id a client should not be able to guess, and ids made
later sort later. The log's index on ``(stream_id, seq)`` then receives a new session's
events at its end, where the B-tree grows by appending, instead of at a random place,
where every page that fills is split and its neighbours rewritten: measured in
bench/loop.py, ~10% of a SQLite commit, and the same holds for PostgreSQL's B-trees.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from pathlib import Path

__all__ = ["InvalidId", "is_uuid", "new_id", "session_folder"]

# Canonical form only: uuid.UUID() would also take braces, "urn:uuid:" and upper case,
# which would give one session several names (and several folders).
_CANONICAL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

_RAND_A = (1 << 12) - 1
_RAND_B = (1 << 62) - 1


def new_id() -> str:
    """A new UUID version 7, as its canonical string."""
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")  # 80 bits; 74 are used
    value = (
        (millis & ((1 << 48) - 1)) << 80
        | 0x7 << 76  # version
        | (rand >> 62 & _RAND_A) << 64
        | 0b10 << 62  # variant (RFC 9562)
        | rand & _RAND_B
    )
    return str(uuid.UUID(int=value))


class InvalidId(ValueError):
    """An id from outside that is not a canonical UUID."""

    def __init__(self, value: str, reason: str = "is not a UUID") -> None:
        super().__init__(f"session id {value!r} {reason}")
        self.value = value


def is_uuid(value: object) -> bool:
    """Whether ``value`` is a UUID in canonical form (``8-4-4-4-12`` lowercase hex)."""
    return isinstance(value, str) and _CANONICAL.fullmatch(value) is not None


def session_folder(root: Path, session_id: str) -> Path:
    """``root/<session_id>``: the session's files folder; raises ``InvalidId`` unless the
    id is a UUID, and refuses a folder that would not be directly inside ``root`` (a
    symlink in its place pointing elsewhere)."""
    if not is_uuid(session_id):
        raise InvalidId(session_id)
    folder = root / session_id
    if folder.is_symlink():
        raise InvalidId(session_id, "names a symbolic link in the files folder, not a folder")
    return folder
