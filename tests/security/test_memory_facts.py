"""The memory REST API is per user: Bob can neither list, read, edit nor forget Alice's
facts, not even knowing their ids (a fact id is derived from its category and key, so it
is guessable). What he gets is a 404, and Alice's memory is as it was."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from events.in_memory import InMemoryEventStore
from navi.memory.facts import fact_id, memory_stream_id
from navi.memory.service import MemoryService
from tests.navi.memory.conftest import Clock, learned
from tests.navi.memory.test_routes import client_for

pytestmark = pytest.mark.anyio

EDITOR = fact_id("preference", "editor")


@pytest.fixture
async def service() -> AsyncIterator[MemoryService]:
    async with InMemoryEventStore(clock=Clock()) as store:
        await store.append(
            memory_stream_id("alice"),
            [learned("preference", "editor", "Uses Neovim")],
            expected_seq=0,
        )
        yield MemoryService(store)


async def test_bob_cannot_list_read_edit_or_forget_alices_facts(service: MemoryService) -> None:
    async with client_for(service, user_id="bob") as bob:
        assert (await bob.get("/memory/facts")).json() == []
        assert (await bob.get("/memory/facts?q=neovim")).json() == []
        assert (await bob.get(f"/memory/facts/{EDITOR}")).status_code == 404
        edit = await bob.patch(f"/memory/facts/{EDITOR}", json={"value": "Uses Emacs"})
        assert edit.status_code == 404 and "does not exist" in edit.json()["error"]
        assert (await bob.delete(f"/memory/facts/{EDITOR}")).status_code == 404
        assert (await bob.get("/memory/summary")).json()["message"] is None
    async with client_for(service, user_id="alice") as alice:
        facts = (await alice.get("/memory/facts")).json()
    assert [(f["id"], f["value"], f["edited_by_user"]) for f in facts] == [
        (EDITOR, "Uses Neovim", False)
    ]
    # Nothing was written for Bob either: his stream does not exist.
    assert await service.store.last_seq(memory_stream_id("bob")) == 0


@pytest.mark.parametrize("bad_id", ["../memory:alice", "memory:alice", "f_" + "0" * 5000, "%00"])
async def test_odd_fact_ids_are_404s(service: MemoryService, bad_id: str) -> None:
    async with client_for(service, user_id="bob") as bob:
        for method in ("GET", "DELETE"):
            response = await bob.request(method, f"/memory/facts/{bad_id}")
            assert response.status_code == 404, (method, bad_id, response.text)
