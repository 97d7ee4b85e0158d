"""A server that needs a token: the page asks once, keeps it, sends it on REST (the
Authorization header), opens its WebSocket with a single-use ticket (never the token in
a URL), and asks again when the server refuses it."""

from __future__ import annotations

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

from navi.server.auth import Users
from tests.support.fake_llm import FakeLLMServer, Reply
from tests.support.navi_server import run_server
from tests.web.conftest import TIMEOUT_MS, LLMScript, NaviPage

TOKEN = "web-client-test-token-0123456789"


@pytest.fixture
def guarded_server(tmp_path: Path) -> Iterator[Any]:
    users = Users.configure(host="127.0.0.1", api_token=TOKEN, users_file="")
    with FakeLLMServer.in_thread() as fake, run_server(tmp_path, fake, users=users) as running:
        yield running


def test_the_token_is_asked_once_kept_and_asked_again_when_refused(
    browser: Any, guarded_server: Any, request: pytest.FixtureRequest
) -> None:
    llm = LLMScript(guarded_server.fake_llm)
    llm(Reply(text="Authorised answer."))
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    ui = NaviPage(page, guarded_server.url, request.node.name)
    try:
        page.goto(guarded_server.url + "/")
        dialog = page.locator('[data-testid="token-dialog"]')
        expect(dialog).to_be_visible()
        ui.shot("asked")
        dialog.locator("input").fill(TOKEN)
        dialog.locator('button[value="ok"]').click()
        expect(dialog).to_have_count(0)
        page.wait_for_selector("#profile-select option", state="attached")
        assert page.evaluate("localStorage.getItem('navi.token')") == TOKEN

        # REST (Bearer) and the WebSocket (?ticket=) both work: a whole turn runs.
        ui.send("Hello with a token")
        ui.wait_idle()
        expect(page.locator(".message.assistant")).to_contain_text("Authorised answer.")
        assert sockets and all("ticket=" in url and TOKEN not in url for url in sockets)

        # Kept: a reload asks nothing.
        ui.open(ui.session_id)
        expect(page.locator(".message.assistant")).to_contain_text("Authorised answer.")
        expect(dialog).to_have_count(0)

        # A token the server refuses is asked for again.
        page.evaluate("localStorage.setItem('navi.token', 'a-wrong-token-of-some-length')")
        page.reload()
        expect(dialog).to_be_visible()
        expect(dialog).to_contain_text("did not accept")
        dialog.locator("input").fill(TOKEN)
        dialog.locator('button[value="ok"]').click()
        expect(page.locator(".message.assistant")).to_contain_text("Authorised answer.")
    finally:
        ui.shot()
        context.close()
