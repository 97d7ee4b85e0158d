"""The model's server away for longer than the retries: the page says so in a banner
with "Try again now", the run stays open (GET /sessions/{id} says ``waiting_for_llm``),
and once the server is back the click goes on with the same turn."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from tests.support.fake_llm import FakeLLMServer, Reply
from tests.support.helpers import free_port
from tests.support.navi_server import run_server
from tests.web.conftest import NaviPage


@pytest.fixture
def llm_port() -> int:
    return free_port()


@pytest.fixture
def navi_server(tmp_path: Path, llm_port: int) -> Iterator[Any]:
    """Navi whose model's server has gone away (no retry, the first probe a minute off:
    only the click goes on soon)."""
    with ExitStack() as fakes:
        fake = fakes.enter_context(FakeLLMServer.in_thread(port=llm_port))
        with run_server(tmp_path, fake, llm_retries=0, llm_retry_backoff_s=60.0) as running:
            fakes.close()
            yield running


def test_the_banner_says_the_server_is_away_and_try_again_goes_on(
    navi_page: NaviPage, navi_server: Any, llm_port: int
) -> None:
    ui = navi_page.open()
    ui.send("Hello")
    banner = ui.page.locator("#llm-away-banner")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("The model's server is not answering")
    with httpx.Client(base_url=navi_server.url) as http:
        session = http.get(f"/sessions/{ui.session_id}").json()
    assert session["run_state"] == "waiting_for_llm" and session["run_active"] is True
    ui.shot("away")
    with FakeLLMServer.in_thread(port=llm_port) as back:
        back.script(Reply(text="Back again."))
        banner.get_by_role("button", name="Try again now").click()
        expect(ui.page.locator(".message.assistant").last).to_contain_text("Back again.")
        expect(banner).to_be_hidden()
        ui.wait_idle()
