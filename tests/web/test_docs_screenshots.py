"""The screens the README and docs/web-client.md show, at 1280x800 and 390x844: the
welcome screen, Settings → Connection, the Memory page and an approval card. Each test
checks what the screen must say, then leaves its picture in test-output/web/; with
``NAVI_DOCS_SCREENSHOTS=1`` it also writes docs/images/<screen>-<size>.png, which is how
the committed pictures are made again after the page changes."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from tests.support.fake_llm import FakeToolCall, Reply
from tests.web.conftest import ROOT, LLMScript, NaviPage

SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
DOCS_IMAGES = ROOT / "docs" / "images"


MODELS = ("llama3.2:3b", "qwen3:8b")  # what a reader's Ollama holds, not "fake-model"


@pytest.fixture
def navi_server(tmp_path: Path) -> Iterator[Any]:
    """The real server with each tool's own approval default (a file write asks), on a
    fake Ollama that lists a reader's models."""
    from navi.llm.settings import LLMSettings
    from tests.support.fake_llm import FakeLLMServer
    from tests.support.navi_server import run_server

    with FakeLLMServer.in_thread(models=MODELS) as fake:
        llm = LLMSettings(backend="ollama", ollama_host=fake.url, default_model=MODELS[0])
        with run_server(tmp_path, fake, tool_approval="", llm=llm) as running:
            yield running


def picture(ui: NaviPage, screen: str, size: str) -> None:
    """The screen as the test left it; into docs/images/ when asked for."""
    made = ui.shot(f"{screen}-{size}")
    if os.environ.get("NAVI_DOCS_SCREENSHOTS") == "1":
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(made, DOCS_IMAGES / f"{screen}-{size}.png")


def opened(ui: NaviPage, size: str) -> NaviPage:
    ui.page.set_viewport_size(SIZES[size])
    return ui.open()


def open_sidebar_on_a_phone(ui: NaviPage) -> None:
    closed = ui.page.evaluate(
        "innerWidth <= 800 && !document.querySelector('#app').classList.contains('sidebar-open')"
    )
    if closed:
        ui.page.click("#menu-button")


@pytest.mark.parametrize("size", SIZES)
def test_the_welcome_screen(navi_page: NaviPage, size: str) -> None:
    ui = opened(navi_page, size)
    expect(ui.page.locator("#prompt")).to_be_visible()
    expect(ui.page.locator("#profile-select")).to_have_value("secretary")
    picture(ui, "welcome", size)


@pytest.mark.parametrize("size", SIZES)
def test_settings_connection(navi_page: NaviPage, size: str) -> None:
    ui = opened(navi_page, size)
    open_sidebar_on_a_phone(ui)
    ui.page.click("#settings-button")
    dialog = ui.page.get_by_test_id("settings-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator("select[name=backend_type]")).to_have_value("ollama")
    dialog.locator("[data-action=verify-connection]").click()
    result = dialog.get_by_test_id("connection-result")
    expect(result).to_contain_text(MODELS[1])  # the models Verify found
    picture(ui, "settings-connection", size)


@pytest.mark.parametrize("size", SIZES)
def test_the_memory_page(navi_page: NaviPage, llm: LLMScript, size: str) -> None:
    told = [
        ("preference", "units", "Prefers metric units"),
        ("environment", "editor", "Edits code in Neovim on Arch Linux"),
        ("project", "garden", "Plans a vegetable garden for the spring"),
    ]
    calls = [
        FakeToolCall(name="memory_remember", arguments={"category": c, "key": k, "value": v})
        for c, k, v in told
    ]
    llm(Reply(tool_calls=calls), Reply(text="I'll remember these."))
    ui = opened(navi_page, size)
    ui.send("Remember that I prefer metric units, edit in Neovim on Arch, and plan a garden.")
    for _ in told:  # each fact asks first; the card shows it
        panel = ui.page.locator('[data-testid="approval"]:not(.decided)').first
        panel.get_by_role("button", name="Approve", exact=True).click()
    ui.wait_idle()
    ui.page.goto(f"{ui.url}/#memory")
    dialog = ui.page.get_by_test_id("memory-page")
    expect(dialog.locator(".memory-fact")).to_have_count(3)
    expect(dialog).to_contain_text("Prefers metric units")
    picture(ui, "memory", size)


@pytest.mark.parametrize("size", SIZES)
def test_an_approval_card(navi_page: NaviPage, llm: LLMScript, size: str) -> None:
    note = "Groceries:\n- tomatoes\n- basil\n- olive oil"
    write = FakeToolCall(
        name="filesystem",
        arguments={"action": "write", "path": "shopping.md", "content": note},
    )
    llm(Reply(tool_calls=[write]), Reply(text="Written."))
    ui = opened(navi_page, size)
    ui.send("Write my shopping list to shopping.md")
    panel = ui.page.locator('[data-testid="approval"]:not(.decided)')
    expect(panel).to_have_count(1)
    expect(panel).to_contain_text("Waiting for your approval")
    panel.scroll_into_view_if_needed()
    picture(ui, "approval", size)
    panel.get_by_role("button", name="Deny", exact=True).click()
    ui.wait_idle()
