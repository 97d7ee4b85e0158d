"""The Replay view in a real browser: the timeline, a cursor dragged to any event with
the conversation and the context side by side (the difference from the previous LLM call
marked), playing, pausing and speed; "continue from here", "edit and resend" and
"regenerate" as forks, and the forks' lineage in the sidebar."""

from __future__ import annotations

import re
from typing import Any

import httpx
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
from tests.web.conftest import LLMScript, NaviPage


def record(url: str, llm: LLMScript) -> str:
    """A chat of two turns: a todo tool call then an answer, then a plain answer."""
    llm(
        Reply(
            thinking="A list first.",
            tool_calls=[
                FakeToolCall(
                    name="todo",
                    arguments={"action": "set", "items": [{"text": "Pack the tent"}]},
                )
            ],
        ),
        Reply(text="Your list is ready.", delay=0.02),
        Reply(text=["Have ", "a good ", "trip!"], delay=0.05),
    )
    with httpx.Client(base_url=url, timeout=30) as http:
        sid: str = http.post("/sessions", json={"title": "Camping"}).json()["session_id"]
        for text in ("Make me a camping list", "Thanks"):
            http.post(f"/sessions/{sid}/messages", json={"content": text}).raise_for_status()
    return sid


def events(url: str, sid: str) -> list[dict[str, Any]]:
    import json

    text = httpx.get(f"{url}/sessions/{sid}/events", timeout=10).text
    return [json.loads(line) for line in text.splitlines()]


def open_replay(ui: NaviPage, sid: str) -> Any:
    ui.page.goto(f"{ui.url}/#replay/{sid}")
    page = ui.page
    expect(page.locator("#replay")).to_be_visible()
    expect(page.locator(".tl-lane").first).to_be_visible()
    return page


def test_the_timeline_and_the_state_at_the_cursor(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    sid = record(navi_server.url, llm)
    log = events(navi_server.url, sid)
    head = log[-1]["seq"]
    ui = navi_page.open(sid)
    page = ui.page
    # The entry point: the Replay button of an open chat.
    page.locator("#replay-button").click()
    expect(page).to_have_url(re.compile(f"#replay/{sid}$"))
    expect(page.locator("#conversation")).to_be_hidden()
    expect(page.locator(".replay-title")).to_contain_text("Camping")

    # The timeline: spans by kind with their durations, the cursor at the end.
    expect(page.locator('.tl-span[data-kind="run"]')).to_have_count(2)
    expect(page.locator('.tl-span[data-kind="llm"]')).to_have_count(3)
    expect(page.locator('.tl-span[data-kind="tool"]')).to_have_count(1)
    assert " s (events " in (
        page.locator('.tl-span[data-kind="tool"]').get_attribute("title") or ""
    )
    expect(page.locator("#replay-position")).to_have_text(
        f"Step {head} of {head} · Navi finished answering"
    )
    conversation = page.locator("#replay-conversation")
    expect(conversation.locator(".message.user")).to_have_count(2)
    expect(conversation).to_contain_text("Have a good trip!")
    context = page.locator("#replay-context")
    expect(context.locator(".ctx-msg")).to_have_count(6)
    ui.shot("end")

    # Drag the cursor to the far left: the start of the session, nothing said yet.
    frame = page.locator(".tl-frame")
    track = page.locator(".tl-track").first.bounding_box()
    assert track is not None
    y = track["y"] + track["height"] / 2
    page.mouse.move(track["x"] + track["width"] - 2, y)
    page.mouse.down()
    page.mouse.move(track["x"] + track["width"] / 2, y, steps=5)
    page.mouse.move(track["x"] + 1, y, steps=5)
    page.mouse.up()
    expect(page.locator("#replay-position")).to_have_text(
        f"Step 1 of {head} · the chat was created"
    )
    expect(conversation).to_contain_text("Nothing said yet")
    expect(context).to_contain_text("The context is empty")

    # The arrow keys step event by event; at the second LLM call, the context shows
    # what is new since the first one: the assistant's tool call and the tool's result.
    second_call = [e["seq"] for e in log if e["type"] == "llm.requested"][1]
    frame.focus()
    for _ in range(second_call - 1):
        page.keyboard.press("ArrowRight")
    expect(page.locator("#replay-position")).to_have_text(
        f"Step {second_call} of {head} · Navi asked the model"
    )
    # The technical view, one click away: event types and the LLM call's options.
    page.locator("#replay-technical").click()
    expect(page.locator("#replay-position")).to_have_text(
        f"event {second_call} of {head} · llm.requested"
    )
    expect(page.locator("#replay-info")).to_contain_text("LLM call: loop")
    expect(context.locator(".ctx-msg")).to_have_count(3)
    added = context.locator(".ctx-msg.added")
    expect(added).to_have_count(2)
    expect(added.nth(0)).to_contain_text("todo(")
    expect(added.nth(1)).to_contain_text("Pack the tent")
    expect(context.locator(".ctx-compared")).to_contain_text("2 new")
    # The conversation as the user saw it then: the question and the running tool card.
    expect(conversation.locator(".message.user")).to_have_count(1)
    expect(conversation.locator('.tool-card[data-tool="todo"]')).to_be_visible()
    ui.shot("second-call")

    # Back to the chat.
    page.locator("#replay-back").click()
    expect(page).to_have_url(re.compile(f"#{sid}$"))
    expect(page.locator("#conversation .message.user")).to_have_count(2)


def test_play_pause_and_speed(navi_page: NaviPage, llm: LLMScript, navi_server: Any) -> None:
    sid = record(navi_server.url, llm)
    head = events(navi_server.url, sid)[-1]["seq"]
    ui = navi_page
    page = open_replay(ui, sid)
    play = page.locator("#replay-play")
    conversation = page.locator("#replay-conversation")

    # From the end, Play starts over; at max speed it runs to the end by itself.
    page.select_option("#replay-speed", "max")
    play.click()
    expect(play).to_have_attribute("data-state", "paused", timeout=15_000)
    expect(page.locator("#replay-position")).to_contain_text(f"Step {head} of {head}")
    expect(conversation.locator(".message.user")).to_have_count(2)
    expect(conversation).to_contain_text("Have a good trip!")
    expect(conversation.locator('.tool-card[data-tool="todo"]')).to_have_class(
        re.compile(r"\bok\b")
    )

    # Slowly, then paused half way: the cursor stops inside the session.
    page.select_option("#replay-speed", "0.5")
    page.locator(".tl-frame").focus()
    page.keyboard.press("Home")
    expect(page.locator("#replay-position")).to_contain_text("Step 0 of")
    play.click()
    expect(play).to_have_attribute("data-state", "playing")
    expect(conversation.locator(".message.user")).to_have_count(1)
    play.click()
    expect(play).to_have_attribute("data-state", "paused")
    position = page.locator("#replay-position").inner_text()
    reached = int(position.split()[1])
    assert 1 <= reached < head
    page.wait_for_timeout(400)
    assert page.locator("#replay-position").inner_text() == position  # it stays paused
    ui.shot("paused")
    # Resume at max speed: it plays on from there to the end.
    page.select_option("#replay-speed", "max")
    play.click()
    expect(page.locator("#replay-position")).to_contain_text(f"Step {head} of {head}")
    expect(conversation).to_contain_text("Have a good trip!")


def test_continue_from_here_edit_and_regenerate_are_forks(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    sid = record(navi_server.url, llm)
    log = events(navi_server.url, sid)
    first_end = next(e["seq"] for e in log if e["type"] == "run.completed")
    ui = navi_page
    page = open_replay(ui, sid)

    # Continue from the end of the first turn: a new chat with that history.
    page.locator(".tl-frame").focus()
    page.keyboard.press("Home")
    for _ in range(first_end):
        page.keyboard.press("ArrowRight")
    expect(page.locator("#replay-position")).to_contain_text(f"Step {first_end} of")
    page.locator("#replay-fork").click()
    expect(page.locator("#replay")).to_be_hidden()
    fork = ui.session_id
    assert fork and fork != sid
    expect(page.locator("#conversation .message.user")).to_have_count(1)
    expect(page.locator("#conversation")).to_contain_text("Your list is ready.")
    mark = page.locator(f'.session-item[data-session-id="{fork}"] .fork-mark')
    expect(mark).to_have_attribute("title", f"Fork of “Camping” at step {first_end}")
    llm(Reply(text="Another way to go."))
    ui.send("Something else")
    ui.wait_idle()
    expect(page.locator("#conversation")).to_contain_text("Another way to go.")

    # Edit and resend, in the chat: a fork just before that message, then the edit.
    ui.open(sid)
    user = page.locator("#conversation .message.user").nth(1)
    user.hover()
    user.locator('[data-action="edit"]').click()
    box = user.locator(".edit-box")
    expect(box).to_have_value("Thanks")
    box.fill("Thanks a lot!")
    llm(Reply(text="You are welcome."))
    user.locator('[data-action="send-edit"]').click()
    expect(page).not_to_have_url(re.compile(f"#{sid}$"))
    edited = ui.session_id
    ui.wait_idle()
    messages = page.locator("#conversation .message.user .bubble")
    expect(messages).to_have_text(["Make me a camping list", "Thanks a lot!"])
    expect(page.locator("#conversation")).to_contain_text("You are welcome.")
    assert llm.loop_requests[-1]["messages"][-1]["content"] == "Thanks a lot!"

    # Regenerate an answer: the same question again, in a new chat.
    llm(Reply(text="Enjoy the trip!"))
    page.locator("#conversation .message.assistant").last.locator(
        '[data-action="regenerate"]'
    ).click()
    expect(page).not_to_have_url(re.compile(f"#{edited}$"))
    ui.wait_idle()
    expect(page.locator("#conversation .message.user .bubble")).to_have_text(
        ["Make me a camping list", "Thanks a lot!"]
    )
    expect(page.locator("#conversation")).to_contain_text("Enjoy the trip!")
    expect(page.locator("#conversation")).not_to_contain_text("You are welcome.")

    # The original chat is as it was.
    ui.open(sid)
    expect(page.locator("#conversation .message.user .bubble")).to_have_text(
        ["Make me a camping list", "Thanks"]
    )
    expect(page.locator("#conversation")).to_contain_text("Have a good trip!")


def test_a_subagent_has_its_own_nested_lane(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    tools = {t["name"] for t in httpx.get(f"{navi_server.url}/agents/tools", timeout=10).json()}
    if "spawn_agent" not in tools:
        pytest.skip("this server has no spawn_agent tool")
    llm(
        Reply(tool_calls=[FakeToolCall(name="spawn_agent", arguments={"task": "Find otters"})]),
        Reply(
            tool_calls=[
                FakeToolCall(
                    name="scratchpad",
                    arguments={"action": "write", "section": "notes", "content": "Otters."},
                )
            ]
        ),
        Reply(text="Otters hold hands."),
        Reply(text="They hold hands while they sleep."),
    )
    with httpx.Client(base_url=navi_server.url, timeout=30) as http:
        sid = http.post("/sessions", json={"title": "Otters"}).json()["session_id"]
        http.post(f"/sessions/{sid}/messages", json={"content": "otters?"}).raise_for_status()
    page = open_replay(navi_page, sid)
    lanes = page.locator(".tl-lane")
    expect(lanes).to_have_count(2)
    expect(lanes.nth(1)).to_have_class(re.compile(r"\bsubagent\b"))
    expect(lanes.nth(1).locator(".tl-label")).to_have_text("↳ Find otters")
    expect(lanes.nth(1).locator('.tl-span[data-kind="tool"]')).to_have_count(1)
    expect(lanes.nth(0).locator('.tl-span[data-kind="subagent"]')).to_have_count(1)
    # Played back, the subagent's frames land inside its spawn_agent card, as live.
    page.select_option("#replay-speed", "max")
    page.locator("#replay-play").click()
    expect(page.locator("#replay-play")).to_have_attribute("data-state", "paused")
    agent = page.locator('#replay-conversation .tool-card[data-tool="spawn_agent"]')
    expect(agent.locator('.subagent .tool-card[data-tool="scratchpad"]')).to_have_count(1)
    navi_page.shot("subagent")
