"""Settings → "MCP servers waiting for a sign-in" in the browser: a remote MCP server
that wants an OAuth sign-in is listed with a "Sign in" link; the link opens its
authorization page in a new tab, which comes back to Navi's callback, Navi connects
and the notice is gone the next time Settings open."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)
pytest.importorskip("mcp")

from playwright.sync_api import expect

from tests.navi.mcp.oauth_server import OAuthMcpServer, oauth_mcp_server
from tests.navi.mcp.support import write_config
from tests.support.fake_llm import FakeLLMServer
from tests.support.helpers import free_port
from tests.support.navi_server import run_server
from tests.web.conftest import NaviPage
from tests.web.test_settings_connection import _open_settings


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def _until(check: Any, limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.fixture
def remote() -> Iterator[OAuthMcpServer]:
    with oauth_mcp_server() as server:
        yield server


@pytest.fixture
def navi_server(tmp_path: Path, remote: OAuthMcpServer) -> Iterator[Any]:
    """Navi (open access) with one remote server that wants a sign-in."""
    config = write_config(tmp_path / "mcp.json", {"remote": {"url": remote.url}})
    with (
        FakeLLMServer.in_thread() as fake,
        run_server(tmp_path, fake, port=free_port(), mcp_config=str(config)) as running,
    ):
        _until(lambda: _get(running.url + "/mcp/sign-ins")["servers"])
        yield running


def test_settings_lead_to_the_sign_in_and_navi_connects(
    navi_page: NaviPage, navi_server: Any, remote: OAuthMcpServer
) -> None:
    ui = navi_page.open()
    dialog = _open_settings(ui)
    notice = dialog.get_by_test_id("mcp-sign-ins")
    expect(notice).to_contain_text("MCP servers waiting for a sign-in")
    expect(notice).to_contain_text("remote")
    link = notice.get_by_role("link", name="Sign in")
    assert (link.get_attribute("href") or "").startswith(
        remote.url.removesuffix("/mcp") + "/authorize?"
    )
    assert link.get_attribute("target") == "_blank"
    with ui.page.context.expect_page() as opened:
        link.click()
    tab = opened.value
    expect(tab.locator("h1")).to_have_text("Signed in")
    assert tab.url.startswith(navi_server.url + "/mcp/oauth/callback?")
    tab.close()

    tools = navi_server.url + "/agents/tools"
    _until(lambda: "mcp__remote__echo" in {t["name"] for t in _get(tools)})
    dialog.get_by_role("button", name="Cancel").click()
    dialog = _open_settings(ui)
    expect(dialog.locator("select[name=think]")).to_be_visible()
    expect(dialog.get_by_test_id("mcp-sign-ins")).to_have_count(0)
