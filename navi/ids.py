"""Ids of sessions (the streams of the log), runs and forks: UUIDs of version 7.

A version 7 UUID (RFC 9562) begins with the Unix time in milliseconds, then 74 random
bits: as hard to guess as any id a client should not be able to guess, and ids made
later sort later. The log's index on ``(stream_id, seq)`` then receives a new session's
events at its end, where the B-tree grows by appending, instead of at a random place,
where every page that fills is split and its neighbours rewritten: measured in
bench/loop.py, ~10% of a SQLite commit, and the same holds for PostgreSQL's B-trees.
"""

from __future__ import annotations

import os
import time
import uuid

__all__ = ["new_id"]

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
