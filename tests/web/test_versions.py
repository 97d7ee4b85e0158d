"""Versions in place: edit & resend and regenerate make forks, the message they start
from shows i/n arrows that move between the versions, and the sidebar lists the chat
once."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from tests.support.fake_llm import Reply
from tests.web.conftest import LLMScript, NaviPage
from tests.web.views import shoot_all


def test_edit_and_regenerate_keep_versions_in_place(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    llm(Reply(text="Paris."), Reply(text="Berlin."))
    ui = navi_page.open()
    page = ui.page
    ui.send("Capital of France?")
    ui.wait_idle()
    ui.send("Capital of Germany?")
    ui.wait_idle()
    original = ui.session_id
    second = page.locator("#conversation .message.user").nth(1)
    expect(second.locator(".versions")).to_have_count(0)

    # Edit the second question: version 2 of 2, in place.
    llm(Reply(text="Rome."))
    second.hover()
    second.locator('[data-action="edit"]').click()
    second.locator(".edit-box").fill("Capital of Italy?")
    second.locator('[data-action="send-edit"]').click()
    expect(page).not_to_have_url(re.compile(f"#{original}$"))
    ui.wait_idle()
    edited = ui.session_id
    second = page.locator("#conversation .message.user").nth(1)
    expect(second.locator(".version-count")).to_have_text("2/2")
    expect(page.locator("#conversation .message.user").first.locator(".versions")).to_have_count(0)

    # Regenerate its answer: a third version of the same message.
    llm(Reply(text="Rome, of course."))
    page.locator("#conversation .message.assistant").last.locator(
        '[data-action="regenerate"]'
    ).click()
    expect(page).not_to_have_url(re.compile(f"#{edited}$"))
    ui.wait_idle()
    second = page.locator("#conversation .message.user").nth(1)
    expect(second.locator(".version-count")).to_have_text("3/3")
    expect(page.locator("#conversation")).to_contain_text("Rome, of course.")
    # One chat in the sidebar, not three with the same title: the version open now.
    items = page.locator(".session-item")
    expect(items).to_have_count(1)
    expect(items.first).to_have_attribute("data-session-id", ui.session_id)
    expect(items.first.locator(".version-badge")).to_have_text("3")
    shoot_all(ui, "versions")

    # Previous goes back through the versions, next forward again.
    second.locator('[data-action="previous-version"]').click()
    expect(page).to_have_url(re.compile(f"#{edited}$"))
    expect(page.locator("#conversation")).to_contain_text("Rome.")
    second = page.locator("#conversation .message.user").nth(1)
    expect(second.locator(".version-count")).to_have_text("2/3")
    second.locator('[data-action="previous-version"]').click()
    expect(page).to_have_url(re.compile(f"#{original}$"))
    second = page.locator("#conversation .message.user").nth(1)
    expect(second.locator(".bubble")).to_have_text("Capital of Germany?")
    expect(second.locator(".version-count")).to_have_text("1/3")
    expect(second.locator('[data-action="previous-version"]')).to_be_disabled()
    expect(items).to_have_count(1)
    expect(items.first).to_have_attribute("data-session-id", original)
    expect(items.first).to_have_class(re.compile(r"\bactive\b"))
    second.locator('[data-action="next-version"]').click()
    expect(page).to_have_url(re.compile(f"#{edited}$"))
