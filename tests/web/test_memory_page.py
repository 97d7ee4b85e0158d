"""The Memory page against a scripted model that returns extraction JSON: a chat teaches
a fact a moment after the run (NAVI_MEMORY_EXTRACT_AFTER_S=1), the page says "Memory
updated" quietly, lists the fact with a link to the message it came from, edits it in
place and forgets it after a confirmation — at 1280x800 and 390x844. And a model whose
extraction answers are unusable is named once, plainly."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
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

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def navi_server(tmp_path: Path) -> Iterator[Any]:
    from tests.support.navi_server import navi_server_for

    with navi_server_for(tmp_path, memory_extract_after_s=1.0) as running:
        yield running


def extracting(llm: LLMScript) -> None:
    """Extraction calls get a fact from the user's message; the summary a sentence."""

    def respond(request: Any) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        if not body.get("tools") and "source_seqs" in prompt:
            seq = int(re.findall(r"\[seq (\d+)\] user:", prompt)[0])
            fact = {"category": "preference", "key": "editor", "value": "Uses Neovim"}
            return Reply(text=json.dumps({"facts": [{**fact, "source_seqs": [seq]}]}))
        if not body.get("tools") and "long-term memory" in prompt:
            return Reply(text="The user edits with Neovim.")
        return llm.respond(request)

    llm.fake.responder = respond


def facts(url: str) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = httpx.get(f"{url}/memory/facts", timeout=10).json()
    return listed


def test_learn_see_edit_follow_and_forget(
    navi_page: NaviPage, navi_server: Any, llm: LLMScript
) -> None:
    url = navi_server.url
    llm(Reply(text="Noted: Neovim."), repeat_last=True)
    extracting(llm)
    ui = navi_page.open()
    page = ui.page
    page.set_viewport_size(DESKTOP)
    ui.send("I use Neovim as my editor.")
    ui.wait_idle()
    chat = ui.session_id
    notice = page.get_by_test_id("memory-notice")
    expect(notice).to_contain_text("Memory updated", timeout=20_000)
    ui.shot("notice-desktop")
    notice.get_by_role("link", name="See").click()

    dialog = page.get_by_test_id("memory-page")
    row = dialog.locator(".memory-fact")
    expect(row).to_have_count(1)
    expect(row.locator(".memory-value")).to_have_text("Uses Neovim")
    ui.shot("page-desktop")

    row.locator('[data-action="edit-fact"]').click()
    row.locator("input.memory-edit").fill("Uses Helix")
    row.locator("input.memory-edit").press("Enter")
    expect(row.locator(".memory-value")).to_have_text("Uses Helix")
    [edited] = facts(url)
    assert edited["value"] == "Uses Helix" and edited["edited_by_user"] is True

    assert edited["source"] is None
    expect(row.locator("a.memory-source")).to_have_count(0)
    dialog.get_by_role("button", name="Close memory").click()
    expect(dialog).to_have_count(0)

    # The phone: the page from its address, the same list.
    page.set_viewport_size(PHONE)
    page.goto(f"{url}/#memory")
    expect(dialog.locator(".memory-value")).to_have_text("Uses Helix")
    ui.shot("page-phone")
    dialog.locator('[data-action="forget-fact"]').click()
    confirm = page.get_by_test_id("confirm-dialog")
    confirm.get_by_role("button", name="Forget").click()
    expect(dialog.locator(".memory-fact")).to_have_count(0)
    assert facts(url) == []
    dialog.get_by_role("button", name="Close memory").click()
    assert chat


def test_the_source_link_opens_the_chat_at_the_message(
    navi_page: NaviPage, navi_server: Any, llm: LLMScript
) -> None:
    llm(Reply(text="Noted: Neovim."), repeat_last=True)
    extracting(llm)
    ui = navi_page.open()
    page = ui.page
    ui.send("I use Neovim as my editor.")
    ui.wait_idle()
    chat = ui.session_id
    expect(page.get_by_test_id("memory-notice")).to_contain_text("Memory updated", timeout=20_000)
    page.goto(f"{navi_server.url}/")  # elsewhere: a new chat
    page.locator("#memory-button").click()
    page.get_by_test_id("memory-page").locator("a.memory-source").click()
    expect(page.get_by_test_id("memory-page")).to_have_count(0)
    assert ui.session_id == chat
    highlighted = page.locator(".message.user.memory-highlight")
    expect(highlighted).to_contain_text("I use Neovim")
    ui.shot("source")


def test_a_model_that_cannot_extract_is_named_once(
    navi_page: NaviPage, navi_server: Any, llm: LLMScript
) -> None:
    llm(Reply(text="Hello."), repeat_last=True)  # extraction calls get "[]": unusable
    ui = navi_page.open()
    page = ui.page
    ui.send("I use Neovim as my editor.")
    ui.wait_idle()
    notice = page.get_by_test_id("memory-notice")
    expect(notice).to_contain_text("cannot pick out facts", timeout=20_000)
    ui.shot("cannot")
    page.reload()
    page.wait_for_selector("#profile-select option", state="attached")
    page.wait_for_timeout(1_000)
    expect(notice).to_be_hidden()
    page.goto(f"{navi_server.url}/#memory")
    expect(page.get_by_test_id("memory-page")).to_contain_text("cannot pick out facts")
