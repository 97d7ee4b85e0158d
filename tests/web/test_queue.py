"""Typing the next message while an answer streams: it is queued (shown as such, below
the answer) and runs when the answer ends."""

from __future__ import annotations

import pytest

pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from tests.support.fake_llm import Reply
from tests.web.conftest import LLMScript, NaviPage
from tests.web.views import shoot_all


def test_a_message_typed_during_an_answer_is_queued(navi_page: NaviPage, llm: LLMScript) -> None:
    llm(
        Reply(text=["One ", "two ", "three ", "four ", "five ", "six."], delay=0.5),
        Reply(text="The second answer."),
    )
    ui = navi_page.open()
    page = ui.page
    ui.send("Count to six slowly")
    expect(page.locator("#stop-button")).to_be_visible()
    expect(page.locator(".composer-hint")).to_have_text("Enter to queue · Esc to stop")

    ui.send("Then say something else")
    queued = page.locator(".message.user.queued")
    expect(queued).to_have_count(1)
    expect(queued.locator(".queued-mark")).to_have_text("Queued")
    expect(queued.locator(".bubble")).to_have_text("Then say something else")
    # Below the answer that is still streaming.
    assert page.locator(".conversation-inner > *").last.evaluate(
        "(el) => el.classList.contains('queued-messages')"
    )
    shoot_all(ui, "queued")

    expect(page.locator(".message.assistant")).to_have_count(2, timeout=20_000)
    ui.wait_idle()
    expect(page.locator(".message.user.queued")).to_have_count(0)
    expect(page.locator(".queued-messages")).to_have_count(0)
    order = page.locator(".conversation-inner > .message").evaluate_all(
        "(els) => els.map((el) => el.dataset.role)"
    )
    assert order == ["user", "assistant", "user", "assistant"]
    expect(page.locator(".message.assistant").last).to_contain_text("The second answer.")
    # The history agrees.
    page.reload()
    page.wait_for_selector("#profile-select option", state="attached")
    expect(page.locator(".message.user .bubble")).to_have_text(
        ["Count to six slowly", "Then say something else"]
    )
