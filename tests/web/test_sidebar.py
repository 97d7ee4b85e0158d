"""The sessions sidebar in a real browser: pin, delete with confirmation, search by title
and by content, the URL hash and back/forward, and the backend shown."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

pytest.importorskip(
    "tests.support.navi_server",
    reason="the browser tests need the navi_server fixture (tests/support/navi_server.py)",
)
pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from tests.support.fake_llm import Reply
from tests.web.conftest import LLMScript, NaviPage


def _create(url: str, title: str) -> str:
    response = httpx.post(f"{url}/sessions", json={"title": title}, timeout=10)
    response.raise_for_status()
    session_id: str = response.json()["session_id"]
    return session_id


def _say(url: str, session_id: str, text: str) -> None:
    response = httpx.post(
        f"{url}/sessions/{session_id}/messages", json={"content": text}, timeout=30
    )
    response.raise_for_status()


def _item(ui: NaviPage, session_id: str) -> Any:
    return ui.page.locator(f'.session-item[data-session-id="{session_id}"]')


def test_pin_delete_and_search(navi_page: NaviPage, llm: LLMScript, navi_server: Any) -> None:
    url = navi_server.url
    alpha = _create(url, "Alpha notes")
    beta = _create(url, "Beta plans")
    gamma = _create(url, "Gamma ideas")
    llm(Reply(text="The secret animal is a zebra."))
    _say(url, beta, "Which animal?")

    ui = navi_page.open()
    page = ui.page
    for session_id in (alpha, beta, gamma):
        expect(_item(ui, session_id)).to_be_visible()

    # Pin: Gamma moves to the top, under "Pinned".
    _item(ui, gamma).hover()
    _item(ui, gamma).locator('[data-action="pin"]').click()
    expect(page.locator(".session-item").first).to_have_attribute("data-session-id", gamma)
    expect(page.locator(".session-group").first).to_have_text("Pinned")
    expect(_item(ui, gamma)).to_have_class(re.compile(r"\bpinned\b"))
    # Unpin puts it back among the others.
    _item(ui, gamma).hover()
    _item(ui, gamma).locator('[data-action="pin"]').click()
    expect(_item(ui, gamma)).not_to_have_class(re.compile(r"\bpinned\b"))
    _item(ui, gamma).hover()
    _item(ui, gamma).locator('[data-action="pin"]').click()
    expect(_item(ui, gamma)).to_have_class(re.compile(r"\bpinned\b"))

    # Search by title, then by content (the server searches messages).
    page.fill("#session-search", "beta")
    expect(page.locator(".session-item")).to_have_count(1)
    expect(_item(ui, beta)).to_be_visible()
    page.fill("#session-search", "zebra")
    expect(_item(ui, beta)).to_be_visible()
    expect(_item(ui, alpha)).to_have_count(0)
    page.fill("#session-search", "no such chat anywhere")
    expect(page.locator(".session-empty")).to_contain_text("No chats match")
    ui.shot("search")
    page.fill("#session-search", "")
    expect(_item(ui, alpha)).to_be_visible()

    # Delete asks first; Cancel keeps the chat, Delete removes it (also on the server).
    _item(ui, alpha).hover()
    _item(ui, alpha).locator('[data-action="delete"]').click()
    dialog = page.locator('[data-testid="confirm-dialog"]')
    expect(dialog).to_be_visible()
    ui.shot("confirm-delete")
    dialog.locator('button[value="cancel"]').click()
    expect(_item(ui, alpha)).to_be_visible()
    _item(ui, alpha).hover()
    _item(ui, alpha).locator('[data-action="delete"]').click()
    page.locator('[data-testid="confirm-dialog"] button[value="ok"]').click()
    expect(_item(ui, alpha)).to_have_count(0)
    listed = httpx.get(f"{url}/sessions", timeout=10).json()
    assert alpha not in {s["session_id"] for s in listed}
    assert {s["session_id"]: s["pinned"] for s in listed}[gamma] is True

    # The backend and model are shown.
    expect(page.locator("#backend-info")).to_contain_text("·")


def test_the_url_hash_holds_the_session_and_back_forward_work(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    url = navi_server.url
    llm(Reply(text="Answer one."), Reply(text="Answer two."))
    first = _create(url, "First chat")
    second = _create(url, "Second chat")
    _say(url, first, "Question one")
    _say(url, second, "Question two")

    ui = navi_page.open(first)
    page = ui.page
    expect(page.locator(".message.assistant")).to_contain_text("Answer one.")
    _item(ui, second).locator(".session-link").click()
    expect(page.locator(".message.assistant")).to_contain_text("Answer two.")
    assert ui.session_id == second
    expect(_item(ui, second)).to_have_class(re.compile(r"\bactive\b"))
    page.go_back()
    expect(page.locator(".message.assistant")).to_contain_text("Answer one.")
    assert ui.session_id == first
    page.go_forward()
    expect(page.locator(".message.assistant")).to_contain_text("Answer two.")
    # A bookmark (a fresh page on the URL) opens the same chat.
    ui.open(first)
    expect(page.locator(".message.user .bubble")).to_have_text("Question one")
    # New chat: no hash, an empty page with the profile picker.
    page.click("#new-chat")
    expect(page.locator(".empty-state")).to_be_visible()
    assert ui.session_id == ""


def test_phone_width_has_a_drawer(navi_page: NaviPage, llm: LLMScript, navi_server: Any) -> None:
    session_id = _create(navi_server.url, "Phone chat")
    page = navi_page.page
    page.set_viewport_size({"width": 390, "height": 844})
    ui = navi_page.open(session_id)
    expect(page.locator("#sidebar")).not_to_be_in_viewport()
    page.click("#menu-button")
    expect(page.locator("#sidebar")).to_be_in_viewport(ratio=1)
    page.wait_for_timeout(300)  # the slide-in transition, for the picture
    ui.shot("drawer")
    _item(ui, session_id).locator(".session-link").click()
    expect(page.locator("#sidebar")).not_to_be_in_viewport()
    expect(page.locator("#prompt")).to_be_visible()
