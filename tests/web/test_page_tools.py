"""The page's own tools, in a real browser: export a chat as Markdown, the keyboard
shortcut sheet, the light/dark switch beside "follow the system", and the top bar's
buttons all on screen at phone width."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from tests.support.fake_llm import FakeToolCall, Reply
from tests.web.conftest import OUTPUT, LLMScript, NaviPage
from tests.web.views import PHONE, shoot_all


def test_export_a_chat_as_markdown(navi_page: NaviPage, llm: LLMScript) -> None:
    llm(
        Reply(tool_calls=[FakeToolCall(name="get_current_time", arguments={})]),
        Reply(text="It is **noon**.\n\n| a | b |\n|---|--:|\n| 1 | 2 |"),
    )
    ui = navi_page.open()
    page = ui.page
    ui.send("What time is it?")
    ui.wait_idle()
    expect(page.locator("#export-button")).to_be_visible()
    with page.expect_download() as download:
        page.click("#export-button")
    saved = OUTPUT / f"{ui.name}.md"
    download.value.save_as(saved)
    text = saved.read_text()
    assert download.value.suggested_filename == "What-time-is-it.md"
    assert text.startswith("# What time is it?\n")
    assert "### You" in text and "### Navi" in text
    assert "What time is it?" in text
    assert "It is **noon**." in text and "|---|--:|" in text
    assert "`get_current_time`" in text
    # The keyboard does the same.
    with page.expect_download() as again:
        page.keyboard.press("Control+Shift+S")
    assert Path(again.value.path()).read_text().startswith("# What time is it?\n")


def test_the_shortcut_sheet_and_the_shortcuts(navi_page: NaviPage, navi_server: object) -> None:
    ui = navi_page.open()
    page = ui.page
    page.locator("body").click(position={"x": 700, "y": 300})
    page.keyboard.press("?")
    sheet = page.get_by_test_id("shortcuts")
    expect(sheet).to_be_visible()
    expect(sheet).to_contain_text("Keyboard shortcuts")
    expect(sheet).to_contain_text("Export this chat as Markdown")
    shoot_all(ui, "shortcuts")
    page.keyboard.press("Escape")
    expect(sheet).to_have_count(0)
    # `?` typed in the message box is text, not the sheet.
    page.click("#prompt")
    page.keyboard.type("why?")
    expect(page.locator("#prompt")).to_have_value("why?")
    expect(sheet).to_have_count(0)
    # The sidebar's button opens it too; Ctrl+K goes to the search.
    page.click("#shortcuts-button")
    expect(sheet).to_be_visible()
    page.get_by_role("button", name="Close").click()
    page.keyboard.press("Control+k")
    expect(page.locator("#session-search")).to_be_focused()


def test_light_dark_and_follow_the_system(navi_page: NaviPage) -> None:
    ui = navi_page.open()
    page = ui.page
    html = page.locator("html")
    background = "() => getComputedStyle(document.body).backgroundColor"
    page.emulate_media(color_scheme="light")
    expect(html).to_have_attribute("data-theme", "light")
    expect(page.locator('.theme-switch [data-choice="system"]')).to_have_attribute(
        "aria-pressed", "true"
    )
    # Following the system: it changes with it.
    page.emulate_media(color_scheme="dark")
    expect(html).to_have_attribute("data-theme", "dark")
    assert page.evaluate(background) == "rgb(33, 33, 33)"

    page.click('.theme-switch [data-choice="light"]')
    expect(html).to_have_attribute("data-theme", "light")
    assert page.evaluate(background) == "rgb(255, 255, 255)"
    assert page.evaluate("localStorage.getItem('navi.theme')") == "light"
    hljs_dark = page.locator('link[data-theme-sheet="dark"]')
    expect(hljs_dark).to_have_attribute("media", "not all")
    ui.shot("light-on-a-dark-system")
    # Kept across a reload, from the first paint.
    page.reload()
    page.wait_for_selector("#profile-select option", state="attached")
    expect(html).to_have_attribute("data-theme", "light")

    page.emulate_media(color_scheme="light")
    page.click('.theme-switch [data-choice="dark"]')
    expect(html).to_have_attribute("data-theme", "dark")
    ui.shot("dark-on-a-light-system")
    page.keyboard.press("Control+Shift+L")
    expect(html).to_have_attribute("data-theme", "light")

    page.click('.theme-switch [data-choice="system"]')
    assert page.evaluate("localStorage.getItem('navi.theme')") is None
    expect(html).to_have_attribute("data-theme", "light")


def test_the_top_bar_fits_a_phone(navi_page: NaviPage, llm: LLMScript) -> None:
    llm(Reply(text="Hello."))
    ui = navi_page.open()
    page = ui.page
    ui.send("Hi")
    ui.wait_idle()
    page.set_viewport_size(PHONE)
    for button in ("#menu-button", "#export-button", "#replay-button"):
        box = page.locator(button).bounding_box()
        assert box is not None, button
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (button, box)
    shoot_all(ui, "topbar")
