"""What was shown live stays after a reload (issue 23): a partial answer cut by a dying
LLM server, with its error and a Retry; "retrying 2/4" while Navi retries; "Stopped";
the figures under an answer; "Thought briefly"."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from tests.support.fake_llm import Reply
from tests.support.navi_server import navi_server_for
from tests.web.conftest import LLMScript, NaviPage
from tests.web.views import shoot_all


@pytest.fixture
def navi_server(tmp_path: Path) -> Iterator[Any]:
    """Retries a second apart, so that "retrying 2/4" can be seen."""
    with navi_server_for(tmp_path, llm_retry_backoff_s=0.6) as running:
        yield running


def _words(count: int) -> list[str]:
    return [f"w{i:02d} " for i in range(count)]


def test_a_dying_llm_server_keeps_the_partial_answer_with_the_error_and_a_retry(
    navi_page: NaviPage, llm: LLMScript
) -> None:
    down = Reply(error_before="connection refused", error_status=503)
    llm(Reply(text=_words(30), delay=0.03, drop_after=8), down, down, down)
    ui = navi_page.open()
    page = ui.page
    ui.send("Tell me a story")
    retrying = page.get_by_test_id("retrying")
    expect(retrying).to_contain_text(re.compile(r"retrying 2/4", re.IGNORECASE))
    # The partial answer stays on screen (dimmed) while Navi retries; the dot is amber.
    expect(page.locator(".text-block.superseded")).to_contain_text("w03")
    expect(page.locator("#backend-info")).to_have_attribute("data-llm", "busy")
    shoot_all(ui, "retrying")
    expect(retrying).to_contain_text(re.compile(r"4/4"), timeout=15_000)

    error = page.locator(".message.assistant .error-block.run-error")
    expect(error).to_be_visible(timeout=15_000)
    ui.wait_idle()
    expect(page.locator(".message.assistant .text-block")).to_contain_text("w03")
    expect(page.locator(".superseded")).to_have_count(0)
    expect(error.get_by_role("button", name="Retry")).to_be_visible()
    expect(page.locator("#backend-info")).to_have_attribute("data-llm", "down")
    live_text = page.locator(".message.assistant .text-block").inner_text()
    live_error = error.locator(".error-text").inner_text()
    shoot_all(ui, "failed-live")

    page.reload()
    page.wait_for_selector(".message.assistant")
    expect(page.locator(".message.assistant .text-block")).to_have_text(live_text)
    reloaded = page.locator(".message.assistant .error-block.run-error")
    expect(reloaded.locator(".error-text")).to_have_text(live_error)
    expect(reloaded.get_by_role("button", name="Retry")).to_be_visible()
    shoot_all(ui, "failed-reloaded")

    # Retry sends the message again (a new version of the chat); the failed one stays.
    llm(Reply(text="The whole story."))
    failed_chat = ui.session_id
    reloaded.get_by_role("button", name="Retry").click()
    expect(page.locator(".message.assistant .text-block").last).to_have_text("The whole story.")
    assert ui.session_id != failed_chat
    expect(page.locator(".message.user .bubble")).to_have_text("Tell me a story")
    expect(page.locator("#backend-info")).to_have_attribute("data-llm", "ok")


def test_stopped_figures_and_thought_briefly_survive_a_reload(
    navi_page: NaviPage, llm: LLMScript
) -> None:
    llm(
        Reply(thinking="hmm", text="Hello **there**.", completion_tokens=65),
        Reply(text=_words(200), delay=0.08),
    )
    ui = navi_page.open()
    page = ui.page
    ui.send("Hi")
    ui.wait_idle()
    first = page.locator(".message.assistant").first
    expect(first.locator(".thinking .label")).to_have_text("Thought briefly")
    stats = first.locator(".turn-stats")
    expect(stats).to_contain_text("65 tokens")
    live_stats = stats.inner_text()

    ui.send("Count slowly")
    expect(page.locator(".text-block").last).to_contain_text("w03")
    page.click("#stop-button")
    expect(page.locator(".notice.stopped")).to_be_visible()
    ui.wait_idle()
    live_partial = page.locator(".message.assistant").last.locator(".text-block").inner_text()

    page.reload()
    page.wait_for_selector(".message.assistant")
    first = page.locator(".message.assistant").first
    expect(first.locator(".thinking .label")).to_have_text("Thought briefly")
    expect(first.locator(".turn-stats")).to_have_text(live_stats)
    last = page.locator(".message.assistant").last
    expect(last.locator(".text-block")).to_have_text(live_partial)
    expect(last.locator(".notice.stopped")).to_have_text("Stopped")
    shoot_all(ui, "reloaded")
