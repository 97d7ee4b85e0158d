"""The ``EventStore`` protocol every backend implements (in-memory, SQLite, PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from typing import Protocol

from events.envelope import NewEvent, Recorded
from events.types import Event


class EventStore(Protocol):
    """An append-only log of streams.

    ``append`` is atomic and checked: it writes all events or none, and only when the
    stream is at ``expected_seq`` (0 for a new stream). With an ``idempotency_key`` a
    retried append is a no-op that returns what the first one stored.
    Subscribers see an event only after it is durable.
    """

    async def append(
        self,
        stream_id: str,
        events: Sequence[Event | NewEvent],
        *,
        expected_seq: int,
        idempotency_key: str | None = None,
    ) -> list[Recorded]: ...

    async def read(
        self,
        stream_id: str,
        *,
        after_seq: int = 0,
        to_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Recorded]: ...

    async def read_all(
        self,
        *,
        after_position: int = 0,
        limit: int | None = None,
        skip_streams: Collection[str] = (),
    ) -> list[Recorded]:
        """Events of every stream after ``after_position``, in position order, but those
        of ``skip_streams`` (a reader that has them already: a big import's)."""
        ...

    async def last_seq(self, stream_id: str) -> int: ...

    async def stream_heads(self) -> dict[str, Recorded]:
        """The last event of every stream (for resume and the session list)."""
        ...

    def subscribe(self, stream_id: str, *, after_seq: int = 0) -> AsyncIterator[Recorded]:
        """Events after ``after_seq``: caught up from the log, then live; no gap, no duplicate."""
        ...

    def subscribe_batches(
        self, stream_id: str, *, after_seq: int = 0, wake_on: frozenset[str] | None = None
    ) -> AsyncIterator[list[Recorded]]:
        """``subscribe``, a commit (or a page of the catch-up) at a time; with
        ``wake_on``, live batches only once a commit holds one of those event types."""
        ...
