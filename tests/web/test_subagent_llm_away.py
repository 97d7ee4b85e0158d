"""A subagent's run waits for the model's server: the parent's page shows the banner,
saying a subagent waits, and its "Try again now" goes on with the subagent's run; the
banner goes and the turn ends with the answer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from tests.support.fake_llm import FakeLLMServer, FakeToolCall, Reply
from tests.support.helpers import free_port
from tests.support.navi_server import run_server
from tests.web.conftest import NaviPage

SPAWN = FakeToolCall(name="spawn_agent", arguments={"task": "Read the todo list."})


@pytest.fixture
def llm_port() -> int:
    return free_port()


@pytest.fixture
def fakes() -> Iterator[ExitStack]:
    with ExitStack() as stack:
        yield stack


@pytest.fixture
def navi_server(tmp_path: Path, llm_port: int, fakes: ExitStack) -> Iterator[Any]:
    """Navi whose model's server answers the parent, then goes away while the subagent
    asks it (no retry, the first probe a minute off: only the click goes on soon)."""
    fake = fakes.enter_context(FakeLLMServer.in_thread(port=llm_port))
    fake.script(Reply(tool_calls=[SPAWN]), Reply(text="late", delay_first=60))
    with run_server(tmp_path, fake, llm_retries=0, llm_retry_backoff_s=60.0) as running:
        yield running


def test_a_subagent_waiting_for_the_server_shows_the_banner_and_try_again_goes_on(
    navi_page: NaviPage, navi_server: Any, llm_port: int, fakes: ExitStack
) -> None:
    ui = navi_page.open()
    ui.send("Delegate it.")
    deadline = time.monotonic() + 20
    while len(navi_server.fake_llm.requests) < 2:  # the subagent is asking
        assert time.monotonic() < deadline, "the subagent never asked the model"
        time.sleep(0.02)
    fakes.close()  # the server goes away mid-answer
    banner = ui.page.locator("#llm-away-banner")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("A subagent waits for the model's server")
    ui.shot("subagent-away")
    with FakeLLMServer.in_thread(port=llm_port) as back:
        back.script(Reply(text="The list is empty."), Reply(text="It is empty."))
        banner.get_by_role("button", name="Try again now").click()
        expect(banner).to_be_hidden()
        expect(ui.page.locator(".message.assistant").last).to_contain_text("It is empty.")
        ui.wait_idle()
        assert len(back.requests) == 2  # the subagent's call, then the parent's: once each
