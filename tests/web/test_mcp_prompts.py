"""MCP prompts and progress in a real browser, against a real MCP server
(tests/navi/mcp/mcp_prompt_server.py): ``/`` in the message box lists the prompts, a
prompt's argument is asked for and its text lands in the box (nothing is sent); a slow
tool's progress shows in its running card, live and in the replay."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)
pytest.importorskip("mcp")

from playwright.sync_api import expect

from tests.navi.mcp.prompt_support import prompt_entry
from tests.support.fake_llm import FakeToolCall, Reply
from tests.web.conftest import LLMScript, NaviPage


@pytest.fixture
def navi_server(tmp_path: Path) -> Iterator[Any]:
    """The page's server, with the prompt-and-progress MCP server configured."""
    from tests.support.navi_server import navi_server_for

    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"pr": prompt_entry()}}))
    with navi_server_for(tmp_path, mcp_config=str(config)) as running:
        deadline = time.monotonic() + 40
        while not httpx.get(f"{running.url}/mcp/prompts").json():
            assert time.monotonic() < deadline, "the MCP server's prompts never came"
            time.sleep(0.1)
        yield running


def test_slash_offers_the_prompts_and_puts_one_in_the_box(navi_page: NaviPage) -> None:
    ui = navi_page.open()
    page = ui.page
    box = page.locator("#prompt")
    box.click()
    page.keyboard.type("/")
    items = page.get_by_test_id("prompt-item")
    expect(items.first).to_be_visible()
    expect(items).to_have_count(5)
    # Filter as you type; the arrows move; Esc closes without touching the box.
    page.keyboard.type("b")
    expect(items).to_have_count(2)  # blank, broken
    ui.shot("menu")
    page.keyboard.press("Escape")
    expect(page.locator("#prompt-menu")).to_be_hidden()
    expect(box).to_have_value("/b")
    box.fill("")
    page.keyboard.type("/rev")
    expect(items).to_have_count(1)
    expect(items.first).to_have_attribute("data-prompt", "pr/review")
    page.keyboard.press("Enter")
    form = page.get_by_test_id("prompt-form")
    expect(form).to_be_visible()
    page.keyboard.type("src/app.py")  # the first field (path) has the caret
    ui.shot("arguments")
    page.keyboard.press("Enter")
    expect(box).to_have_value("Please review the file src/app.py.")
    expect(form).to_be_hidden()
    expect(page.locator(".message.user")).to_have_count(0)  # nothing was sent


def test_a_prompt_without_arguments_is_picked_with_the_arrows(
    navi_page: NaviPage, llm: LLMScript
) -> None:
    ui = navi_page.open()
    page = ui.page
    page.locator("#prompt").click()
    page.keyboard.type("/")
    items = page.get_by_test_id("prompt-item")
    expect(items).to_have_count(5)
    names = [items.nth(i).get_attribute("data-prompt") for i in range(5)]
    target = names.index("pr/summarize")
    for _ in range(target):
        page.keyboard.press("ArrowDown")
    expect(items.nth(target)).to_have_class("prompt-item active")
    page.keyboard.press("Enter")
    expect(page.locator("#prompt")).to_have_value("Summarize what we said so far.")
    expect(page.get_by_test_id("prompt-form")).to_be_hidden()
    # A slash that names no prompt is text: Enter sends it as it always did.
    llm(Reply(text="A path, then."))
    page.locator("#prompt").fill("")
    page.keyboard.type("/etc/hosts")
    expect(page.locator("#prompt-menu")).to_contain_text("No prompt matches")
    page.keyboard.press("Enter")
    expect(page.locator(".message.user")).to_have_count(1)
    expect(page.locator(".message.user")).to_contain_text("/etc/hosts")
    expect(page.locator("#prompt-menu")).to_be_hidden()


def test_a_slow_tools_progress_shows_in_its_running_card(
    navi_page: NaviPage, llm: LLMScript
) -> None:
    call = FakeToolCall(name="mcp__pr__slow_work", arguments={"steps": 8, "delay": 0.5})
    llm(Reply(tool_calls=[call]), Reply(text="All done."))
    ui = navi_page.open()
    page = ui.page
    ui.send("Work slowly")
    card = page.locator(".tool-card[data-tool='mcp__pr__slow_work']")
    line = card.get_by_test_id("tool-progress")
    expect(line).to_be_visible()
    expect(line).to_contain_text("/ 8")
    expect(line).to_contain_text("step ")
    assert card.evaluate("el => el.classList.contains('running')")
    bar = line.locator("progress")
    assert bar.evaluate("el => el.max") == 8
    ui.shot("progress")
    ui.wait_idle()
    expect(card).to_have_class("tool-card ok")
    expect(line).to_have_count(0)  # the finished card shows its result instead


def test_the_replay_shows_the_progress_in_the_running_card(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    call = FakeToolCall(name="mcp__pr__slow_work", arguments={"steps": 4, "delay": 0.6})
    llm(Reply(tool_calls=[call]), Reply(text="All done."))
    with httpx.Client(base_url=navi_server.url, timeout=60) as http:
        sid = http.post("/sessions", json={"title": "Slow"}).json()["session_id"]
        http.post(f"/sessions/{sid}/messages", json={"content": "work"}).raise_for_status()
        lines = http.get(f"/sessions/{sid}/events").text.splitlines()
    log = [json.loads(line) for line in lines]
    first = next(e for e in log if e["type"] == "tool.progress")
    ui = navi_page
    page = ui.page
    page.goto(f"{ui.url}/#replay/{sid}")
    expect(page.locator(".tl-lane").first).to_be_visible()
    frame = page.locator(".tl-frame")
    frame.focus()
    page.keyboard.press("Home")
    head = log[-1]["seq"]
    position = page.locator("#replay-position")
    expect(position).to_have_text(re.compile(r"^Step 0 of "))
    for _ in range(first["seq"]):
        page.keyboard.press("ArrowRight")
    expect(position).to_have_text(f"Step {first['seq']} of {head} · a tool said how far it got")
    card = page.locator("#replay-conversation .tool-card[data-tool='mcp__pr__slow_work']")
    line = card.get_by_test_id("tool-progress")
    expect(line).to_be_visible()
    expect(line).to_contain_text(f"{first['event']['progress']:g} / 4")
    ui.shot("replay")
