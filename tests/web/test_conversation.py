"""The conversation in a real browser: streaming Markdown, plans, tools and subagents,
Stop, reload mid-stream, and errors shown in place."""

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
from tests.support.navi_server import stop_and_wait
from tests.web.conftest import LLMScript, NaviPage

OK = re.compile(r"\bok\b")
FAILED = re.compile(r"\bfailed\b")


def test_a_plain_question_streams_and_renders_markdown(navi_page: NaviPage, llm: LLMScript) -> None:
    llm(
        Reply(
            thinking="The user wants a greeting with some code.",
            text=[
                "Hello! ",
                "Here is **bold** text",
                " and code:\n\n",
                "```python\n",
                "print('hi')\n",
                "```\n",
                "\nThat is all.",
            ],
            delay=0.08,
        )
    )
    ui = navi_page.open()
    page = ui.page
    ui.send("Say hello with code")

    expect(page.locator(".message.user .bubble")).to_have_text("Say hello with code")
    # While it streams: the run is active (Stop, not Send), the first words already shown;
    # the box stays open for a message to queue.
    expect(page.locator("#stop-button")).to_be_visible()
    expect(page.locator("#send-button")).to_be_hidden()
    expect(page.locator(".text-block")).to_contain_text("Hello!")
    ui.shot("streaming")

    ui.wait_idle()
    answer = page.locator(".message.assistant .text-block").last
    expect(answer.locator("strong")).to_have_text("bold")
    expect(answer.locator(".code-block code")).to_have_text("print('hi')\n")
    expect(
        answer.locator(".code-block code .hljs-built_in, .code-block code .hljs-string").first
    ).to_be_visible()
    expect(answer.locator(".copy-code")).to_be_visible()
    expect(answer).to_contain_text("That is all.")
    # Thinking streamed into a block that collapsed itself at thinking_end.
    thinking = page.locator(".message.assistant details.thinking").first
    expect(thinking).to_contain_text("Thought")
    expect(thinking).not_to_have_attribute("open", "")
    expect(page.locator("#send-button")).to_be_visible()
    assert ui.session_id, "the session id is in the URL hash"
    expect(page.locator(f'.session-item[data-session-id="{ui.session_id}"]')).to_be_visible()


def test_model_html_is_sanitised(navi_page: NaviPage, llm: LLMScript) -> None:
    llm(
        Reply(
            text='Safe **text** <img src="x" onerror="window.__xss = 1">'
            '<script>window.__xss = 2</script><a href="javascript:window.__xss=3">link</a>'
        )
    )
    ui = navi_page.open()
    ui.send("Show me some HTML")
    ui.wait_idle()
    page = ui.page
    answer = page.locator(".message.assistant .text-block").last
    expect(answer.locator("strong")).to_have_text("text")
    assert answer.locator("script").count() == 0
    assert answer.locator("[onerror]").count() == 0
    assert answer.locator('a[href^="javascript"]').count() == 0
    page.wait_for_timeout(200)
    assert page.evaluate("window.__xss") is None


def test_planning_tools_and_a_subagent_render_nested(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    tools = {t["name"] for t in httpx.get(f"{navi_server.url}/agents/tools", timeout=10).json()}
    if "spawn_agent" not in tools:
        pytest.skip("this server has no spawn_agent tool yet")
    llm(
        # Navi: a todo list, then a subagent.
        Reply(
            thinking="Two steps.",
            tool_calls=[
                FakeToolCall(
                    name="todo",
                    arguments={
                        "action": "set",
                        "items": [{"text": "Ask a subagent"}, {"text": "Answer"}],
                    },
                )
            ],
        ),
        Reply(
            tool_calls=[FakeToolCall(name="spawn_agent", arguments={"task": "Collect otter facts"})]
        ),
        # The subagent: one tool call, then its result.
        Reply(
            thinking="Note it down.",
            tool_calls=[
                FakeToolCall(
                    name="scratchpad",
                    arguments={
                        "action": "write",
                        "section": "findings",
                        "content": "Otters hold hands.",
                    },
                )
            ],
        ),
        Reply(text="Otters hold hands while they sleep."),
        # Navi: the answer.
        Reply(text="**Otters** hold hands while they sleep.", delay=0.05),
        plan="1. Ask a subagent for otter facts\n2. Answer the user",
    )
    ui = navi_page.open()
    page = ui.page
    ui.send("Tell me an otter fact")
    ui.wait_idle()

    turn = page.locator(".message.assistant").last
    plan = turn.locator(".plan-card")
    if plan.count():  # the profile plans: a collapsible plan card
        expect(plan).to_contain_text("Ask a subagent for otter facts")
    todo = turn.locator('.tool-card[data-tool="todo"]')
    expect(todo).to_have_class(OK)
    agent = turn.locator('.tool-card[data-tool="spawn_agent"]')
    expect(agent).to_have_class(OK)
    nested = agent.locator('.subagent .tool-card[data-tool="scratchpad"]')
    expect(nested).to_have_class(OK)
    # The subagent's tool is inside the spawn_agent card, not beside it.
    assert turn.locator('.turn-body > .tool-card[data-tool="scratchpad"]').count() == 0
    # The run is over: its task dock closed with it (the plan card keeps the count).
    expect(page.locator("#todo-dock")).to_be_hidden()
    # Cards are compact; arguments and result open on click.
    agent.locator(".tool-head").first.click()
    expect(agent.locator(".tool-body").first).to_contain_text("Collect otter facts")
    expect(agent.locator(".tool-body").first).to_contain_text("Otters hold hands while they sleep.")
    expect(turn.locator(".text-block").last).to_contain_text("Otters hold hands while they sleep.")
    expect(turn.locator(".turn-stats")).to_contain_text("tool call")


def test_a_failed_tool_is_red(navi_page: NaviPage, llm: LLMScript) -> None:
    llm(
        Reply(
            tool_calls=[
                FakeToolCall(
                    name="filesystem",
                    arguments={"action": "read", "path": "/nonexistent/navi-web-test.txt"},
                )
            ]
        ),
        Reply(text="The file does not exist."),
    )
    ui = navi_page.open()
    ui.send("Read a file that is not there")
    ui.wait_idle()
    card = ui.page.locator('.tool-card[data-tool="filesystem"]')
    expect(card).to_have_class(FAILED)
    color = card.locator(".tool-name").evaluate("el => getComputedStyle(el).color")
    red, green, _blue = (int(c) for c in color[color.index("(") + 1 : -1].split(",")[:3])
    assert red > 150 and green < 120, f"a failed tool's name is red, not {color}"


def _slow_words(count: int, delay: float = 0.1) -> Reply:
    return Reply(text=[f"word{i} " for i in range(count)], delay=delay)


def test_stop_mid_stream_with_the_button_and_with_esc(navi_page: NaviPage, llm: LLMScript) -> None:
    llm(_slow_words(200), _slow_words(200))
    ui = navi_page.open()
    page = ui.page
    ui.send("Count slowly")
    expect(page.locator(".text-block").last).to_contain_text("word3")
    page.click("#stop-button")
    expect(page.locator(".notice.stopped")).to_be_visible()
    ui.wait_idle()
    partial = page.locator(".text-block").last.inner_text()
    assert "word3" in partial and "word199" not in partial

    ui.send("Count slowly again")
    expect(page.locator(".message.assistant")).to_have_count(2)
    expect(page.locator(".message.assistant").last.locator(".text-block")).to_contain_text("word3")
    page.keyboard.press("Escape")
    expect(page.locator(".notice.stopped")).to_have_count(2)
    ui.wait_idle()


def test_reload_mid_stream_loses_and_duplicates_nothing(
    navi_page: NaviPage, llm: LLMScript
) -> None:
    words = [f"w{i:02d} " for i in range(40)]
    llm(Reply(text=words, delay=0.06))
    ui = navi_page.open()
    page = ui.page
    ui.send("Stream forty words")
    expect(page.locator(".text-block").last).to_contain_text("w05")
    session_id = ui.session_id
    page.reload()
    assert ui.session_id == session_id
    expect(page.locator("#stop-button")).to_be_visible()  # still running after the reload
    ui.wait_idle()
    text = page.locator(".message.assistant .text-block").last.inner_text()
    assert text.split() == [w.strip() for w in words]
    expect(page.locator(".message.user")).to_have_count(1)
    expect(page.locator(".message.assistant")).to_have_count(1)


def test_a_server_restart_shows_a_banner_and_nothing_is_lost(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    from tests.support.navi_server import run_server

    llm(Reply(text="First answer."), Reply(text="Second answer."))
    ui = navi_page.open()
    page = ui.page
    ui.send("First question")
    ui.wait_idle()

    stop_and_wait(navi_server.server)
    banner = page.locator("#connection-banner")
    expect(banner).to_contain_text("Reconnecting")
    ui.shot("connection-lost")
    # The same data folder and port: the server comes back with the same log.
    with run_server(navi_server.root, navi_server.fake_llm, port=navi_server.server.config.port):
        expect(banner).to_be_hidden(timeout=20_000)
        ui.send("Second question")
        ui.wait_idle()
        expect(page.locator(".message.user")).to_have_count(2)
        expect(page.locator(".message.assistant")).to_have_count(2)
        expect(page.locator(".message.assistant").last).to_contain_text("Second answer.")
        expect(page.locator(".message.assistant").first).to_contain_text("First answer.")
        # A fresh load shows the same conversation, once.
        ui.open(ui.session_id)
        expect(page.locator(".message.user")).to_have_count(2)
        expect(page.locator(".message.assistant")).to_have_count(2)


def test_a_server_error_is_shown_in_place(navi_page: NaviPage, llm: LLMScript) -> None:
    llm(Reply(error_before="model runner crashed", error_status=500), repeat_last=True)
    ui = navi_page.open()
    page = ui.page
    ui.send("This will fail")
    expect(
        page.locator(".message.assistant .error-block, .conversation .error-block").first
    ).to_be_visible()
    ui.wait_idle()
    expect(page.locator(".message.user .bubble")).to_have_text("This will fail")
    ui.shot("run-error")

    # A failed REST call (an unknown session) is shown in place too, never a blank page.
    ui.open("00000000-0000-0000-0000-000000000000")
    expect(page.locator(".page-error .error-block")).to_contain_text("does not exist")


def test_a_profile_switch_updates_the_switcher_live(navi_page: NaviPage, llm: LLMScript) -> None:
    llm(
        Reply(
            tool_calls=[
                FakeToolCall(name="switch_profile", arguments={"profile_id": "server_admin"})
            ]
        ),
        Reply(text="The server administrator is here."),
    )
    ui = navi_page.open()
    page = ui.page
    expect(page.locator("#profile-select")).to_have_value("secretary")
    ui.send("I need help with a server")
    ui.wait_idle()
    expect(page.locator("#profile-select")).to_have_value("server_admin")
    expect(page.locator(".notice")).to_contain_text("Server Administrator")
    expect(page.locator("#context-meter")).to_be_visible()
    # The session keeps it: a reload shows the new profile.
    ui.open(ui.session_id)
    expect(page.locator("#profile-select")).to_have_value("server_admin")


def test_a_second_tab_sees_the_conversation_live(
    navi_page: NaviPage, llm: LLMScript, browser: Any, navi_server: Any
) -> None:
    llm(Reply(text=[f"part{i} " for i in range(10)], delay=0.05))
    ui = navi_page.open()
    ui.send("Hello from tab one")
    session_id = ui.session_id
    other = browser.new_context(viewport={"width": 1000, "height": 700})
    try:
        second = NaviPage(other.new_page(), navi_server.url, "second-tab").open(session_id)
        second.wait_idle()
        ui.wait_idle()
        expect(second.page.locator(".message.user .bubble")).to_have_text("Hello from tab one")
        expect(second.page.locator(".message.assistant .text-block")).to_contain_text("part9")
        # Tab two asks; tab one sees its message and the answer without reloading.
        llm(Reply(text="Answer to tab two."))
        second.send("Hello from tab two")
        second.wait_idle()
        expect(ui.page.locator(".message.user")).to_have_count(2)
        expect(ui.page.locator(".message.user").last).to_contain_text("Hello from tab two")
        expect(ui.page.locator(".message.assistant").last).to_contain_text("Answer to tab two.")
        second.shot()
    finally:
        other.close()


def test_the_first_words_after_thinking_show_while_streaming(
    navi_page: NaviPage, llm: LLMScript
) -> None:
    # thinking_end and the first text after the thinking come from one event, with one
    # seq: the page must show both frames (it once dropped the second until stream_end).
    llm(Reply(thinking="Hmm.", text=["First words. ", "then more"], stall_after=3))
    ui = navi_page.open()
    page = ui.page
    ui.send("Think, then say something")
    expect(page.locator(".message.assistant .text-block").last).to_have_text(
        "First words. then more"
    )
    expect(page.locator("#stop-button")).to_be_visible()  # still streaming (stalled)
    page.locator("#stop-button").click()
    ui.wait_idle()
