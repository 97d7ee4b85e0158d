"""The small things of a turn a designer would not ship (issue 33, point 5): the embedded
model's "answer was cut" note outside the code block it cut, Copy and Regenerate under
an answer stopped live, a context meter that never reads 0 for "not known yet", the task
dock closing with its run, and a decision's line in plain words after a reload."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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

from navi.llm.embedded import CAP_NOTE, REPETITION_NOTE
from tests.support.fake_llm import FakeToolCall, Reply
from tests.web.conftest import LLMScript, NaviPage
from tests.web.views import DESKTOP, PHONE

UNKNOWN = re.compile("^\N{EN DASH} / \\d")  # the window known, its use not yet


@pytest.mark.parametrize("note", [CAP_NOTE.format(cap=512), REPETITION_NOTE])
def test_the_cut_note_is_drawn_outside_the_code_block(
    navi_page: NaviPage, llm: LLMScript, note: str
) -> None:
    # The answer stops inside a code block (no closing fence), and the note follows.
    llm(
        Reply(
            text=[
                "Here is the script:\n\n",
                "```python\n",
                "for i in range(3):\n",
                "    print(i)\n",
                note,
            ]
        )
    )
    ui = navi_page.open()
    ui.send("Write a script")
    ui.wait_idle()
    answer = ui.page.locator(".message.assistant .text-block").last
    code = answer.locator(".code-block code")
    expect(code).to_have_count(1)
    expect(code).to_contain_text("print(i)")
    expect(code).not_to_contain_text("embedded model")
    # The note is a paragraph of its own, in italics, after the code.
    expect(answer.locator(":scope > p > em")).to_have_text(note.strip().strip("*"))


def _slow_words(count: int, delay: float = 0.1) -> Reply:
    return Reply(text=[f"word{i} " for i in range(count)], delay=delay)


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_live_stop_leaves_copy_and_regenerate(
    navi_page: NaviPage, llm: LLMScript, size: dict[str, int]
) -> None:
    llm(_slow_words(200))
    navi_page.page.set_viewport_size(size)
    ui = navi_page.open()
    page = ui.page
    ui.send("Count slowly")
    expect(page.locator(".text-block").last).to_contain_text("word3")
    page.click("#stop-button")
    ui.wait_idle()
    turn = page.locator(".message.assistant").last
    expect(turn.locator(".notice.stopped")).to_be_visible()
    # Without a reload: the row under the answer, as a finished answer has.
    footer = turn.locator(".turn-footer")
    expect(footer.locator('[data-action="regenerate"]')).to_be_visible()
    expect(footer.get_by_role("button", name="Copy answer")).to_be_visible()
    # Regenerate sends the question again (a new version of the chat).
    llm(Reply(text="All counted."))
    original = ui.session_id
    footer.locator('[data-action="regenerate"]').click()
    expect(page).not_to_have_url(re.compile(f"#{original}$"))
    ui.wait_idle()
    expect(page.locator(".message.assistant").last).to_contain_text("All counted.")


def test_the_context_meter_never_reads_zero(navi_page: NaviPage, llm: LLMScript) -> None:
    meter = navi_page.page.locator("#context-meter")
    figures = meter.locator(".meter-text")
    # A first message waiting for the model: the window is known, what it holds is not.
    llm(Reply(text="Hello.", delay_first=2.0, prompt_tokens=1500))
    ui = navi_page.open()
    page = ui.page
    ui.send("Hi")
    expect(page.locator('[data-testid="waiting"]')).to_be_visible()
    expect(meter).to_be_visible()
    expect(figures).to_have_text(UNKNOWN)
    expect(meter).to_have_attribute("title", re.compile("known once the model has answered"))
    ui.wait_idle()
    expect(figures).to_have_text(re.compile(r"^1\.5k / \d"))

    # A first message stopped before the model said anything: not 0 either.
    llm(Reply(text="Too late.", delay_first=30.0))
    page.click("#new-chat")
    ui.send("Hi again")
    expect(page.locator('[data-testid="waiting"]')).to_be_visible()
    page.click("#stop-button")
    ui.wait_idle()
    expect(page.locator(".notice.stopped")).to_be_visible()
    expect(figures).to_have_text(UNKNOWN)
    assert not re.match(r"^0 ", figures.inner_text())


def test_the_task_dock_closes_with_its_run(navi_page: NaviPage, llm: LLMScript) -> None:
    items = [{"text": "Look it up"}, {"text": "Answer"}]
    llm(
        Reply(tool_calls=[FakeToolCall(name="todo", arguments={"action": "set", "items": items})]),
        _slow_words(30, delay=0.1),
    )
    ui = navi_page.open()
    page = ui.page
    dock = page.locator("#todo-dock")
    ui.send("Plan and answer")
    # While the run works on its list, the dock shows it.
    expect(dock).to_be_visible()
    expect(dock.locator(".todo-count")).to_have_text("0/2")
    ui.wait_idle()
    # The run is over: the dock went with it, and stays gone after a reload.
    expect(dock).to_be_hidden()
    page.reload()
    expect(page.locator(".message.assistant")).to_have_count(1)
    expect(dock).to_be_hidden()


@pytest.fixture
def asking_server(tmp_path: Path) -> Iterator[Any]:
    """The real server with each tool's default policy (a filesystem write asks)."""
    from tests.support.navi_server import navi_server_for

    with navi_server_for(tmp_path, tool_approval="") as running:
        yield running


def test_a_decision_reads_plainly_after_a_reload(
    browser: Any, asking_server: Any, request: pytest.FixtureRequest
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    page.set_default_timeout(15_000)
    ui = NaviPage(page, asking_server.url, request.node.name)
    llm = LLMScript(asking_server.fake_llm)
    try:
        write = FakeToolCall(
            name="filesystem", arguments={"action": "write", "path": "n.txt", "content": "hi"}
        )
        llm(Reply(tool_calls=[write]), Reply(text="I will not write it."))
        ui.open()
        ui.send("Write a note")
        panel = page.locator('[data-testid="approval"]:not(.decided)')
        expect(panel).to_have_count(1)
        panel.get_by_label("Reason for declining (optional)").fill("not now, please")
        panel.get_by_role("button", name="Deny").click()
        ui.wait_idle()
        decided = page.locator('[data-testid="approval"].decided')
        expect(decided).to_have_text("Declined · “not now, please”")
        page.reload()
        # The outcome, how long the call waited, then the reason, quoted: never
        # "Declined by local: not now, please after 3 s". Who decided: in the tooltip.
        expect(decided).to_have_text(re.compile(r"^Declined( after \d+ s)? · “not now, please”$"))
        expect(decided).not_to_contain_text("by local")
        expect(decided).to_have_attribute("title", "Decided by local")
        ui.shot()
    finally:
        context.close()
