"""Signing in to an OAuth-protected MCP server from a real ``navi serve``, as a user does:
the server answers 401, Navi lists it as waiting for a sign-in with a link, the user's
browser (httpx here) follows the link to the authorization server and back to Navi's
callback, Navi connects and the LLM calls the server's tool; the tokens are in the data
folder (0600) and a restarted Navi uses them without a new sign-in."""

from __future__ import annotations

import json
import stat
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.navi.mcp.oauth_server import oauth_mcp_server
from tests.navi.mcp.support import write_config
from tests.navi.mcp.test_navi_serve import listed, turn, wait_until
from tests.security.conftest import NaviServerProcess
from tests.support.fake_llm_script import FakeToolCall

pytest.importorskip("mcp")


def sign_ins(server: NaviServerProcess) -> list[dict[str, Any]]:
    with server.client() as http:
        answer = http.get("/mcp/sign-ins")
        assert answer.status_code == 200, answer.text
        found: list[dict[str, Any]] = answer.json()["servers"]
        return found


def test_sign_in_through_navi_serve_and_reuse_after_a_restart(
    tmp_path: Any, start_navi: Any
) -> None:
    with oauth_mcp_server() as remote:
        config = write_config(tmp_path / "mcp.json", {"remote": {"url": remote.url}})
        server = start_navi(env={"NAVI_MCP_CONFIG": str(config)}, canary_row=False)
        wait_until(lambda: bool(sign_ins(server)))
        [waiting] = sign_ins(server)
        assert waiting["name"] == "remote"
        assert waiting["link"] == "/mcp/remote/sign-in"
        assert waiting["url"].startswith(remote.url.removesuffix("/mcp") + "/authorize?")
        # The link is logged; the authorization URL, whose state lets a callback in, never.
        state = parse_qs(urlsplit(waiting["url"]).query)["state"][0]
        assert "/mcp/remote/sign-in" in server.logs()
        assert state not in server.logs()

        # The user's browser: Navi's link → the authorization page → Navi's callback.
        browser = httpx.get(server.url + waiting["link"], follow_redirects=True, timeout=30)
        assert browser.status_code == 200, browser.text
        assert "Navi is connecting to remote" in browser.text
        hops = [str(r.url).split("?")[0] for r in browser.history]
        assert hops == [
            server.url + "/mcp/remote/sign-in",
            remote.url.removesuffix("/mcp") + "/authorize",
        ]
        assert str(browser.url).startswith(server.url + "/mcp/oauth/callback?")
        assert remote.provider.redirect_uris == [server.url + "/mcp/oauth/callback"]

        wait_until(lambda: "mcp__remote__echo" in listed(server))
        assert sign_ins(server) == []
        sid = server.create_session("secretary")
        turn(server, sid, FakeToolCall(name="mcp__remote__echo", arguments={"text": "hi"}))
        assert remote.calls == ["hi"]

        # The data folder: the platform's (no NAVI_DATA_DIR), under the server's HOME.
        kept = server.home / ".local/share/navi/secrets/mcp_oauth/remote.json"
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        secrets = [*remote.provider.access, *remote.provider.refresh]
        assert secrets and all(s in kept.read_text() for s in remote.provider.refresh)

        # Nothing of the sign-in in the log lines, the session's export or its events.
        with server.client() as http:
            export = http.get(f"/sessions/{sid}/export")
        assert export.status_code == 200
        for text in (server.logs(), export.content.decode("utf-8", "replace")):
            assert not [s for s in secrets if s in text]
        client_info = json.loads(json.loads(kept.read_text())["client_info"])
        if client_info.get("client_secret"):
            assert client_info["client_secret"] not in server.logs()

        server.restart()
        wait_until(lambda: "mcp__remote__echo" in listed(server))
        assert sign_ins(server) == []
        assert remote.provider.authorizations == 1
        turn(server, sid, FakeToolCall(name="mcp__remote__echo", arguments={"text": "again"}))
        assert remote.calls == ["hi", "again"]
