"""A model picker per chat, the settings page, and the footer's dot tracking the LLM
(issue 23)."""

from __future__ import annotations

import json
import re
import urllib.request
from typing import Any

import pytest

pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from tests.support.fake_llm import FakeLLMServer, Reply
from tests.web.conftest import LLMScript, NaviPage
from tests.web.views import shoot_all


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def test_the_chat_picks_a_model_the_server_lists(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    navi_server.fake_llm.models = ["fake-model:latest", "big-model:70b", "small-model:1b"]
    llm(Reply(text="From the small one."), Reply(text="From the default."))
    ui = navi_page.open()
    page = ui.page
    picker = page.locator("#model-select")
    expect(picker.locator("option")).to_have_count(4)
    expect(picker.locator("option").first).to_have_text("Default · fake-model:latest")
    picker.select_option("small-model:1b")  # a new chat: picking creates it
    page.wait_for_function("() => location.hash.length > 1")
    expect(picker).to_have_value("small-model:1b")
    ui.send("Hello")
    ui.wait_idle()
    assert llm.loop_requests[-1]["model"] == "small-model:1b"
    session = _get(f"{ui.url}/sessions/{ui.session_id}")
    assert session["model"] == "small-model:1b"
    shoot_all(
        ui, "picker", before=lambda p: p.locator("#model-select").scroll_into_view_if_needed()
    )

    page.reload()
    expect(page.locator("#model-select")).to_have_value("small-model:1b")
    page.locator("#model-select").select_option("")
    page.wait_for_timeout(300)
    ui.send("Again")
    ui.wait_idle()
    assert llm.loop_requests[-1]["model"] == "fake-model:latest"


def test_the_settings_page_saves_for_the_user(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    navi_server.fake_llm.models = ["fake-model:latest", "small-model:1b"]
    llm(Reply(text="Hi"))
    ui = navi_page.open()
    page = ui.page
    page.click("#settings-button")
    dialog = page.get_by_test_id("settings-dialog")
    expect(dialog).to_be_visible()
    dialog.locator("select[name=model]").select_option("small-model:1b")
    dialog.locator("select[name=think]").select_option("off")
    dialog.locator("select[data-tool=terminal]").select_option("ask")
    shoot_all(ui, "settings")
    dialog.locator("[data-action=save-settings]").click()
    expect(dialog).to_be_hidden()
    saved = _get(f"{ui.url}/settings")
    assert (saved["model"], saved["think"]) == ("small-model:1b", "off")
    assert saved["tool_policy"] == {"terminal": "ask"}

    # A new chat takes the settings' model; its answers are asked without thinking.
    ui.send("Hello")
    ui.wait_idle()
    expect(page.locator("#model-select")).to_have_value("small-model:1b")
    assert llm.loop_requests[-1]["model"] == "small-model:1b"
    assert llm.loop_requests[-1].get("think") in (False, None)

    # A bad backend URL is refused in the dialog, with the server's reason.
    page.click("#settings-button")
    dialog = page.get_by_test_id("settings-dialog")
    expect(dialog.locator("select[name=think]")).to_have_value("off")
    dialog.locator("input[name=backend_url]").fill("http://169.254.169.254/")
    dialog.locator("[data-action=save-settings]").click()
    expect(dialog.locator(".settings-error")).to_contain_text("metadata")
    ui.shot("settings-refused")
    dialog.get_by_role("button", name="Cancel").click()


def test_the_footer_dot_tracks_the_llm(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    llm(Reply(text="Hi", delay_first=1.5))
    ui = navi_page.open()
    page = ui.page
    footer = page.locator("#backend-info")
    expect(footer).to_have_attribute("data-llm", "ok")
    expect(footer).to_have_attribute("title", "The model's server is reachable")
    ui.send("Hello")
    expect(footer).to_have_attribute("data-llm", "busy")  # waiting for the first token
    expect(footer).to_have_attribute("title", "Waiting for the model to start answering…")
    ui.wait_idle()
    expect(footer).to_have_attribute("data-llm", "ok")
    expect(footer).to_have_attribute("title", "The model's server answered 0 s ago")

    # The backend moves to a server that then stops answering: red, and the tooltip
    # says why (a connection that does not answer is not saved: it answered then).
    with FakeLLMServer.in_thread() as other:
        request = urllib.request.Request(
            f"{ui.url}/settings",
            data=json.dumps({"backend_url": other.url}).encode(),
            headers={"content-type": "application/json"},
            method="PATCH",
        )
        urllib.request.urlopen(request, timeout=30).close()
    page.reload()
    footer = page.locator("#backend-info")
    expect(footer).to_have_attribute("data-llm", "down")
    expect(footer).to_have_attribute(
        "title", re.compile(r"^The model's server does not answer: .+")
    )
    shoot_all(ui, "llm-down")
