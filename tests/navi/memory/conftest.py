"""Fixtures for the memory tests: a store of each kind, a clock, the fake LLM."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from events.in_memory import InMemoryEventStore
from events.postgres import PostgresEventStore
from events.sqlite import SqliteEventStore
from events.store import EventStore
from events.types import (
    Event,
    LLMCompleted,
    LLMRequested,
    MemoryFactLearned,
    RunCompleted,
    RunStarted,
    SessionCreated,
    UserMessage,
)
from navi.llm.ollama import OllamaBackend
from navi.llm.settings import LLMSettings
from navi.memory.facts import fact_id
from tests.support.fake_backend import FakeLLM
from tests.support.fake_llm import Reply

T0 = 1_700_000_000.0
MINUTE = 60.0
TEST_SETTINGS = LLMSettings(first_chunk_timeout=10.0, chunk_timeout=10.0, connect_timeout=5.0)


class Clock:
    """The time of the store and of the worker: moves only when a test says so."""

    def __init__(self, start: float = T0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> float:
        self.t += seconds
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


STORE_KINDS = [
    "memory",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> tuple[str, str]:
    """The kind of store, and the PostgreSQL URL for that kind (asked for here, outside
    the event loop, because creating the test database runs its own loop)."""
    kind: str = request.param
    return kind, request.getfixturevalue("postgres_url") if kind == "postgres" else ""


@pytest.fixture
async def store(
    store_kind: tuple[str, str], clock: Clock, tmp_path: Path
) -> AsyncIterator[EventStore]:
    kind, url = store_kind
    if kind == "memory":
        async with InMemoryEventStore(clock=clock) as memory_store:
            yield memory_store
    elif kind == "sqlite":
        async with SqliteEventStore(tmp_path / "navi.db", clock=clock) as sqlite_store:
            yield sqlite_store
    else:
        async with PostgresEventStore(url, clock=clock) as pg_store:
            async with pg_store.engine.begin() as conn:
                await conn.execute(text("TRUNCATE navi_events, navi_idempotency"))
                await conn.execute(
                    text("DROP TABLE IF EXISTS navi_memory_index, navi_memory_index_state")
                )
            yield pg_store


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as server:
        yield server


@pytest.fixture
async def backend(fake: FakeLLM) -> AsyncIterator[OllamaBackend]:
    llm = fake.backend(TEST_SETTINGS, model="extractor:1b")
    yield llm
    await llm.aclose()


# ---------------------------------------------------------------- building sessions


def turn_events(role: str, text_: str) -> list[Event]:
    if role == "user":
        return [UserMessage(text=text_)]
    return [
        RunStarted(profile_id="p"),
        LLMRequested(),
        LLMCompleted(content=text_),
        RunCompleted(content=text_),
    ]


async def add_turns(
    store: EventStore, session_id: str, turns: Sequence[tuple[str, str]]
) -> list[int]:
    """Append turns to a session; returns the seq of each turn's message."""
    seqs = []
    for role, message in turns:
        last = await store.last_seq(session_id)
        events = turn_events(role, message)
        recorded = await store.append(session_id, events, expected_seq=last)
        kind = "user.message" if role == "user" else "llm.completed"
        seqs.append(next(r.seq for r in recorded if r.type == kind))
    return seqs


async def new_session(
    store: EventStore,
    session_id: str,
    turns: Sequence[tuple[str, str]] = (),
    *,
    user_id: str = "local",
    parent: str | None = None,
) -> list[int]:
    await store.append(
        session_id,
        [SessionCreated(profile_id="p", user_id=user_id, parent_stream_id=parent)],
        expected_seq=0,
    )
    return await add_turns(store, session_id, turns)


# ---------------------------------------------------------------- scripted answers


def answer(*facts: tuple[str, str, str, Sequence[int]]) -> Reply:
    """An extraction answer: facts as (category, key, value, source seqs)."""
    body: dict[str, Any] = {
        "facts": [
            {"category": c, "key": k, "value": v, "source_seqs": list(s)} for c, k, v, s in facts
        ]
    }
    return Reply(text=json.dumps(body))


def summary(text_: str) -> Reply:
    return Reply(text=text_)


def chat_text(request: dict[str, Any]) -> str:
    """Everything a chat request showed the model."""
    return "\n".join(str(m.get("content", "")) for m in request.get("messages", []))


def learned(category: str, key: str, value: str) -> MemoryFactLearned:
    """A learned fact, as extraction records it (source: message 2 of session s1)."""
    return MemoryFactLearned(
        fact_id=fact_id(category, key),
        category=category,
        key=key,
        value=value,
        session_id="s1",
        from_seq=1,
        to_seq=2,
        source_seqs=(2,),
    )
