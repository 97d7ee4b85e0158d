"""The small things of the page a designer would not ship (issue 33, point 5): a top bar
that keeps the profile and the model readable on a phone, a settings icon that is not
the light theme's sun, one search row per chat (its versions inside), a fork that says
where it came from (linked), and the Replay view in plain words."""

from __future__ import annotations

import re
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
from tests.web.conftest import LLMScript, NaviPage
from tests.web.views import DESKTOP, PHONE

# How much room the selected option's text needs, against the room its <select> has.
ROOM = """(select) => {
  const style = getComputedStyle(select);
  const g = document.createElement('canvas').getContext('2d');
  g.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  const text = select.options[select.selectedIndex]?.text || '';
  const needed = g.measureText(text).width + parseFloat(style.paddingLeft) + parseFloat(style.paddingRight);
  return { text, needed, has: select.clientWidth };
}"""


def _readable(page: Any, selector: str) -> str:
    room = page.locator(selector).evaluate(ROOM)
    assert room["text"], f"{selector} shows nothing"
    assert room["needed"] <= room["has"] + 1, f"{selector} cuts “{room['text']}”: {room}"
    box = page.locator(selector).bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    return str(room["text"])


def test_the_phone_top_bar_keeps_profile_and_model_readable(
    navi_page: NaviPage, llm: LLMScript
) -> None:
    page = navi_page.page
    page.set_viewport_size(PHONE)
    llm(Reply(text="Hello.", prompt_tokens=1500))
    ui = navi_page.open()
    expect(page.locator("#model-select option").first).to_have_text(re.compile(r"^Default"))
    # A chat with its meter, Export and Replay: the busiest the bar gets.
    ui.send("Hi")
    ui.wait_idle()
    for button in ("#export-button", "#replay-button", "#context-meter", "#menu-button"):
        expect(page.locator(button)).to_be_visible()
    profile = _readable(page, "#profile-select")
    model = _readable(page, "#model-select")
    assert model.startswith("Default")
    assert "…" not in profile + model
    # Nothing overlaps: the pickers end before the meter and the buttons begin.
    pickers = page.locator(".topbar-pickers").bounding_box()
    meter = page.locator("#context-meter").bounding_box()
    assert pickers is not None and meter is not None
    assert pickers["x"] + pickers["width"] <= meter["x"] + 1
    ui.shot("phone")


def test_the_settings_icon_is_not_the_sun(navi_page: NaviPage) -> None:
    page = navi_page.open().page
    icons = page.evaluate(
        """async () => {
          const { icon } = await import('/js/icons.js');
          return { sun: icon('sun').innerHTML, settings: icon('settings').innerHTML };
        }"""
    )
    button = page.locator("#settings-button svg").evaluate("svg => svg.outerHTML")
    assert button == icons["settings"]
    assert button != icons["sun"]
    # A toothed wheel (one closed outline around the hub), not a disc with rays.
    outline = page.locator("#settings-button svg path")
    expect(outline).to_have_count(1)
    assert (outline.get_attribute("d") or "").rstrip().endswith("z")
    expect(page.locator("#settings-button svg circle")).to_have_count(1)


def _regenerate(ui: NaviPage, llm: LLMScript, text: str) -> str:
    """Regenerate the last answer; returns the new version's session id."""
    page = ui.page
    llm(Reply(text=text))
    before = ui.session_id
    page.locator(".message.assistant").last.locator('[data-action="regenerate"]').click()
    expect(page).not_to_have_url(re.compile(f"#{before}$"))
    ui.wait_idle()
    return ui.session_id


def test_search_lists_one_row_per_chat(navi_page: NaviPage, llm: LLMScript) -> None:
    llm(Reply(text="Otters hold hands."))
    ui = navi_page.open()
    page = ui.page
    ui.send("Tell me about otters")
    ui.wait_idle()
    _regenerate(ui, llm, "Otters sleep holding hands.")
    shown = _regenerate(ui, llm, "Otters float on their backs.")
    items = page.locator(".session-item")
    expect(items).to_have_count(1)
    # The search finds every version (title and content): one row, with the count.
    page.fill("#session-search", "otters")
    row = items.first
    expect(row).to_have_attribute("data-session-id", shown)
    expect(row.locator(".version-badge")).to_have_text("3")
    # Words of one version's answer only: still that chat's one row.
    page.fill("#session-search", "float on their backs")
    expect(items).to_have_count(1)
    expect(row.locator(".session-match")).to_contain_text("float on their backs")


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_fork_says_where_it_came_from(
    navi_page: NaviPage, llm: LLMScript, size: dict[str, int]
) -> None:
    llm(Reply(text="Tea."))
    navi_page.page.set_viewport_size(size)
    ui = navi_page.open()
    page = ui.page
    ui.send("Tea or coffee?")
    ui.wait_idle()
    original = ui.session_id
    expect(page.locator('[data-testid="fork-origin"]')).to_have_count(0)
    _regenerate(ui, llm, "Coffee.")
    line = page.locator('#conversation [data-testid="fork-origin"]')
    expect(line).to_contain_text("Continued from “Tea or coffee?”")
    link = line.locator("a.fork-origin-link")
    expect(link).to_have_attribute("href", f"#{original}")
    box = line.bounding_box()
    assert box is not None and box["x"] + box["width"] <= size["width"]
    ui.shot("fork")
    # After a reload too (the list may come later than the chat).
    page.reload()
    expect(line).to_contain_text("Continued from “Tea or coffee?”")
    line.locator("a.fork-origin-link").click()
    expect(page).to_have_url(re.compile(f"#{original}$"))
    expect(page.locator("#conversation")).to_contain_text("Tea.")
    expect(page.locator('#conversation [data-testid="fork-origin"]')).to_have_count(0)


def test_replay_speaks_plain_words(navi_page: NaviPage, llm: LLMScript) -> None:
    llm(
        Reply(
            tool_calls=[
                FakeToolCall(name="todo", arguments={"action": "set", "items": [{"text": "Pack"}]})
            ]
        ),
        Reply(text="Packed."),
    )
    ui = navi_page.open()
    page = ui.page
    ui.send("Pack for me")
    ui.wait_idle()
    page.locator("#replay-button").click()
    position = page.locator("#replay-position")
    expect(position).to_have_text(re.compile(r"^Step (\d+) of \1 · Navi finished answering$"))
    llm_spans = page.locator('.tl-span[data-kind="llm"]')
    expect(llm_spans.filter(has_text="Model answers").first).to_be_visible()
    expect(llm_spans.filter(has_text=re.compile(r"^LLM"))).to_have_count(0)
    context = page.locator("#replay-context")
    expect(context.locator(".ctx-msg").first).to_be_visible()
    expect(context.locator(".ctx-seq").first).to_be_hidden()
    info = page.locator("#replay-info")
    expect(info.locator(".replay-info-main.plain")).to_contain_text(
        re.compile(r"Navi: (done|not working)")
    )
    expect(info.locator(".replay-info-main.tech")).to_be_hidden()
    assert "run:" not in info.inner_text() and "run.completed" not in info.inner_text()
    assert not re.search(r"[a-z]+\.[a-z_]+", position.inner_text()), "no event types"
    # The technical view, one click away (and remembered).
    page.locator("#replay-technical").click()
    expect(page.locator("#replay-technical")).to_have_attribute("aria-pressed", "true")
    expect(position).to_have_text(re.compile(r"^event (\d+) of \1 · run\.completed$"))
    expect(llm_spans.filter(has_text=re.compile(r"^LLM loop")).first).to_be_visible()
    expect(context.locator(".ctx-seq").first).to_be_visible()
    expect(info.locator(".replay-info-main.tech")).to_contain_text("run.completed")
    page.reload()
    expect(page.locator("#replay-technical")).to_have_attribute("aria-pressed", "true")
    page.locator("#replay-technical").click()
    expect(position).to_have_text(re.compile(r"^Step \d+"))
