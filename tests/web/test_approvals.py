"""Approvals in a real browser (issue 21): a tool call whose policy asks waits in its
tool card for Approve, Approve for this session or Deny (with a reason), each a click
(issue 30: see test_approval_consent.py for the focus and the card's words); a reload or a
server restart while it waits shows it again; the page title and the sidebar say a chat
waits. The server runs with the tools' own approval defaults (not the test rig's
"auto"), so a filesystem write asks."""

from __future__ import annotations

import json
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

from tests.support.fake_llm import FakeToolCall, Reply
from tests.support.navi_server import stop_and_wait
from tests.web.conftest import OUTPUT, LLMScript, NaviPage

LONG = "\n".join(f"line {i}: some text of the note" for i in range(1, 31))


def write(path: str, content: str = "hi") -> FakeToolCall:
    return FakeToolCall(
        name="filesystem", arguments={"action": "write", "path": path, "content": content}
    )


@pytest.fixture
def navi_server(tmp_path: Path) -> Iterator[Any]:
    """The real server with each tool's default policy: "" (the rig's "auto" off)."""
    from tests.support.navi_server import navi_server_for

    with navi_server_for(tmp_path, tool_approval="") as running:
        yield running


def written(server: Any, session_id: str, name: str) -> Path:
    return Path(server.root) / "files" / session_id / name


def approval(ui: NaviPage) -> Any:
    """The panel of the call that waits (exactly one)."""
    panel = ui.page.locator('[data-testid="approval"]:not(.decided)')
    expect(panel).to_have_count(1)
    return panel


def tool_messages(request: dict[str, Any]) -> list[str]:
    return [str(m.get("content", "")) for m in request["messages"] if m.get("role") == "tool"]


def test_approve_with_a_click_runs_the_call_and_the_marks_go(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    llm(Reply(tool_calls=[write("note.txt", LONG)]), Reply(text="Written."))
    ui = navi_page.open()
    page = ui.page
    ui.send("Write a note")
    panel = approval(ui)
    card = page.locator('.tool-card[data-tool="filesystem"]')
    expect(card).to_have_class(re.compile(r"\bawaiting\b"))
    expect(panel).to_contain_text("Waiting for your approval")
    expect(panel.locator(".approval-asked-by")).to_have_text("Navi asks before file changes")
    # The arguments, readable: each by name, the long content whole (it scrolls: issue 30).
    expect(panel.locator("dt .approval-key")).to_have_text(["action", "path", "content"])
    expect(panel.locator("dt .approval-size")).to_have_text(["30 lines"])
    expect(panel.locator("pre.approval-value").last).to_have_text(LONG)
    expect(panel.locator("details")).to_have_count(0)
    for name in ("Approve", "Allow file writes in this chat", "Deny"):
        expect(panel.get_by_role("button", name=name, exact=True)).to_be_visible()
    # Nothing ran; the page title and the chat's entry in the sidebar say it waits.
    assert not written(navi_server, ui.session_id, "note.txt").exists()
    expect(page).to_have_title(re.compile(r"^\(1\) Approval needed · "))
    badge = page.locator('.session-item.active [data-testid="approval-badge"]')
    expect(badge).to_be_visible()
    expect(badge).to_have_attribute("title", "1 tool call waits for your approval")
    # The card never takes the focus (issue 30): a click approves.
    expect(page.locator("#prompt")).to_be_focused()
    ui.shot("waiting")
    panel.get_by_role("button", name="Approve", exact=True).click()

    ui.wait_idle()
    done = page.locator('[data-testid="approval"].decided')
    expect(done).to_have_class(re.compile(r"\bapproved\b"))
    expect(done).to_have_text("Approved")
    expect(card).to_have_class(re.compile(r"\bok\b"))
    expect(page.locator(".message.assistant").last).to_contain_text("Written.")
    assert written(navi_server, ui.session_id, "note.txt").read_text() == LONG
    expect(page).not_to_have_title(re.compile("Approval needed"))
    expect(badge).to_have_count(0)
    expect(page.locator("#prompt")).to_be_focused()  # the keyboard goes back to the composer
    ui.shot("approved")
    # After a reload the history says so too (the tool message's `approval`).
    page.reload()
    # (with how long it waited, from 1 s on: the test's own pace, not asserted)
    expect(page.locator('[data-testid="approval"].decided.approved')).to_have_text(
        re.compile(r"^Approved( after \d+ s)?$")
    )


def test_approve_for_this_session_lets_the_next_call_run_without_asking(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    llm(
        Reply(tool_calls=[write("a.txt", "a")]),
        Reply(text="One."),
        Reply(tool_calls=[write("b.txt", "b")]),
        Reply(text="Two."),
    )
    ui = navi_page.open()
    page = ui.page
    ui.send("Write a")
    approval(ui).get_by_role("button", name="Allow file writes in this chat").click()
    ui.wait_idle()
    expect(page.locator('[data-testid="approval"].decided')).to_have_text(
        "Approved for this session"
    )
    assert written(navi_server, ui.session_id, "a.txt").read_text() == "a"

    ui.send("Write b")
    ui.wait_idle()
    expect(page.locator(".message.assistant").last).to_contain_text("Two.")
    assert written(navi_server, ui.session_id, "b.txt").read_text() == "b"
    # The second write ran without a prompt: still one panel on the page.
    expect(page.locator('[data-testid="approval"]')).to_have_count(1)
    expect(page.locator(".message.assistant").last.locator(".tool-card.ok")).to_have_count(1)


def test_deny_with_a_reason_tells_the_model_why(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    llm(Reply(tool_calls=[write("note.txt")]), Reply(text="Understood, I will not write."))
    ui = navi_page.open()
    page = ui.page
    ui.send("Write a note")
    panel = approval(ui)
    panel.get_by_label("Reason for declining (optional)").fill("not in there")
    panel.get_by_role("button", name="Deny").click()
    ui.wait_idle()
    done = page.locator('[data-testid="approval"].decided')
    expect(done).to_have_class(re.compile(r"\bdeclined\b"))
    expect(done).to_have_text("Declined · “not in there”")
    card = page.locator('.tool-card[data-tool="filesystem"]')
    expect(card).to_have_class(re.compile(r"\bfailed\b"))
    expect(page.locator(".message.assistant").last).to_contain_text("I will not write.")
    assert not written(navi_server, ui.session_id, "note.txt").exists()
    second = llm.loop_requests[1]
    assert any("The user declined this call: not in there" in m for m in tool_messages(second))
    ui.shot("declined")


def test_a_decision_taken_elsewhere_updates_the_card(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    """Another tab, ``navi approvals`` or ``navi chat`` decides: the page follows."""
    import httpx

    llm(Reply(tool_calls=[write("note.txt")]), Reply(text="Fine."))
    ui = navi_page.open()
    page = ui.page
    ui.send("Write a note")
    call_id = approval(ui).get_attribute("data-call-id")
    answer = httpx.post(
        f"{navi_server.url}/sessions/{ui.session_id}/approvals/{call_id}",
        json={"decision": "deny", "reason": "from the terminal"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    ui.wait_idle()
    expect(page.locator('[data-testid="approval"].decided')).to_have_text(
        "Declined · “from the terminal”"
    )
    expect(page.locator(".approval-error")).to_have_count(0)
    expect(page.locator("#prompt")).to_be_focused()


def test_esc_stops_the_run_and_never_denies(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    llm(Reply(tool_calls=[write("note.txt")]), Reply(text="not reached"))
    ui = navi_page.open()
    page = ui.page
    ui.send("Write a note")
    approval(ui)
    expect(page.locator("#prompt")).to_be_focused()  # the card never takes the focus
    page.keyboard.press("Escape")
    ui.wait_idle()
    done = page.locator('[data-testid="approval"].decided')
    expect(done).to_have_class(re.compile(r"\bended\b"))
    expect(done).to_have_text("Not decided: the run ended while this call waited")
    expect(page.locator(".notice.stopped")).to_be_visible()
    assert not written(navi_server, ui.session_id, "note.txt").exists()
    assert len(llm.loop_requests) == 1  # no decision reached the model
    records = navi_server.fake_llm.requests
    assert not any("declined" in json.dumps(r) for r in records)
    expect(page).not_to_have_title(re.compile("Approval needed"))


def test_a_reload_while_a_call_waits_shows_it_again_once(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    llm(Reply(tool_calls=[write("note.txt")]), Reply(text="Written."))
    ui = navi_page.open()
    page = ui.page
    ui.send("Write a note")
    approval(ui)
    session_id = ui.session_id

    page.reload()
    panel = approval(ui)  # sent again on connect: one panel, in the call's own card
    expect(page.locator('.tool-card[data-tool="filesystem"]')).to_have_count(1)
    expect(panel).to_have_attribute("data-call-id", re.compile(".+"))
    expect(page.locator("#prompt")).to_be_focused()  # the card never takes the focus
    expect(page).to_have_title(re.compile(r"^\(1\) Approval needed · "))

    # Another chat open: the waiting one keeps its mark in the list, and the title says so.
    page.locator("#new-chat").click()
    expect(page.locator('[data-testid="approval"]')).to_have_count(0)
    waiting = page.locator(f'.session-item[data-session-id="{session_id}"]')
    expect(waiting.locator('[data-testid="approval-badge"]')).to_be_visible()
    expect(page).to_have_title("(1) Approval needed · Navi")
    ui.shot("other-chat")

    waiting.locator(".session-link").click()
    approval(ui).get_by_role("button", name="Approve", exact=True).click()
    ui.wait_idle()
    assert written(navi_server, session_id, "note.txt").read_text() == "hi"
    expect(page.locator('[data-testid="approval"].decided')).to_have_text("Approved")


def test_a_server_restart_while_a_call_waits_keeps_it_waiting(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    from tests.support.navi_server import run_server

    llm(Reply(tool_calls=[write("note.txt")]), Reply(text="Written."))
    ui = navi_page.open()
    page = ui.page
    ui.send("Write a note")
    approval(ui)
    session_id = ui.session_id

    stop_and_wait(navi_server.server)
    banner = page.locator("#connection-banner")
    expect(banner).to_contain_text("Reconnecting")
    assert not written(navi_server, session_id, "note.txt").exists()
    # The same database and port: the run is still waiting, and the page shows it.
    with run_server(
        navi_server.root,
        navi_server.fake_llm,
        port=navi_server.server.config.port,
        tool_approval="",
    ):
        expect(banner).to_be_hidden(timeout=20_000)
        panel = approval(ui)
        expect(page.locator('.tool-card[data-tool="filesystem"]')).to_have_count(1)
        panel.get_by_role("button", name="Approve", exact=True).click()
        ui.wait_idle()
        expect(page.locator(".message.assistant").last).to_contain_text("Written.")
        assert written(navi_server, session_id, "note.txt").read_text() == "hi"
        # A fresh load after the run: nothing waits, no buttons come back.
        ui.open(session_id)
        expect(page.locator(".tool-card.ok")).to_have_count(1)
        expect(page.locator(".approval-actions")).to_have_count(0)


def test_a_subagents_request_waits_in_its_parents_subagent_card(
    navi_page: NaviPage, llm: LLMScript
) -> None:
    llm(
        Reply(tool_calls=[FakeToolCall(name="spawn_agent", arguments={"task": "Write it"})]),
        Reply(tool_calls=[write("kid.txt")]),  # the subagent's
        Reply(text="The subagent wrote it."),  # the subagent's answer
        Reply(text="Done."),
    )
    ui = navi_page.open()
    page = ui.page
    ui.send("Ask a subagent to write")
    agent = page.locator('.tool-card[data-tool="spawn_agent"]')
    panel = agent.locator('.subagent [data-testid="approval"]:not(.decided)')
    expect(panel).to_have_count(1)
    expect(panel.get_by_test_id("approval-summary")).to_contain_text("Write the file")
    expect(page.locator('[data-testid="approval"]')).to_have_count(1)
    ui.shot("subagent")
    panel.get_by_role("button", name="Approve", exact=True).click()
    ui.wait_idle()
    expect(agent.locator('.subagent [data-testid="approval"].decided')).to_have_class(
        re.compile(r"\bapproved\b")
    )
    expect(agent.locator('.subagent .tool-card[data-tool="filesystem"]')).to_have_class(
        re.compile(r"\bok\b")
    )


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("width", [1280, 390])
def test_the_waiting_card_on_desktop_and_phone(
    browser: Any, navi_server: Any, llm: LLMScript, theme: str, width: int
) -> None:
    """Screenshots for a reviewer: the waiting card in both themes, desktop and phone."""
    llm(Reply(tool_calls=[write("notes/today.txt", LONG)]), Reply(text="Written."))
    context = browser.new_context(
        viewport={"width": width, "height": 860 if width > 500 else 780},
        color_scheme=theme,
    )
    try:
        page = context.new_page()
        ui = NaviPage(page, navi_server.url, f"approval-{theme}-{width}").open()
        ui.send("Write today's notes")
        panel = approval(ui)
        panel.scroll_into_view_if_needed()
        OUTPUT.mkdir(parents=True, exist_ok=True)
        ui.shot()
        # Everything fits the width: no button off the screen.
        for name in ("Approve", "Allow file writes in this chat", "Deny"):
            box = panel.get_by_role("button", name=name, exact=True).bounding_box()
            assert box is not None and box["x"] + box["width"] <= width, json.dumps(box)
        if width < 500:
            page.locator("#menu-button").click()
            badge = page.locator('.session-item.active [data-testid="approval-badge"]')
            expect(badge).to_be_visible()
            page.wait_for_timeout(400)  # the drawer slides in
            ui.shot("sidebar")
    finally:
        context.close()
