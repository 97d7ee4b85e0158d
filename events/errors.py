"""Errors of the event log. Each names the stream (and seq) it is about."""

from __future__ import annotations


class EventStoreError(Exception):
    """Base of every error raised by an event store."""


class ConcurrencyError(EventStoreError):
    """An append's ``expected_seq`` was stale: another writer got there first.

    Nothing of that append was written."""

    def __init__(self, stream_id: str, expected_seq: int, actual_seq: int | None = None) -> None:
        self.stream_id = stream_id
        self.expected_seq = expected_seq
        self.actual_seq = actual_seq
        actual = "" if actual_seq is None else f", but it is at seq {actual_seq}"
        super().__init__(
            f"stream {stream_id!r}: append expected seq {expected_seq}{actual}; "
            "another writer appended first and nothing was written"
        )


class EventDecodeError(EventStoreError):
    """A stored payload could not be decoded: unknown type, corrupt bytes, or a missing upcaster."""

    def __init__(self, stream_id: str, seq: int, reason: str) -> None:
        self.stream_id = stream_id
        self.seq = seq
        self.reason = reason
        super().__init__(f"cannot decode event {stream_id!r}#{seq}: {reason}")


class StoreClosedError(EventStoreError):
    """The store was used outside its ``async with`` block."""


# How each store words a write refused for want of space (SQLite; PostgreSQL, the OS).
_FULL_WORDS = ("database or disk is full", "no space left on device", "disk full")


def is_storage_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) says the disk or the database is full."""
    seen: BaseException | None = exc
    for _ in range(5):  # the chain: a writer's error names the append's
        if seen is None:
            return False
        text = str(seen).lower()
        if any(w in text for w in _FULL_WORDS) or getattr(seen, "errno", None) == 28:
            return True
        seen = seen.__cause__ or seen.__context__
    return False
