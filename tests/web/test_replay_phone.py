"""The Replay view at phone width: its controls fit on screen, and playing from the start
replaces "Nothing said yet" with what was said."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from tests.web.conftest import LLMScript, NaviPage
from tests.web.test_replay import events, open_replay, record
from tests.web.views import PHONE, shoot_all


def test_replay_on_a_phone(navi_page: NaviPage, llm: LLMScript, navi_server: Any) -> None:
    sid = record(navi_server.url, llm)
    head = events(navi_server.url, sid)[-1]["seq"]
    ui = navi_page
    ui.page.set_viewport_size(PHONE)
    page = open_replay(ui, sid)
    for control in ("#replay-back", "#replay-step-back", "#replay-play", "#replay-step"):
        box = page.locator(control).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (
            control,
            box,
        )
    conversation = page.locator("#replay-conversation")
    page.locator(".tl-frame").focus()
    page.keyboard.press("Home")
    expect(conversation.locator(".replay-empty")).to_have_text("Nothing said yet at this point.")
    shoot_all(ui, "replay-start")

    page.select_option("#replay-speed", "max")
    page.locator("#replay-play").click()
    expect(page.locator("#replay-position")).to_contain_text(f"Step {head} of {head}")
    expect(conversation).to_contain_text("Have a good trip!")
    expect(conversation.locator(".replay-empty")).to_have_count(0)
    # Every event of the run is drawn across the track, not squeezed to one side.
    track = page.locator(".tl-track").first.bounding_box()
    spans = page.locator('.tl-lane[data-lane] .tl-span[data-kind="run"]')
    last = spans.last.bounding_box()
    assert track is not None and last is not None
    assert last["x"] + last["width"] > track["x"] + track["width"] * 0.6
    shoot_all(ui, "replay-played")
