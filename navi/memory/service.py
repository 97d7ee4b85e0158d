"""``MemoryService``: what Navi remembers, for the context, the tools and the REST API.

It reads each user's memory stream through the ``memory`` projection (caught up before
every answer, so a fact forgotten on another node is forgotten here too) and is the one
path that appends to it: ``append(user, decide)`` runs a pure decision on the current
state and appends its events at that state's seq; if another writer got there first,
it catches up and decides again. It never calls an LLM (``MemoryWorker`` does).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import msgspec
import structlog

from events.envelope import Recorded
from events.errors import ConcurrencyError
from events.store import EventStore
from events.types import Event, LLMCompleted, UserMessage
from navi.memory import decisions
from navi.memory.facts import (
    LOCAL_USER,
    fact_id,
    memory_stream_id,
    normalize_key,
    user_of_stream,
)
from navi.memory.index import MemoryIndex, memory_index_for
from navi.memory.summary import memory_message
from projections.memory import MEMORY, Fact, FactSource, MemoryState
from projections.runner import ProjectionRunner
from projections.types import iso_time

log = structlog.get_logger(__name__)

Decide = Callable[[MemoryState], list[Event]]
MAX_RACES = 8
MAX_SEARCH_RESULTS = 50
LOOK_BACK = 200  # events read back from a session's end for the message a fact was told in


class SourceMessage(msgspec.Struct, frozen=True, kw_only=True):
    """A message a fact was learned from: "why do you know this?"."""

    session_id: str
    seq: int
    role: str
    content: str
    created_at: str


class MemoryService:
    def __init__(self, store: EventStore, *, index: MemoryIndex | None = None) -> None:
        self.store = store
        self.index = index if index is not None else memory_index_for(store)
        self._runners: dict[str, ProjectionRunner[MemoryState]] = {}
        self._locks: dict[str, anyio.Lock] = {}
        # Called with the user id after a user's facts changed by hand (edit, forget):
        # the worker uses it to rewrite the summary soon.
        self.on_change: Callable[[str], None] | None = None
        # How long after a run a session is read for facts (the worker sets it): the web
        # client polls ``GET /memory/status`` then, to say "Memory updated".
        self.extract_after_s: float | None = None

    # ------------------------------------------------------------ reading

    async def state(self, user_id: str = LOCAL_USER) -> MemoryState:
        """The user's memory, caught up with the log."""
        runner = self._runners.get(user_id)
        if runner is None:
            runner = ProjectionRunner(self.store, memory_stream_id(user_id), MEMORY)
            self._runners[user_id] = runner
        return await runner.catch_up()

    async def users(self) -> list[str]:
        """Users that have a memory stream."""
        heads = await self.store.stream_heads()
        return sorted(u for u in map(user_of_stream, heads) if u is not None)

    async def facts(self, user_id: str = LOCAL_USER) -> list[Fact]:
        return (await self.state(user_id)).active()

    async def fact(self, user_id: str, fact_id: str) -> Fact:
        """An active fact, or ``FactNotFound`` (saying whether it was forgotten)."""
        return decisions.active_fact(await self.state(user_id), fact_id)

    async def search(self, user_id: str, query: str, limit: int = 10) -> list[Fact]:
        """Facts matching the query's keywords, best first (never a forgotten one)."""
        limit = max(1, min(limit, MAX_SEARCH_RESULTS))
        state = await self.state(user_id)
        ids = await self.index.search(user_id, state, query, limit)
        found = [state.active_fact(fid) for fid in ids]
        return [fact for fact in found if fact is not None]

    async def summary_message(self, user_id: str = LOCAL_USER) -> str | None:
        """``"## What I remember about the user\\n\\n{summary}"`` for the run's context."""
        return memory_message(await self.state(user_id))

    async def sources(self, user_id: str, fact: Fact) -> list[SourceMessage]:
        """The messages the fact's current value was learned from, read from the session log."""
        if fact.source is None:
            return []
        return await self.source_messages(fact.source)

    async def source_messages(self, source: FactSource) -> list[SourceMessage]:
        wanted = set(source.seqs)
        records = await self.store.read(
            source.session_id, after_seq=source.from_seq - 1, to_seq=source.to_seq
        )
        return [m for m in map(_as_source, records) if m is not None and m.seq in wanted]

    # ------------------------------------------------------------ writing

    async def append(self, user_id: str, decide: Decide) -> list[Recorded]:
        """Append what ``decide`` makes of the current state, at that state's seq."""
        lock = self._locks.setdefault(user_id, anyio.Lock())
        async with lock:
            for _ in range(MAX_RACES):
                state = await self.state(user_id)
                events = decide(state)
                if not events:
                    return []
                runner = self._runners[user_id]
                try:
                    records = await self.store.append(
                        memory_stream_id(user_id), events, expected_seq=runner.seq
                    )
                except ConcurrencyError:
                    continue  # another node wrote first: decide again on what it wrote
                for record in records:
                    runner.apply(record)
                return records
        raise ConcurrencyError(memory_stream_id(user_id), -1)

    async def forget(self, user_id: str, fact_id: str, *, reason: str = "user") -> Fact:
        """Forget a fact: gone from search, the summary and every future context."""
        await self.append(user_id, lambda s: decisions.forget(s, fact_id, reason=reason))
        state = await self.state(user_id)
        self._changed(user_id)  # the index catches up at the next search
        log.info("memory.fact_forgotten", user_id=user_id, fact_id=fact_id, reason=reason)
        return state.facts[fact_id]

    async def edit(self, user_id: str, fact_id: str, value: str) -> Fact:
        """Set a fact's value by hand (``ValueError`` for an empty or too long value)."""
        decisions.clean_value(value)
        records = await self.append(user_id, lambda s: decisions.edit(s, fact_id, value))
        state = await self.state(user_id)
        if records:
            self._changed(user_id)
        return state.facts[fact_id]

    async def remember(
        self, user_id: str, session_id: str, *, category: str, key: str, value: str
    ) -> Fact:
        """Write down a fact the user asked Navi to remember in ``session_id`` (its
        source: the user's latest message there). ``ValueError`` for an empty key or
        value, or one too long."""
        said_seq = await self._latest_user_message(session_id)
        now = time.time()
        await self.append(
            user_id,
            lambda s: decisions.remember(
                s,
                category=category,
                key=key,
                value=value,
                session_id=session_id,
                said_seq=said_seq,
                said_at=now,
            ),
        )
        state = await self.state(user_id)
        self._changed(user_id)
        fact = state.facts[fact_id(category, normalize_key(key))]
        log.info("memory.fact_remembered", user_id=user_id, fact_id=fact.fact_id)
        return fact

    async def _latest_user_message(self, session_id: str) -> int:
        """The seq of the session's latest user message (0: none among its last events)."""
        last = await self.store.last_seq(session_id)
        recent = await self.store.read(session_id, after_seq=max(0, last - LOOK_BACK))
        said = [r.seq for r in recent if isinstance(r.event, UserMessage)]
        return said[-1] if said else 0

    def _changed(self, user_id: str) -> None:
        if self.on_change is not None:
            self.on_change(user_id)


def _as_source(record: Recorded) -> SourceMessage | None:
    event = record.event
    if isinstance(event, UserMessage):
        role, content = "user", event.text
    elif isinstance(event, LLMCompleted):
        role, content = "assistant", event.content
    else:
        return None
    return SourceMessage(
        session_id=record.stream_id,
        seq=record.seq,
        role=role,
        content=content,
        created_at=iso_time(record.timestamp),
    )
