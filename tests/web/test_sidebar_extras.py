"""The sidebar, further: renaming a chat in place, search that finds text anywhere in a
conversation (the server searches every message), and the title of a chat during its
first answer."""

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
from tests.web.views import shoot_all


def _create(url: str, title: str = "") -> str:
    response = httpx.post(f"{url}/sessions", json={"title": title}, timeout=10)
    response.raise_for_status()
    session_id: str = response.json()["session_id"]
    return session_id


def _say(url: str, session_id: str, text: str) -> None:
    response = httpx.post(
        f"{url}/sessions/{session_id}/messages", json={"content": text}, timeout=30
    )
    response.raise_for_status()


def _title(url: str, session_id: str) -> str:
    title: str = httpx.get(f"{url}/sessions/{session_id}", timeout=10).json()["title"]
    return title


def _item(ui: NaviPage, session_id: str) -> Any:
    return ui.page.locator(f'.session-item[data-session-id="{session_id}"]')


def test_rename_by_double_click_and_by_the_pencil(navi_page: NaviPage, navi_server: Any) -> None:
    url = navi_server.url
    chat = _create(url, "Old name")
    ui = navi_page.open()
    page = ui.page
    item = _item(ui, chat)
    expect(item.locator(".session-title")).to_have_text("Old name")

    item.locator(".session-link").dblclick()
    field = item.locator("input.rename-input")
    expect(field).to_be_focused()
    expect(field).to_have_value("Old name")
    field.fill("Trip to Lisbon")
    ui.shot("renaming")
    field.press("Enter")
    expect(item.locator(".session-title")).to_have_text("Trip to Lisbon")
    assert _title(url, chat) == "Trip to Lisbon"

    # Esc gives up; nothing is sent.
    item.locator(".session-link").dblclick()
    item.locator("input.rename-input").fill("Never mind")
    item.locator("input.rename-input").press("Escape")
    expect(item.locator(".session-title")).to_have_text("Trip to Lisbon")
    assert _title(url, chat) == "Trip to Lisbon"

    # The pencil among the hover actions; leaving the field saves too.
    item.hover()
    item.locator('[data-action="rename"]').click()
    item.locator("input.rename-input").fill("Lisbon, May")
    page.locator("#prompt").click()
    expect(item.locator(".session-title")).to_have_text("Lisbon, May")
    assert _title(url, chat) == "Lisbon, May"
    page.reload()
    expect(_item(ui, chat).locator(".session-title")).to_have_text("Lisbon, May")


def test_search_finds_text_anywhere_in_a_conversation(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    url = navi_server.url
    llm(
        Reply(text="Noted: the codeword is pineapple."),
        Reply(text="It will rain on Tuesday."),
        Reply(text="Sure."),
    )
    early = _create(url, "Errands")
    _say(url, early, "Remember a codeword for me")
    _say(url, early, "And the weather?")  # the preview is now about rain
    other = _create(url, "Something else")
    _say(url, other, "Hello")

    listed = httpx.get(f"{url}/sessions", params={"q": "PINEAPPLE"}, timeout=10).json()
    assert [s["session_id"] for s in listed] == [early]
    assert "pineapple" in listed[0]["match"]
    assert httpx.get(f"{url}/sessions", params={"q": "zebra"}, timeout=10).json() == []

    ui = navi_page.open()
    page = ui.page
    page.fill("#session-search", "pineapple")
    expect(_item(ui, early)).to_be_visible()
    expect(_item(ui, other)).to_have_count(0)
    expect(_item(ui, early).locator(".session-match")).to_contain_text("codeword is pineapple")
    shoot_all(ui, "search")
    page.fill("#session-search", "")
    expect(_item(ui, other)).to_be_visible()
    expect(page.locator(".session-match")).to_have_count(0)


def test_the_first_message_is_the_title_while_it_is_answered(
    navi_page: NaviPage, llm: LLMScript
) -> None:
    llm(Reply(text=["Let ", "me ", "think ", "about ", "that ", "for ", "a ", "while."], delay=0.4))
    ui = navi_page.open()
    page = ui.page
    ui.send("Plan a picnic for Saturday")
    expect(page.locator("#stop-button")).to_be_visible()
    item = page.locator(".session-item.active")
    expect(item.locator(".session-title")).to_have_text("Plan a picnic for Saturday")
    expect(page.locator(".session-title", has_text="New chat")).to_have_count(0)
    ui.shot("first-run-title")
    ui.wait_idle()
    expect(item.locator(".session-title")).to_have_text("Plan a picnic for Saturday")
