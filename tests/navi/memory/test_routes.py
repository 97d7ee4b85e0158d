"""The memory REST API on a tiny app, over httpx's ASGI transport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
import pytest
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from events.in_memory import InMemoryEventStore
from events.types import MemoryExtractionFailed, MemorySummaryUpdated
from navi.memory.facts import fact_id, memory_stream_id
from navi.memory.routes import memory_routes
from navi.memory.service import MemoryService
from navi.memory.summary import MEMORY_HEADER
from projections.types import iso_time
from tests.navi.memory.conftest import T0, Clock, learned, new_session

pytestmark = pytest.mark.anyio

EDITOR = fact_id("preference", "editor")


@dataclass
class User:
    id: str


class AsUser:
    """Middleware standing in for the server's authentication."""

    def __init__(self, app: ASGIApp, user_id: str) -> None:
        self.app = app
        self.user_id = user_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["navi_user"] = User(self.user_id)
        await self.app(scope, receive, send)


@pytest.fixture
async def service() -> AsyncIterator[MemoryService]:
    async with InMemoryEventStore(clock=Clock()) as store:
        seqs = await new_session(
            store, "s1", [("user", "I use Neovim."), ("assistant", "Neovim, nice.")]
        )
        fact = msgspec.structs.replace(
            learned("preference", "editor", "Uses Neovim"),
            source_seqs=tuple(seqs),
            to_seq=await store.last_seq("s1"),
        )
        await store.append(
            memory_stream_id("local"),
            [
                fact,
                learned("environment", "os", "Arch Linux"),
                MemorySummaryUpdated(
                    text="Uses Neovim on Arch.", fact_ids=(EDITOR,), based_on_seq=2
                ),
            ],
            expected_seq=0,
        )
        yield MemoryService(store)


def client_for(service: MemoryService, user_id: str | None = "local") -> httpx.AsyncClient:
    app: ASGIApp = Starlette(routes=memory_routes(lambda _request: service))
    if user_id is not None:
        app = AsUser(app, user_id)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def get(client: httpx.AsyncClient, path: str, status: int = 200) -> Any:
    response = await client.get(path)
    assert response.status_code == status, response.text
    return response.json()


async def test_a_request_without_a_user_is_refused_not_served_as_local(
    service: MemoryService,
) -> None:
    async with client_for(service, user_id=None) as client:
        response = await client.get("/memory/facts")
    assert response.status_code == 401


async def test_list_facts_with_their_source_links(service: MemoryService) -> None:
    async with client_for(service) as client:
        facts = await get(client, "/memory/facts")
    assert [(f["category"], f["key"], f["value"]) for f in facts] == [
        ("environment", "os", "Arch Linux"),
        ("preference", "editor", "Uses Neovim"),
    ]
    editor = facts[1]
    assert editor["id"] == EDITOR and editor["edited_by_user"] is False
    assert editor["source"] == {"session_id": "s1", "from_seq": 1, "to_seq": 6, "seqs": [2, 5]}
    assert editor["learned_at"].endswith("+00:00")


async def test_search_through_the_list(service: MemoryService) -> None:
    async with client_for(service) as client:
        assert [f["key"] for f in await get(client, "/memory/facts?q=linux")] == ["os"]
        bad = await get(client, "/memory/facts?q=linux&limit=many", 422)
    assert "limit" in bad["error"]


async def test_a_fact_says_why_it_is_known(service: MemoryService) -> None:
    async with client_for(service) as client:
        fact = await get(client, f"/memory/facts/{EDITOR}")
        missing = await get(client, "/memory/facts/f_nope", 404)
    assert [(m["seq"], m["role"], m["content"]) for m in fact["why"]] == [
        (2, "user", "I use Neovim."),
        (5, "assistant", "Neovim, nice."),
    ]
    assert fact["why"][0]["session_id"] == "s1"
    assert [(v["kind"], v["value"]) for v in fact["history"]] == [("learned", "Uses Neovim")]
    assert missing == {"error": "the fact 'f_nope' does not exist"}


async def test_edit_a_fact(service: MemoryService) -> None:
    async with client_for(service) as client:
        response = await client.patch(f"/memory/facts/{EDITOR}", json={"value": "Uses Helix"})
        assert response.status_code == 200
        edited = response.json()
        assert edited["value"] == "Uses Helix" and edited["edited_by_user"] is True
        assert edited["source"] is None
        fact = await get(client, f"/memory/facts/{EDITOR}")
        assert [v["kind"] for v in fact["history"]] == ["learned", "edited"]
        assert fact["why"] == []
        # The summary mentioned the old value: it is no longer shown nor used.
        shown = await get(client, "/memory/summary")
        assert shown["summary"] is None and "Uses Helix" in shown["message"]


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (b"{not json", 400, "not valid JSON"),
        (b'{"value": "caf\xe9"}', 400, "not valid UTF-8"),
        (b'{"value": 3}', 422, "Expected `str`"),
        (b'{"valeur": "x"}', 422, "value"),
        (b'{"value": "x", "extra": 1}', 422, "unknown field"),
        (b'{"value": "   "}', 422, "must not be empty"),
    ],
)
async def test_a_bad_edit_is_refused_and_changes_nothing(
    service: MemoryService, body: bytes, status: int, error: str
) -> None:
    async with client_for(service) as client:
        response = await client.patch(f"/memory/facts/{EDITOR}", content=body)
        assert response.status_code == status
        assert error in response.json()["error"]
        assert (await get(client, f"/memory/facts/{EDITOR}"))["value"] == "Uses Neovim"


async def test_forget_a_fact(service: MemoryService) -> None:
    async with client_for(service) as client:
        response = await client.delete(f"/memory/facts/{EDITOR}")
        assert response.status_code == 200 and response.json() == {"id": EDITOR, "forgotten": True}
        again = await client.delete(f"/memory/facts/{EDITOR}")
        assert again.status_code == 404 and "was forgotten" in again.json()["error"]
        assert (await get(client, f"/memory/facts/{EDITOR}", 404))["error"].endswith("forgotten")
        edit = await client.patch(f"/memory/facts/{EDITOR}", json={"value": "x"})
        assert edit.status_code == 404
        assert [f["key"] for f in await get(client, "/memory/facts")] == ["os"]
        assert await get(client, "/memory/facts?q=neovim") == []
        shown = await get(client, "/memory/summary")
    assert shown["summary"] is None and "Neovim" not in shown["message"]


async def test_the_summary(service: MemoryService) -> None:
    async with client_for(service) as client:
        shown = await get(client, "/memory/summary")
    assert shown["summary"] == "Uses Neovim on Arch." and shown["fact_count"] == 2
    assert shown["message"] == f"{MEMORY_HEADER}\n\nUses Neovim on Arch."
    assert shown["updated_at"] == iso_time(T0) == "2023-11-14T22:13:20.000+00:00"


async def test_the_user_comes_from_the_request(service: MemoryService) -> None:
    async with client_for(service, user_id="alice") as client:
        assert await get(client, "/memory/facts") == []
        await get(client, f"/memory/facts/{EDITOR}", 404)
        assert (await get(client, "/memory/summary"))["message"] is None


async def test_the_status_the_web_client_polls(service: MemoryService) -> None:
    service.extract_after_s = 120.0
    async with client_for(service) as client:
        shown = await get(client, "/memory/status")
        assert shown == {
            "fact_count": 2,
            "updated_at": iso_time(T0),
            "cannot_extract": False,
            "extract_after_s": 120.0,
        }
        last = await service.store.last_seq(memory_stream_id("local"))
        await service.store.append(
            memory_stream_id("local"),
            [MemoryExtractionFailed(session_id="s1", from_seq=0, to_seq=6, error="not JSON")],
            expected_seq=last,
        )
        assert (await get(client, "/memory/status"))["cannot_extract"] is True
    async with client_for(service, user_id="bob") as bob:
        assert await get(bob, "/memory/status") == {
            "fact_count": 0,
            "updated_at": None,
            "cannot_extract": False,
            "extract_after_s": 120.0,
        }
