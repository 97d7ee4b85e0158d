"""Chats started elsewhere — `navi chat "…"` one-shots (``origin: "cli"``) and /v1
clients' conversations (``origin: "api"``) — sit in a folded sidebar group of their own,
so they do not push the user's own chats down; pinned or open, a chat is in the list."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from tests.support.fake_llm import Reply
from tests.web.conftest import LLMScript, NaviPage


def _create(url: str, **body: str) -> str:
    response = httpx.post(f"{url}/sessions", json=body, timeout=10)
    response.raise_for_status()
    session_id: str = response.json()["session_id"]
    return session_id


def _item(ui: NaviPage, session_id: str) -> Any:
    return ui.page.locator(f'.session-item[data-session-id="{session_id}"]')


def test_chats_from_the_terminal_and_apps_fold_apart(
    navi_page: NaviPage, navi_server: Any, llm: LLMScript
) -> None:
    url = navi_server.url
    own = _create(url, title="Trip to Lisbon")
    one_shot = _create(url, title="Disk usage question", origin="cli")
    llm(Reply(text="Hello, app."))
    answered = httpx.post(
        f"{url}/v1/chat/completions",
        json={"model": "navi/secretary", "messages": [{"role": "user", "content": "hi, app"}]},
        timeout=60,
    )
    assert answered.status_code == 200, answered.text
    origins = {s["session_id"]: s["origin"] for s in httpx.get(f"{url}/sessions").json()}
    assert origins[own] == "" and origins[one_shot] == "cli"
    assert sorted(origins.values()) == ["", "api", "cli"]

    ui = navi_page.open()
    page = ui.page
    group = page.locator("details.session-apart")
    expect(group.locator("summary")).to_have_text("From the terminal and other apps (2)")
    expect(_item(ui, own)).to_be_visible()
    expect(_item(ui, one_shot)).to_be_hidden()  # folded
    assert group.locator(".session-item").count() == 2
    group.locator("summary").click()
    expect(_item(ui, one_shot)).to_be_visible()
    ui.shot("unfolded")
    # Opened, the chat is the one in front: it leaves the group; the group stays open.
    _item(ui, one_shot).locator(".session-link").click()
    expect(page.locator(".session-list > .session-item.active")).to_have_attribute(
        "data-session-id", one_shot
    )
    expect(group.locator("summary")).to_have_text("From the terminal and other apps (1)")
    expect(group).to_have_attribute("open", "")


def test_a_pinned_one_shot_is_in_the_list(navi_page: NaviPage, navi_server: Any) -> None:
    url = navi_server.url
    one_shot = _create(url, title="Keep this answer", origin="cli")
    httpx.patch(
        f"{url}/sessions/{one_shot}/pin", json={"pinned": True}, timeout=10
    ).raise_for_status()
    ui = navi_page.open()
    expect(_item(ui, one_shot)).to_be_visible()
    expect(ui.page.locator("details.session-apart")).to_have_count(0)


def test_an_origin_a_client_may_not_claim_is_refused(navi_server: Any) -> None:
    before = httpx.get(f"{navi_server.url}/sessions").json()
    for origin in ("api", "web", 7):
        response = httpx.post(f"{navi_server.url}/sessions", json={"origin": origin}, timeout=10)
        assert response.status_code == 422, (origin, response.text)
    assert httpx.get(f"{navi_server.url}/sessions").json() == before
