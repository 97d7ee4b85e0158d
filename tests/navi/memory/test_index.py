"""Ranked keyword search: SQLite FTS5, PostgreSQL full-text, and Python for the memory store."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from events.sql import SqlEventStore
from events.store import EventStore
from events.types import (
    Event,
    MemoryFactEdited,
    MemoryFactForgotten,
    MemoryReset,
)
from navi.memory.facts import fact_id, memory_stream_id
from navi.memory.index import InMemoryIndex, SqlMemoryIndex
from navi.memory.service import MemoryService
from tests.navi.memory.conftest import learned

pytestmark = pytest.mark.anyio

FACTS = [
    ("preference", "editor", "Uses Neovim with a dark theme"),
    ("environment", "operating_system", "Arch Linux on a ThinkPad"),
    ("project", "current_project", "Navi, a local-first agent server in Python"),
    ("personal", "name", "Élodie"),
    ("preference", "programming_language", "Prefers Python, dislikes Java"),
]


async def append(store: EventStore, *events: Event, user: str = "local") -> None:
    stream = memory_stream_id(user)
    await store.append(stream, list(events), expected_seq=await store.last_seq(stream))


async def keys(service: MemoryService, query: str, user: str = "local") -> list[str]:
    return [f.key for f in await service.search(user, query)]


async def test_search_ranks_the_best_match_first(store: EventStore) -> None:
    await append(store, *(learned(*f) for f in FACTS))
    service = MemoryService(store)
    assert (await keys(service, "python"))[0] == "programming_language"
    assert set(await keys(service, "python")) == {"programming_language", "current_project"}
    assert await keys(service, "what operating system do I run?") == ["operating_system"]
    assert await keys(service, "neovim") == ["editor"]
    assert await keys(service, "think") == ["operating_system"]  # prefixes match
    assert await keys(service, "elodie") == ["name"]  # so do words without their accents
    assert await keys(service, "kubernetes") == []
    assert await keys(service, "   ") == []


@pytest.mark.parametrize(
    "query",
    [
        'python"',
        "python*",
        "python:* & !java",
        "python | x & !z",
        "NEAR(python java)",
        "python') OR 1=1 --",
        "python AND OR NOT",
        "{python}^",
        pytest.param("python " + "x" * 5000, id="huge-word"),
    ],
)
async def test_query_syntax_is_never_interpreted(store: EventStore, query: str) -> None:
    await append(store, *(learned(*f) for f in FACTS))
    found = await keys(MemoryService(store), query)
    assert found[0] == "programming_language"


async def test_search_follows_edits_forgets_and_resets(store: EventStore) -> None:
    await append(store, *(learned(*f) for f in FACTS))
    service = MemoryService(store)
    assert await keys(service, "neovim") == ["editor"]
    await append(
        store,
        MemoryFactEdited(fact_id=fact_id("preference", "editor"), value="Uses Emacs"),
        MemoryFactForgotten(fact_id=fact_id("environment", "operating_system")),
    )
    assert await keys(service, "neovim") == []
    assert await keys(service, "emacs") == ["editor"]
    assert await keys(service, "linux thinkpad") == []
    await append(store, MemoryReset(), learned("other", "pet", "A cat named Neovim"))
    # After the reset: the user's edit stays, learned facts are gone, the new one is found.
    assert await keys(service, "neovim") == ["pet"]
    assert await keys(service, "emacs") == ["editor"]
    assert await keys(service, "python") == []


async def test_each_user_searches_their_own_facts(store: EventStore) -> None:
    await append(store, learned("preference", "editor", "vim"), user="alice")
    await append(store, learned("preference", "editor", "emacs"), user="bob")
    service = MemoryService(store)
    assert [f.value for f in await service.search("alice", "editor")] == ["vim"]
    assert [f.value for f in await service.search("bob", "editor")] == ["emacs"]
    assert await service.search("carol", "editor") == []


async def test_the_index_is_rebuilt_from_the_log(store: EventStore) -> None:
    await append(store, *(learned(*f) for f in FACTS))
    service = MemoryService(store)
    assert await keys(service, "neovim") == ["editor"]
    if isinstance(store, SqlEventStore):
        assert isinstance(service.index, SqlMemoryIndex)
        async with store.engine.begin() as conn:
            for table in ("navi_memory_fts", "navi_memory_index", "navi_memory_index_state"):
                await conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
    else:
        assert isinstance(service.index, InMemoryIndex)
    fresh = MemoryService(store)  # a restart: the index catches up from the memory stream
    assert await keys(fresh, "neovim") == ["editor"]
    assert len(await fresh.search("local", "a the python linux neovim élodie", limit=50)) == 5


async def test_a_second_process_sees_what_the_first_indexed(store: EventStore) -> None:
    await append(store, learned("preference", "editor", "vim"))
    first, second = MemoryService(store), MemoryService(store)
    assert await keys(first, "vim") == ["editor"]
    await first.forget("local", fact_id("preference", "editor"))
    assert await keys(second, "vim") == []  # caught up with the log before answering
