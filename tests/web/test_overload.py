"""A full server (NAVI_MAX_LIVE_RUNS): the turn says "Queued (N ahead)" instead of a
stall, then answers."""

from __future__ import annotations

import json
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
from websockets.sync.client import connect

from tests.support.fake_llm import Reply
from tests.support.navi_server import navi_server_for
from tests.web.conftest import LLMScript, NaviPage


@pytest.fixture
def navi_server(tmp_path: Path) -> Iterator[Any]:
    with navi_server_for(tmp_path, max_live_runs=1) as running:
        yield running


def test_a_run_in_line_says_queued_then_answers(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    llm(Reply(text="The busy one.", delay_first=3.0), Reply(text="Your answer."))
    with httpx.Client(base_url=navi_server.url) as http:
        other = http.post("/sessions", json={"profile_id": "secretary"}).json()["session_id"]
    with connect(f"{navi_server.ws_url}/ws/sessions/{other}") as ws:
        ws.send(json.dumps({"type": "message", "content": "take the only place"}))
        ui = navi_page.open()
        ui.send("Hello")
        queued = ui.page.get_by_test_id("queued")
        expect(queued).to_have_text("Queued (0 ahead) · the server is busy")
        ui.shot("queued")
        expect(ui.page.locator(".message.assistant").last).to_contain_text(
            "Your answer.", timeout=20_000
        )
        expect(queued).to_have_count(0)
        ui.wait_idle()
