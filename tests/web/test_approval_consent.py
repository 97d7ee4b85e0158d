"""An approval is given on purpose (issue 30), in a real browser against a real server.

A card never takes the keyboard focus — not when it appears while the composer is empty,
focused, unfocused, after a reload, nor from one decided card to the next — so typing
"no " and Enter lands in the composer and decides nothing (the server still lists the
call as waiting). The reason field's Enter declines its own card only, once a reason
was typed there. Code and long arguments are shown whole in a bounded, scrollable block.

The card's plain words (``summary``, ``target``, ``risk``, ``asked_by``,
``session_scope``, ``stream_id`` in ``approval_required``) come from the consent branch:
the tests marked *stand-in* add them to the real server's frames on their way to the
page (:mod:`tests.web.frame_tap`), the *server* ones read them from the server itself
and skip until it sends them. A frame without them (an older server) shows the card as
before. Each test runs at desktop (1280 x 800) and phone (390 x 844) width.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import suppress
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

import httpx
from playwright.sync_api import expect

from tests.support.fake_llm import FakeToolCall, Reply
from tests.web.conftest import TIMEOUT_MS, LLMScript, NaviPage
from tests.web.frame_tap import DecisionTap, Frame, FrameTap, without_consent_fields

VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
NEEDS_CONSENT = "needs the approval_required consent fields (branch consent)"
LONG = "\n".join(f"line {i}: some text of the note" for i in range(1, 31))
# The case: print("report") and 300 more lines, once folded to its first line.
CODE = 'print("report")\n' + "\n".join(f"total_{i} = {i} * 2  # step {i}" for i in range(1, 301))


def write(path: str, content: str = "hi") -> FakeToolCall:
    return FakeToolCall(
        name="filesystem", arguments={"action": "write", "path": path, "content": content}
    )


def spawn(task: str) -> FakeToolCall:
    return FakeToolCall(name="spawn_agent", arguments={"task": task})


@pytest.fixture
def navi_server(tmp_path: Path) -> Iterator[Any]:
    """The real server with each tool's default policy (a write and code_exec ask)."""
    from tests.support.navi_server import navi_server_for

    with navi_server_for(tmp_path, tool_approval="") as running:
        yield running


@pytest.fixture(params=sorted(VIEWPORTS))
def ui(browser: Any, navi_server: Any, request: pytest.FixtureRequest) -> Iterator[NaviPage]:
    context = browser.new_context(viewport=VIEWPORTS[request.param])
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    view = NaviPage(page, navi_server.url, request.node.name)
    try:
        yield view
        assert not errors, f"JavaScript errors on the page: {errors}"
    finally:
        from playwright.sync_api import Error as PlaywrightError

        with suppress(PlaywrightError):
            view.shot()
        context.close()


# ---------------------------------------------------------------- helpers


def waiting(server: Any, session_id: str) -> list[Frame]:
    """The calls the server says still wait (GET /sessions/{id}/approvals)."""
    answer = httpx.get(f"{server.url}/sessions/{session_id}/approvals", timeout=10)
    assert answer.status_code == 200, answer.text
    frames: list[Frame] = answer.json()["approvals"]
    return frames


def written(server: Any, session_id: str, name: str) -> Path:
    return Path(server.root) / "files" / session_id / name


def open_panels(ui: NaviPage, count: int = 1) -> Any:
    panels = ui.page.locator('[data-testid="approval"]:not(.decided)')
    expect(panels).to_have_count(count)
    return panels


def nothing_sent(ui: NaviPage) -> None:
    """No panel started sending a decision: a click on Approve, Approve for the session
    or Deny marks its panel "sending" (or decided) in the same task as the key that
    pressed it, so after the keys this holds at once or never."""
    busy = ui.page.locator(
        '[data-testid="approval"].sending, [data-testid="approval"].decided, '
        '[data-testid="approval"] button:disabled'
    )
    assert busy.count() == 0, busy.evaluate_all("(els) => els.map((el) => el.outerHTML)")


def prompt(ui: NaviPage) -> Any:
    return ui.page.locator("#prompt")


def last_user_message(request: dict[str, Any]) -> str:
    users = [m for m in request["messages"] if m.get("role") == "user"]
    return str(users[-1].get("content", "")) if users else ""


# ---------------------------------------------------------------- typing decides nothing


def test_typing_no_while_a_card_waits_in_the_empty_composer_decides_nothing(
    ui: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    """The issue's case: the card appears while the composer is empty (and focused);
    "no " then "wait dont" + Enter. Before: Space pressed the focused Approve."""
    llm(
        Reply(tool_calls=[write("note.txt")]),
        Reply(text="I will not write it."),
        Reply(text="Waiting, then."),
    )
    ui.open()
    page = ui.page
    ui.send("Write a note")
    panel = open_panels(ui)
    session_id = ui.session_id
    expect(prompt(ui)).to_be_focused()  # the card did not take the focus
    expect(prompt(ui)).to_have_value("")

    page.keyboard.type("no ")
    nothing_sent(ui)
    expect(prompt(ui)).to_be_focused()
    expect(prompt(ui)).to_have_value("no ")
    page.keyboard.type("wait dont")
    page.keyboard.press("Enter")
    nothing_sent(ui)
    # The whole text is one queued message (before: "t dont"), and the call still waits.
    queued = page.locator(".message.user.queued .bubble")
    expect(queued).to_have_text("no wait dont")
    call_id = panel.get_attribute("data-call-id")
    assert [f["call_id"] for f in waiting(navi_server, session_id)] == [call_id]
    nothing_sent(ui)
    assert not written(navi_server, session_id, "note.txt").exists()
    ui.shot("typed")

    # Only a click decides. The queued message runs after the answer, whole.
    panel.get_by_role("button", name="Deny").click()
    expect(page.locator(".message.assistant")).to_have_count(2, timeout=20_000)
    ui.wait_idle()
    assert not written(navi_server, session_id, "note.txt").exists()
    assert last_user_message(llm.loop_requests[-1]) == "no wait dont"


@pytest.mark.parametrize("where", ["nothing", "draft"])
def test_a_card_appearing_leaves_the_focus_where_it_is(
    ui: NaviPage, llm: LLMScript, navi_server: Any, where: str
) -> None:
    """The card appears (held back by the test until then) while no element has the
    focus, or while the composer holds a draft: the focus stays; keys decide nothing."""
    llm(Reply(tool_calls=[write("note.txt")]), Reply(text="Not written."))
    tap = FrameTap(ui.page)
    tap.hold()
    ui.open()
    page = ui.page
    ui.send("Write a note")
    tap.wait_held()
    if where == "nothing":
        page.evaluate("document.activeElement.blur()")
    else:
        page.keyboard.type("draft")
    tap.release()
    panel = open_panels(ui)
    session_id = ui.session_id

    if where == "nothing":
        assert page.evaluate("document.activeElement === document.body")
        for key in ("n", "o", "Space", "Enter"):
            page.keyboard.press(key)
            nothing_sent(ui)
        assert page.evaluate("document.activeElement === document.body")
    else:
        expect(prompt(ui)).to_be_focused()
        page.keyboard.type(" no ")
        nothing_sent(ui)
        expect(prompt(ui)).to_have_value("draft no ")
    assert [f["call_id"] for f in waiting(navi_server, session_id)] == [
        panel.get_attribute("data-call-id")
    ]
    panel.get_by_role("button", name="Deny").click()
    ui.wait_idle()
    assert not written(navi_server, session_id, "note.txt").exists()


def test_after_a_reload_the_card_comes_back_without_the_focus(
    ui: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    llm(Reply(tool_calls=[write("note.txt")]), Reply(text="Written."), Reply(text="Queued."))
    ui.open()
    page = ui.page
    ui.send("Write a note")
    open_panels(ui)
    session_id = ui.session_id

    page.reload()
    panel = open_panels(ui)  # sent again on connect, after the composer took the focus
    expect(prompt(ui)).to_be_focused()
    page.keyboard.type("no ")
    page.keyboard.press("Enter")
    nothing_sent(ui)
    expect(page.locator(".message.user.queued .bubble")).to_have_text("no")
    assert len(waiting(navi_server, session_id)) == 1
    assert not written(navi_server, session_id, "note.txt").exists()
    # A click still approves.
    panel.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator(".message.assistant")).to_have_count(2, timeout=20_000)
    ui.wait_idle()
    assert written(navi_server, session_id, "note.txt").read_text() == "hi"


def test_several_cards_at_once_each_decided_by_its_own_click(
    ui: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    """Two subagents wait at once. A card appearing while the user types a reason in the
    other keeps the caret there; deciding one never hands the keys to the other; Enter
    in a reason field declines that card only, and only with a reason typed."""
    llm(
        Reply(tool_calls=[spawn("Write a"), spawn("Write b")]),
        Reply(tool_calls=[write("one.txt")]),  # the first subagent to ask
        # The other reads its notes first: its write gets another call id (on a server
        # before the consent branch, the two subagents' first calls share one, and a
        # decision without stream_id is handed to the first of them).
        Reply(tool_calls=[FakeToolCall(name="scratchpad", arguments={"action": "read"})]),
        Reply(tool_calls=[write("two.txt")]),
        Reply(text="Done."),
        repeat_last=True,
    )
    tap = FrameTap(ui.page)
    tap.hold()
    ui.open()
    page = ui.page
    ui.send("Two subagents, two files")
    tap.wait_held(2)
    tap.release(1)
    # Subagents may number their calls alike: the test marks the card that came first.
    open_panels(ui).evaluate("(el) => { el.dataset.testOrder = 'first'; }")
    first = page.locator('[data-testid="approval"][data-test-order="first"]')
    expect(prompt(ui)).to_be_focused()
    reason = first.get_by_label("Reason for declining (optional)")
    reason.click()
    page.keyboard.type("hm")
    tap.release()
    open_panels(ui, 2)
    expect(reason).to_be_focused()
    expect(reason).to_have_value("hm")
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")

    # An empty reason field: Enter does nothing.
    page.keyboard.press("Enter")
    nothing_sent(ui)
    assert len(waiting(navi_server, ui.session_id)) == 2

    # Approve the other by a click: the keys go back to the composer, not to the first.
    second = page.locator('[data-testid="approval"]:not([data-test-order])')
    second.get_by_role("button", name="Approve", exact=True).click()
    expect(second).to_have_class(re.compile(r"\bapproved\b"))
    expect(prompt(ui)).to_be_focused()
    page.keyboard.press("Space")
    page.keyboard.press("Enter")
    nothing_sent_to(first)
    assert len(waiting(navi_server, ui.session_id)) == 1

    # Enter in the first card's reason field, with a reason: declines the first only.
    reason.fill("not this one")
    reason.press("Enter")
    expect(first).to_have_text("Declined · “not this one”")
    expect(second).to_have_text(re.compile(r"^Approved( after \d+ s)?$"))
    ui.wait_idle()
    cards = page.locator('.subagent .tool-card[data-tool="filesystem"]')
    expect(cards).to_have_count(2)
    expect(page.locator('.subagent .tool-card[data-tool="filesystem"].ok')).to_have_count(1)
    expect(page.locator('.subagent .tool-card[data-tool="filesystem"].failed')).to_have_count(1)
    assert not waiting(navi_server, ui.session_id)


def nothing_sent_to(panel: Any) -> None:
    expect(panel).not_to_have_class(re.compile(r"\b(sending|decided)\b"))
    assert panel.locator("button:disabled").count() == 0


# ---------------------------------------------------------------- arguments whole


def test_a_300_line_code_argument_is_shown_whole_and_scrolls(
    ui: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    llm(
        Reply(tool_calls=[FakeToolCall(name="code_exec", arguments={"code": CODE})]),
        Reply(text="Not run."),
    )
    ui.open()
    page = ui.page
    ui.send("Make the report")
    panel = open_panels(ui)
    expect(prompt(ui)).to_be_focused()
    expect(panel.locator("details")).to_have_count(0)  # nothing folded
    block = panel.locator("pre.approval-value")
    expect(block).to_have_count(1)
    expect(block).to_be_visible()
    # Every line is in the page, as written.
    assert block.text_content() == CODE
    expect(panel.locator(".approval-size")).to_have_text("301 lines")
    # A bounded, scrollable monospace block.
    metrics = block.evaluate(
        """(el) => ({client: el.clientHeight, scroll: el.scrollHeight,
                     font: getComputedStyle(el).fontFamily, view: innerHeight,
                     tabindex: el.tabIndex})"""
    )
    assert metrics["client"] <= metrics["view"] / 2, metrics
    assert metrics["scroll"] > 5 * metrics["client"], metrics
    assert "mono" in metrics["font"].lower(), metrics
    assert metrics["tabindex"] == 0, metrics  # the keyboard reaches and scrolls it too
    block.scroll_into_view_if_needed()
    assert line_shown(block, 0) and not line_shown(block, 300)
    ui.shot("code-top")

    # The mouse wheel over the block reaches the last line.
    box = block.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    for _ in range(80):
        if line_shown(block, 300):
            break
        before = block.evaluate("(el) => el.scrollTop")
        page.mouse.wheel(0, 400)
        page.wait_for_function(
            "([el, before]) => el.scrollTop > before", arg=[block.element_handle(), before]
        )
    assert line_shown(block, 300) and not line_shown(block, 0)
    ui.shot("code-bottom")
    # The buttons fit the width.
    width = page.viewport_size["width"]
    for name in ("Approve", "Deny"):
        button = panel.get_by_role("button", name=name, exact=True)
        button.scroll_into_view_if_needed()
        found = button.bounding_box()
        assert found is not None and found["x"] + found["width"] <= width, found
    panel.get_by_role("button", name="Deny").click()
    ui.wait_idle()


def line_shown(block: Any, index: int) -> bool:
    """Whether line ``index`` of the block is inside its visible box and the window."""
    shown: bool = block.evaluate(
        """(el, index) => {
          const node = el.firstChild;
          const text = node.textContent;
          let start = 0;
          for (let i = 0; i < index; i += 1) start = text.indexOf('\\n', start) + 1;
          let end = text.indexOf('\\n', start);
          if (end < 0) end = text.length;
          const range = document.createRange();
          range.setStart(node, start);
          range.setEnd(node, end);
          const line = range.getBoundingClientRect();
          const box = el.getBoundingClientRect();
          return line.height > 0 && line.top >= box.top - 1 && line.bottom <= box.bottom + 1
            && line.top >= 0 && line.bottom <= innerHeight;
        }""",
        index,
    )
    return shown


# ---------------------------------------------------------------- the card's plain words


def stand_in_fields(ui: NaviPage, *, once_only: bool) -> Callable[[Frame], Frame]:
    """The consent fields as the consent branch defines them, added to the real frame."""

    def change(frame: Frame) -> Frame:
        path = (frame.get("args") or {}).get("path", "?")
        target = f"/var/lib/navi/files/{ui.session_id}/{path}"
        scope = (
            None
            if once_only
            else {"key": "filesystem:write", "label": "Allow file writes in this chat"}
        )
        return {
            **frame,
            "stream_id": frame.get("subagent_id") or ui.session_id,
            "summary": f"Write the file {target}",
            "target": target,
            "risk": "changes a file in this chat's folder",
            "asked_by": "Navi, for your message",
            "session_scope": scope,
        }

    return change


@pytest.mark.parametrize("source", ["stand-in", "stand-in-once-only", "server"])
def test_the_card_says_what_will_happen_and_the_decision_names_its_stream(
    ui: NaviPage, llm: LLMScript, navi_server: Any, source: str
) -> None:
    llm(Reply(tool_calls=[write("notes.txt", LONG)]), Reply(text="Written."))
    server = source == "server"
    tap = FrameTap(
        ui.page,
        change=None if server else stand_in_fields(ui, once_only=source.endswith("once-only")),
    )
    # Today's server refuses a field it does not know: the stand-in takes it out again.
    decisions = DecisionTap(ui.page, strip_stream_id=not server)
    ui.open()
    page = ui.page
    ui.send("Write my notes")
    panel = open_panels(ui)
    frame = tap.requests[-1]
    if server and "summary" not in frame:
        pytest.skip(NEEDS_CONSENT)
    expect(prompt(ui)).to_be_focused()

    # The headline is the summary; where, the risk and who asked, in the frame's words.
    expect(panel.get_by_test_id("approval-summary")).to_have_text(frame["summary"])
    expect(panel).to_have_attribute("aria-label", f"Approval: {frame['summary']}")
    expect(panel.locator(".approval-where")).to_have_text(frame["target"])
    expect(panel.locator(".approval-risk")).to_have_text(frame["risk"])
    expect(panel.locator(".approval-asked-by")).to_have_text(frame["asked_by"])
    expect(panel.locator(".approval-who")).to_have_count(0)  # the old line with rule jargon
    expect(panel.get_by_role("button", name="Approve for this session")).to_have_count(0)
    # The whole content, not its first line.
    expect(panel.locator("pre.approval-value").last).to_have_text(LONG)
    scope = frame["session_scope"]
    buttons = panel.get_by_role("button")
    if scope is None:
        expect(buttons).to_have_text(["Approve", "Deny"])
        choice, decided = panel.get_by_role("button", name="Approve", exact=True), "Approved"
    else:
        expect(buttons).to_have_text(["Approve", scope["label"], "Deny"])
        choice = panel.get_by_role("button", name=scope["label"], exact=True)
        decided = "Approved for this session"
    ui.shot("words")

    choice.click()
    ui.wait_idle()
    expect(page.locator('[data-testid="approval"].decided')).to_have_text(decided)
    assert written(navi_server, ui.session_id, "notes.txt").read_text() == LONG
    assert decisions.bodies == [
        {
            "decision": "approve",
            "scope": "once" if scope is None else "session",
            "stream_id": frame["stream_id"],
        }
    ]


def test_the_cards_words_are_shown_as_text_never_as_markup(
    ui: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    """The summary and target are built from the model's arguments: a path that is
    markup stays text (no element, no script), in the card as in its arguments."""
    path = '<img src=x onerror="window.pwned=1">.txt'
    llm(Reply(tool_calls=[write(path)]), Reply(text="Not written."))
    FrameTap(ui.page, change=stand_in_fields(ui, once_only=False))
    DecisionTap(ui.page, strip_stream_id=True)  # (today's server refuses stream_id)
    ui.open()
    ui.send("Write it")
    panel = open_panels(ui)
    expect(panel.get_by_test_id("approval-summary")).to_contain_text(path)
    expect(panel.locator(".approval-where")).to_contain_text(path)
    expect(panel.locator("img")).to_have_count(0)
    assert ui.page.evaluate("window.pwned === undefined")
    panel.get_by_role("button", name="Deny").click()
    ui.wait_idle()


def test_two_subagents_cards_each_decide_their_own_call(
    ui: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    """The issue's first case, seen from the page: two subagents wait at once (on a server
    before the consent branch, both first calls are ``call_4_0``); the click on one card
    decides that call only, named by the ``stream_id`` of its frame."""
    llm(
        Reply(tool_calls=[spawn("Write one"), spawn("Write two")]),
        Reply(tool_calls=[write("one.txt")]),
        Reply(tool_calls=[write("two.txt")]),
        Reply(text="Done."),
        repeat_last=True,
    )
    tap = FrameTap(ui.page)
    decisions = DecisionTap(ui.page)
    ui.open()
    page = ui.page
    ui.send("Two subagents, two files")
    open_panels(ui, 2)
    if any("stream_id" not in frame for frame in tap.requests):
        pytest.skip(NEEDS_CONSENT)
    frames = {frame["args"]["path"]: frame for frame in tap.requests}
    # Each card marked by the file it writes (its call id may be its sibling's too).
    page.locator('[data-testid="approval"]').evaluate_all(
        """(els) => els.forEach((el) => {
          el.dataset.testPath = el.textContent.includes('two.txt') ? 'two' : 'one'; })"""
    )
    one = page.locator('[data-testid="approval"][data-test-path="one"]')
    two = page.locator('[data-testid="approval"][data-test-path="two"]')

    two.get_by_role("button", name="Approve", exact=True).click()
    expect(two).to_have_class(re.compile(r"\bapproved\b"))
    nothing_sent_to(one)
    assert decisions.bodies == [
        {"decision": "approve", "scope": "once", "stream_id": frames["two.txt"]["stream_id"]}
    ]
    left = waiting(navi_server, ui.session_id)
    assert [frame["args"]["path"] for frame in left] == ["one.txt"]

    one.get_by_role("button", name="Deny").click()
    expect(one).to_have_class(re.compile(r"\bdeclined\b"))
    ui.wait_idle()
    cards = page.locator('.subagent .tool-card[data-tool="filesystem"]')
    expect(cards.filter(has=page.locator(".tool-summary", has_text="two.txt"))).to_have_class(
        re.compile(r"\bok\b")
    )
    expect(cards.filter(has=page.locator(".tool-summary", has_text="one.txt"))).to_have_class(
        re.compile(r"\bfailed\b")
    )
    assert decisions.bodies[1]["stream_id"] == frames["one.txt"]["stream_id"]


def test_a_frame_from_an_older_server_shows_the_card_as_before(
    ui: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    """No consent fields (a server or a log from before them): the tool, the rule that
    asked, "Approve for this session", and a decision without stream_id."""
    llm(Reply(tool_calls=[write("notes.txt", LONG)]), Reply(text="Written."))
    FrameTap(ui.page, change=without_consent_fields)
    decisions = DecisionTap(ui.page)
    ui.open()
    page = ui.page
    ui.send("Write my notes")
    panel = open_panels(ui)
    expect(prompt(ui)).to_be_focused()
    expect(panel).to_contain_text("Waiting for your approval")
    expect(panel.locator(".approval-who")).to_have_text(
        "Navi asks to run filesystem · asked by: filesystem's default"
    )
    expect(panel.get_by_test_id("approval-summary")).to_have_count(0)
    expect(panel.locator(".approval-facts")).to_have_count(0)
    expect(panel.locator(".approval-args dt .approval-key")).to_have_text(
        ["action", "path", "content"]
    )
    expect(panel.locator("pre.approval-value").last).to_have_text(LONG)
    expect(panel.get_by_role("button")).to_have_text(
        ["Approve", "Approve for this session", "Deny"]
    )
    panel.get_by_role("button", name="Approve for this session").click()
    ui.wait_idle()
    expect(page.locator('[data-testid="approval"].decided')).to_have_text(
        "Approved for this session"
    )
    assert decisions.bodies == [{"decision": "approve", "scope": "session"}]
